-- 0001_init: the initial schema of bay's state.
-- Timestamps are INTEGER microseconds since the Unix epoch, UTC. Optional strings are NULL when
-- empty where a query tests them (current_session_id, cargo_id, managed_by_sandbox_id, session_id).
-- NEVER edit this file once released: add a new numbered migration instead.

CREATE TABLE cargos (
    id                    TEXT    NOT NULL PRIMARY KEY,
    owner                 TEXT    NOT NULL,
    backend               TEXT    NOT NULL,
    driver_ref            TEXT    NOT NULL,
    managed               INTEGER NOT NULL DEFAULT 0,
    managed_by_sandbox_id TEXT,
    size_limit_mb         INTEGER NOT NULL DEFAULT 0,
    created_at            INTEGER NOT NULL,
    last_accessed_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX cargos_owner_managed_id ON cargos (owner, managed, id);
CREATE INDEX cargos_managed_by_sandbox_id ON cargos (managed_by_sandbox_id);

-- sandboxes.cargo_id has no foreign key on purpose: a managed cargo row is deleted with its
-- sandbox while the (soft-deleted) sandbox row keeps pointing at it.
CREATE TABLE sandboxes (
    id                   TEXT    NOT NULL PRIMARY KEY,
    owner                TEXT    NOT NULL,
    profile_id           TEXT    NOT NULL,
    cargo_id             TEXT,
    current_session_id   TEXT,
    expires_at           INTEGER,
    idle_expires_at      INTEGER,
    deleted_at           INTEGER,
    created_at           INTEGER NOT NULL,
    last_active_at       INTEGER NOT NULL,
    version              INTEGER NOT NULL DEFAULT 1,
    is_warm              INTEGER NOT NULL DEFAULT 0,
    warm_state           TEXT    NOT NULL DEFAULT '',
    warm_ready_at        INTEGER,
    warm_rotate_at       INTEGER,
    warm_claimed_at      INTEGER,
    warm_attempts        INTEGER NOT NULL DEFAULT 0,
    warm_next_attempt_at INTEGER,
    warm_instance_id     TEXT    NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX sandboxes_owner_id ON sandboxes (owner, id);
CREATE INDEX sandboxes_idle_expires_at ON sandboxes (idle_expires_at);
CREATE INDEX sandboxes_expires_at ON sandboxes (expires_at);
CREATE INDEX sandboxes_warm ON sandboxes (is_warm, profile_id, warm_state, warm_ready_at);
CREATE INDEX sandboxes_cargo_id ON sandboxes (cargo_id);
CREATE INDEX sandboxes_current_session_id ON sandboxes (current_session_id);

CREATE TABLE sessions (
    id               TEXT    NOT NULL PRIMARY KEY,
    sandbox_id       TEXT    NOT NULL REFERENCES sandboxes (id),
    profile_id       TEXT    NOT NULL,
    runtime_type     TEXT    NOT NULL DEFAULT '',
    container_id     TEXT    NOT NULL DEFAULT '',
    endpoint         TEXT    NOT NULL DEFAULT '',
    containers       TEXT, -- JSON array of SessionContainer; NULL for single-container sessions
    desired_state    TEXT    NOT NULL,
    observed_state   TEXT    NOT NULL,
    instance_id      TEXT    NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,
    last_observed_at INTEGER
) STRICT;
CREATE INDEX sessions_sandbox_id ON sessions (sandbox_id);

CREATE TABLE execution_history (
    id                 TEXT    NOT NULL PRIMARY KEY,
    owner              TEXT    NOT NULL,
    sandbox_id         TEXT    NOT NULL,
    session_id         TEXT,
    exec_type          TEXT    NOT NULL,
    code               TEXT    NOT NULL DEFAULT '',
    success            INTEGER NOT NULL DEFAULT 0,
    execution_time_ms  INTEGER NOT NULL DEFAULT 0,
    output             TEXT,
    error              TEXT,
    payload_ref        TEXT,
    description        TEXT,
    tags               TEXT,
    notes              TEXT,
    learn_enabled      INTEGER NOT NULL DEFAULT 0,
    learn_status       TEXT,
    learn_error        TEXT,
    learn_processed_at INTEGER,
    created_at         INTEGER NOT NULL
) STRICT;
CREATE INDEX execution_history_sandbox_created ON execution_history (sandbox_id, created_at);
CREATE INDEX execution_history_owner_created ON execution_history (owner, created_at);

CREATE TABLE idempotency_keys (
    owner       TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    fingerprint TEXT    NOT NULL,
    status_code INTEGER NOT NULL,
    response    BLOB    NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (owner, key)
) STRICT;
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);

CREATE TABLE api_keys (
    id         TEXT    NOT NULL PRIMARY KEY,
    key_hash   TEXT    NOT NULL UNIQUE,
    key_prefix TEXT    NOT NULL,
    owner      TEXT    NOT NULL,
    active     INTEGER NOT NULL DEFAULT 1,
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE leases (
    name       TEXT    NOT NULL PRIMARY KEY,
    holder     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;
