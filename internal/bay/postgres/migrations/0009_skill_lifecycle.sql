-- 0010_skill_lifecycle: artifact blobs (skill payloads, browser traces), skill candidates,
-- their evaluations and releases. JSON documents are text (as the SQLite store keeps them); times
-- timestamptz; identifiers compare bytewise (COLLATE "C").
-- A release's version is unique per owner and skill, and at most one release of a skill is
-- active: the indexes hold this even if two writers raced.
-- NEVER edit this file once released: add a new numbered migration instead.

CREATE TABLE artifact_blobs (
    id         text COLLATE "C" NOT NULL PRIMARY KEY,
    owner      text COLLATE "C" NOT NULL,
    kind       text NOT NULL,
    payload    text NOT NULL,
    size_bytes bigint NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX artifact_blobs_owner ON artifact_blobs (owner, id);

CREATE TABLE skill_candidates (
    id                    text COLLATE "C" NOT NULL PRIMARY KEY,
    owner                 text COLLATE "C" NOT NULL,
    skill_key             text COLLATE "C" NOT NULL,
    scenario_key          text,
    payload_ref           text,
    skill_type            text NOT NULL,
    auto_release_eligible boolean NOT NULL DEFAULT false,
    auto_release_reason   text,
    summary               text,
    usage_notes           text,
    preconditions_json    text,
    postconditions_json   text,
    source_execution_ids  text NOT NULL,
    status                text NOT NULL,
    created_by            text,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    latest_score          double precision,
    latest_pass           boolean,
    last_evaluated_at     timestamptz,
    promotion_release_id  text COLLATE "C",
    is_deleted            boolean NOT NULL DEFAULT false,
    deleted_at            timestamptz,
    deleted_by            text,
    delete_reason         text
);
CREATE INDEX skill_candidates_owner_created ON skill_candidates (owner, is_deleted, created_at);

CREATE TABLE skill_evaluations (
    id           text COLLATE "C" NOT NULL PRIMARY KEY,
    owner        text COLLATE "C" NOT NULL,
    candidate_id text COLLATE "C" NOT NULL REFERENCES skill_candidates (id),
    benchmark_id text,
    score        double precision,
    passed       boolean NOT NULL,
    report       text,
    evaluated_by text,
    created_at   timestamptz NOT NULL
);
CREATE INDEX skill_evaluations_candidate ON skill_evaluations (candidate_id, created_at);

CREATE TABLE skill_releases (
    id                    text COLLATE "C" NOT NULL PRIMARY KEY,
    owner                 text COLLATE "C" NOT NULL,
    skill_key             text COLLATE "C" NOT NULL,
    candidate_id          text COLLATE "C" NOT NULL REFERENCES skill_candidates (id),
    version               bigint NOT NULL,
    stage                 text NOT NULL,
    is_active             boolean NOT NULL DEFAULT false,
    release_mode          text NOT NULL,
    promoted_by           text,
    promoted_at           timestamptz NOT NULL,
    rollback_of           text,
    auto_promoted_from    text,
    health_window_end_at  timestamptz,
    upgrade_of_release_id text,
    upgrade_reason        text,
    change_summary        text,
    is_deleted            boolean NOT NULL DEFAULT false,
    deleted_at            timestamptz,
    deleted_by            text,
    delete_reason         text,
    UNIQUE (owner, skill_key, version)
);
CREATE UNIQUE INDEX skill_releases_one_active ON skill_releases (owner, skill_key) WHERE is_active;
CREATE INDEX skill_releases_owner_promoted ON skill_releases (owner, is_deleted, promoted_at);
CREATE INDEX skill_releases_candidate ON skill_releases (candidate_id);

-- Browser learning reads the executions waiting for it, oldest first.
CREATE INDEX execution_history_learning ON execution_history (created_at)
    WHERE learn_enabled AND (learn_status IS NULL OR learn_status IN ('pending', 'processing'));
