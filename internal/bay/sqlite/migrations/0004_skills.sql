-- The skill library (internal/bay/skills): immutable versions, the current version of each
-- name, and the skills a create request asked for on top of its profile's.
CREATE TABLE skill_versions (
    name        TEXT    NOT NULL,
    version     TEXT    NOT NULL,
    description TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    manifest    BLOB,
    files       TEXT    NOT NULL,
    size_bytes  INTEGER NOT NULL,
    uploaded_by TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (name, version)
) STRICT;

CREATE TABLE skills (
    name       TEXT    NOT NULL PRIMARY KEY COLLATE NOCASE,
    version    TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    FOREIGN KEY (name, version) REFERENCES skill_versions (name, version)
) STRICT;

CREATE TABLE sandbox_skills (
    sandbox_id TEXT    NOT NULL,
    position   INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    PRIMARY KEY (sandbox_id, position)
) STRICT;
