-- The skill library (internal/bay/skills): immutable versions, the current version of each
-- name, and the skills a create request asked for on top of its profile's.
CREATE TABLE skill_versions (
    name        text COLLATE "C" NOT NULL,
    version     text COLLATE "C" NOT NULL,
    description text        NOT NULL,
    kind        text        NOT NULL,
    manifest    bytea,
    files       jsonb       NOT NULL,
    size_bytes  bigint      NOT NULL,
    uploaded_by text        NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE TABLE skills (
    name       text COLLATE "C" NOT NULL PRIMARY KEY,
    version    text COLLATE "C" NOT NULL,
    updated_at timestamptz NOT NULL,
    FOREIGN KEY (name, version) REFERENCES skill_versions (name, version)
);
-- Names are unique case-insensitively, as in SQLite's NOCASE.
CREATE UNIQUE INDEX skills_name_fold ON skills (lower(name));

CREATE TABLE sandbox_skills (
    sandbox_id text COLLATE "C" NOT NULL,
    position   integer NOT NULL,
    name       text COLLATE "C" NOT NULL,
    PRIMARY KEY (sandbox_id, position)
);
