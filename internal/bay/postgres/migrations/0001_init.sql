-- 0001_init: the initial schema of bay's state (the same tables, columns and meaning as the
-- SQLite store's 0001_init).
-- Timestamps are timestamptz (microsecond precision). Optional strings are NULL when empty where
-- a query tests them (current_session_id, cargo_id, managed_by_sandbox_id, session_id).
-- Identifiers compare and sort bytewise (COLLATE "C"), as in SQLite, whatever the database's
-- locale: cursor paging (id > $1 ORDER BY id) gives the same pages on both stores.
-- Code, output and error of an execution are bytea: a program's output may hold NUL bytes and
-- invalid UTF-8, which a PostgreSQL text value cannot.
-- NEVER edit this file once released: add a new numbered migration instead.

CREATE TABLE cargos (
    id                    text COLLATE "C" NOT NULL PRIMARY KEY,
    owner                 text COLLATE "C" NOT NULL,
    backend               text        NOT NULL,
    driver_ref            text        NOT NULL,
    managed               boolean     NOT NULL DEFAULT false,
    managed_by_sandbox_id text COLLATE "C",
    size_limit_mb         bigint      NOT NULL DEFAULT 0,
    created_at            timestamptz NOT NULL,
    last_accessed_at      timestamptz NOT NULL
);
CREATE INDEX cargos_owner_managed_id ON cargos (owner, managed, id);
CREATE INDEX cargos_managed_by_sandbox_id ON cargos (managed_by_sandbox_id);

-- sandboxes.cargo_id has no foreign key on purpose: a managed cargo row is deleted with its
-- sandbox while the (soft-deleted) sandbox row keeps pointing at it.
CREATE TABLE sandboxes (
    id                   text COLLATE "C" NOT NULL PRIMARY KEY,
    owner                text COLLATE "C" NOT NULL,
    profile_id           text COLLATE "C" NOT NULL,
    cargo_id             text COLLATE "C",
    current_session_id   text COLLATE "C",
    expires_at           timestamptz,
    idle_expires_at      timestamptz,
    deleted_at           timestamptz,
    created_at           timestamptz NOT NULL,
    last_active_at       timestamptz NOT NULL,
    version              bigint      NOT NULL DEFAULT 1,
    is_warm              boolean     NOT NULL DEFAULT false,
    warm_state           text        NOT NULL DEFAULT '',
    warm_ready_at        timestamptz,
    warm_rotate_at       timestamptz,
    warm_claimed_at      timestamptz,
    warm_attempts        bigint      NOT NULL DEFAULT 0,
    warm_next_attempt_at timestamptz,
    warm_instance_id     text        NOT NULL DEFAULT ''
);
CREATE INDEX sandboxes_owner_id ON sandboxes (owner, id);
CREATE INDEX sandboxes_idle_expires_at ON sandboxes (idle_expires_at);
CREATE INDEX sandboxes_expires_at ON sandboxes (expires_at);
CREATE INDEX sandboxes_warm ON sandboxes (is_warm, profile_id, warm_state, warm_ready_at);
CREATE INDEX sandboxes_cargo_id ON sandboxes (cargo_id);
CREATE INDEX sandboxes_current_session_id ON sandboxes (current_session_id);

CREATE TABLE sessions (
    id               text COLLATE "C" NOT NULL PRIMARY KEY,
    sandbox_id       text COLLATE "C" NOT NULL REFERENCES sandboxes (id),
    profile_id       text        NOT NULL,
    runtime_type     text        NOT NULL DEFAULT '',
    container_id     text        NOT NULL DEFAULT '',
    endpoint         text        NOT NULL DEFAULT '',
    containers       jsonb, -- array of SessionContainer; NULL for single-container sessions
    desired_state    text        NOT NULL,
    observed_state   text        NOT NULL,
    instance_id      text        NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL,
    started_at       timestamptz,
    last_observed_at timestamptz
);
CREATE INDEX sessions_sandbox_id ON sessions (sandbox_id);

CREATE TABLE execution_history (
    id                 text COLLATE "C" NOT NULL PRIMARY KEY,
    owner              text COLLATE "C" NOT NULL,
    sandbox_id         text COLLATE "C" NOT NULL,
    session_id         text COLLATE "C",
    exec_type          text        NOT NULL,
    code               bytea       NOT NULL DEFAULT '',
    success            boolean     NOT NULL DEFAULT false,
    execution_time_ms  bigint      NOT NULL DEFAULT 0,
    output             bytea,
    error              bytea,
    payload_ref        text,
    description        text,
    tags               text,
    notes              text,
    learn_enabled      boolean     NOT NULL DEFAULT false,
    learn_status       text,
    learn_error        text,
    learn_processed_at timestamptz,
    created_at         timestamptz NOT NULL
);
CREATE INDEX execution_history_sandbox_created ON execution_history (sandbox_id, created_at);
CREATE INDEX execution_history_owner_created ON execution_history (owner, created_at);

CREATE TABLE idempotency_keys (
    owner       text COLLATE "C" NOT NULL,
    key         text COLLATE "C" NOT NULL,
    fingerprint text        NOT NULL,
    status_code integer     NOT NULL,
    response    bytea       NOT NULL,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (owner, key)
);
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);

CREATE TABLE api_keys (
    id         text COLLATE "C" NOT NULL PRIMARY KEY,
    key_hash   text        NOT NULL UNIQUE,
    key_prefix text        NOT NULL,
    owner      text COLLATE "C" NOT NULL,
    active     boolean     NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL
);

CREATE TABLE leases (
    name       text COLLATE "C" NOT NULL PRIMARY KEY,
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL
);
