-- Several bays on one database: the deployment id ties what the bays create on the container
-- platform (the bay.deployment label) to this database, and each bay instance id's heartbeat
-- lets a live bay tell a bay that is gone from one that runs, and adopt the gone one's orphans.
-- The deployment id is drawn once, here; it never changes. Times are INTEGER microseconds.
-- NEVER edit this file once released: add a new numbered migration instead.
CREATE TABLE deployment (
    singleton INTEGER NOT NULL PRIMARY KEY CHECK (singleton = 1),
    id        TEXT    NOT NULL
) STRICT;
INSERT INTO deployment (singleton, id) VALUES (1, lower(hex(randomblob(16))));

CREATE TABLE bay_instances (
    id           TEXT    NOT NULL PRIMARY KEY,
    boot_id      TEXT    NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
) STRICT;
