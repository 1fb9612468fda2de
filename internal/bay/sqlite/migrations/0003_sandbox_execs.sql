-- 0003_sandbox_execs: the audit records of one-shot executions (POST /v1/sandbox/execs). The
-- whole record is the JSON in `record`; the columns the listings filter and order on repeat it.
CREATE TABLE sandbox_execs (
    id         TEXT    NOT NULL PRIMARY KEY,
    owner      TEXT    NOT NULL,
    project_id TEXT    NOT NULL,
    task_id    TEXT    NOT NULL DEFAULT '',
    status     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    record     TEXT    NOT NULL
) STRICT;
CREATE INDEX sandbox_execs_owner_created ON sandbox_execs (owner, created_at);
CREATE INDEX sandbox_execs_status ON sandbox_execs (status);
