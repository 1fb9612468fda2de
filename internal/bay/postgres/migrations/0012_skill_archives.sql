-- The skill versions' content in the database, so that every bay on it can serve and mount any
-- version: the normalised archive of each version (a gzip-compressed tar, at most
-- skills.max_archive_bytes), keyed by the version (the content hash it unpacks to), with the
-- archive's own sha256. Written once with the version, never changed; a version's name may be
-- deleted from the library, its archive stays (running sessions mount it).
-- NEVER edit this file once released: add a new numbered migration instead.
CREATE TABLE skill_archives (
    version    text COLLATE "C" NOT NULL PRIMARY KEY,
    sha256     text        NOT NULL,
    size_bytes bigint      NOT NULL,
    data       bytea       NOT NULL,
    created_at timestamptz NOT NULL
);
