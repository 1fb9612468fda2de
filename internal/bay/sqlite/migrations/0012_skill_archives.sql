-- The skill versions' content in the database, so that every bay on it can serve and mount any
-- version: the normalised archive of each version (a gzip-compressed tar, at most
-- skills.max_archive_bytes), keyed by the version (the content hash it unpacks to), with the
-- archive's own sha256. Written once with the version, never changed; a version's name may be
-- deleted from the library, its archive stays (running sessions mount it). Times are INTEGER
-- microseconds.
-- NEVER edit this file once released: add a new numbered migration instead.
CREATE TABLE skill_archives (
    version    TEXT    NOT NULL PRIMARY KEY,
    sha256     TEXT    NOT NULL,
    size_bytes INTEGER NOT NULL,
    data       BLOB    NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;
