-- Jobs: long-running commands a sandbox's runtime runs and watches (ship keeps the process,
-- output and status; bay keeps this row). The environment of a job is never stored.
CREATE TABLE jobs (
    id               TEXT    NOT NULL PRIMARY KEY,
    owner            TEXT    NOT NULL,
    sandbox_id       TEXT    NOT NULL,
    session_id       TEXT    NOT NULL DEFAULT '',
    kind             TEXT    NOT NULL,
    command          TEXT    NOT NULL,
    cwd              TEXT,
    timeout_seconds  INTEGER NOT NULL,
    description      TEXT,
    tags             TEXT,
    status           TEXT    NOT NULL,
    exit_code        INTEGER,
    reason           TEXT    NOT NULL DEFAULT '',
    stdout_bytes     INTEGER NOT NULL DEFAULT 0,
    stderr_bytes     INTEGER NOT NULL DEFAULT 0,
    stdout_truncated INTEGER NOT NULL DEFAULT 0,
    stderr_truncated INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,
    ended_at         INTEGER,
    -- {"artifacts": [...], "note": "..."} once ended: the files the job created or changed.
    artifacts        TEXT
) STRICT;
CREATE INDEX jobs_sandbox_created ON jobs (sandbox_id, created_at);
CREATE INDEX jobs_status ON jobs (status);
