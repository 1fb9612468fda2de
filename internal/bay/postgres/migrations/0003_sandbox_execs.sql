-- 0003_sandbox_execs: the audit records of one-shot executions (POST /v1/sandbox/execs). The
-- whole record is the JSON in `record`; the columns the listings filter and order on repeat it.
CREATE TABLE sandbox_execs (
    id         text COLLATE "C" NOT NULL PRIMARY KEY,
    owner      text COLLATE "C" NOT NULL,
    project_id text COLLATE "C" NOT NULL,
    task_id    text COLLATE "C" NOT NULL DEFAULT '',
    status     text             NOT NULL,
    created_at timestamptz      NOT NULL,
    record     jsonb            NOT NULL
);
CREATE INDEX sandbox_execs_owner_created ON sandbox_execs (owner, created_at);
CREATE INDEX sandbox_execs_status ON sandbox_execs (status);
