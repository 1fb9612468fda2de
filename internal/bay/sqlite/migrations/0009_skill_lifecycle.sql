-- 0010_skill_lifecycle: artifact blobs (skill payloads, browser traces), skill candidates,
-- their evaluations and releases. JSON documents are TEXT; times INTEGER microseconds.
-- A release's version is unique per owner and skill, and at most one release of a skill is
-- active: the indexes hold this even if two writers raced.
-- NEVER edit this file once released: add a new numbered migration instead.

CREATE TABLE artifact_blobs (
    id         TEXT    NOT NULL PRIMARY KEY,
    owner      TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    payload    TEXT    NOT NULL,
    size_bytes INTEGER NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX artifact_blobs_owner ON artifact_blobs (owner, id);

CREATE TABLE skill_candidates (
    id                    TEXT    NOT NULL PRIMARY KEY,
    owner                 TEXT    NOT NULL,
    skill_key             TEXT    NOT NULL,
    scenario_key          TEXT,
    payload_ref           TEXT,
    skill_type            TEXT    NOT NULL,
    auto_release_eligible INTEGER NOT NULL DEFAULT 0,
    auto_release_reason   TEXT,
    summary               TEXT,
    usage_notes           TEXT,
    preconditions_json    TEXT,
    postconditions_json   TEXT,
    source_execution_ids  TEXT    NOT NULL,
    status                TEXT    NOT NULL,
    created_by            TEXT,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL,
    latest_score          REAL,
    latest_pass           INTEGER,
    last_evaluated_at     INTEGER,
    promotion_release_id  TEXT,
    is_deleted            INTEGER NOT NULL DEFAULT 0,
    deleted_at            INTEGER,
    deleted_by            TEXT,
    delete_reason         TEXT
) STRICT;
CREATE INDEX skill_candidates_owner_created ON skill_candidates (owner, is_deleted, created_at);

CREATE TABLE skill_evaluations (
    id           TEXT    NOT NULL PRIMARY KEY,
    owner        TEXT    NOT NULL,
    candidate_id TEXT    NOT NULL REFERENCES skill_candidates (id),
    benchmark_id TEXT,
    score        REAL,
    passed       INTEGER NOT NULL,
    report       TEXT,
    evaluated_by TEXT,
    created_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX skill_evaluations_candidate ON skill_evaluations (candidate_id, created_at);

CREATE TABLE skill_releases (
    id                    TEXT    NOT NULL PRIMARY KEY,
    owner                 TEXT    NOT NULL,
    skill_key             TEXT    NOT NULL,
    candidate_id          TEXT    NOT NULL REFERENCES skill_candidates (id),
    version               INTEGER NOT NULL,
    stage                 TEXT    NOT NULL,
    is_active             INTEGER NOT NULL DEFAULT 0,
    release_mode          TEXT    NOT NULL,
    promoted_by           TEXT,
    promoted_at           INTEGER NOT NULL,
    rollback_of           TEXT,
    auto_promoted_from    TEXT,
    health_window_end_at  INTEGER,
    upgrade_of_release_id TEXT,
    upgrade_reason        TEXT,
    change_summary        TEXT,
    is_deleted            INTEGER NOT NULL DEFAULT 0,
    deleted_at            INTEGER,
    deleted_by            TEXT,
    delete_reason         TEXT,
    UNIQUE (owner, skill_key, version)
) STRICT;
CREATE UNIQUE INDEX skill_releases_one_active ON skill_releases (owner, skill_key) WHERE is_active = 1;
CREATE INDEX skill_releases_owner_promoted ON skill_releases (owner, is_deleted, promoted_at);
CREATE INDEX skill_releases_candidate ON skill_releases (candidate_id);

-- Browser learning reads the executions waiting for it, oldest first.
CREATE INDEX execution_history_learning ON execution_history (created_at)
    WHERE learn_enabled = 1 AND (learn_status IS NULL OR learn_status IN ('pending', 'processing'));
