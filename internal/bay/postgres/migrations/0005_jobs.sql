-- Jobs: long-running commands a sandbox's runtime runs and watches (ship keeps the process,
-- output and status; bay keeps this row). The environment of a job is never stored.
CREATE TABLE jobs (
    id               text COLLATE "C" NOT NULL PRIMARY KEY,
    owner            text COLLATE "C" NOT NULL,
    sandbox_id       text COLLATE "C" NOT NULL,
    session_id       text COLLATE "C" NOT NULL DEFAULT '',
    kind             text        NOT NULL,
    command          text        NOT NULL,
    cwd              text,
    timeout_seconds  bigint      NOT NULL,
    description      text,
    tags             text,
    status           text        NOT NULL,
    exit_code        integer,
    reason           text        NOT NULL DEFAULT '',
    stdout_bytes     bigint      NOT NULL DEFAULT 0,
    stderr_bytes     bigint      NOT NULL DEFAULT 0,
    stdout_truncated boolean     NOT NULL DEFAULT false,
    stderr_truncated boolean     NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL,
    started_at       timestamptz,
    ended_at         timestamptz,
    -- {"artifacts": [...], "note": "..."} once ended: the files the job created or changed.
    artifacts        text
);
CREATE INDEX jobs_sandbox_created ON jobs (sandbox_id, created_at);
CREATE INDEX jobs_status ON jobs (status);
