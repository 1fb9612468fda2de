-- Several bays on one database: the deployment id ties what the bays create on the container
-- platform (the bay.deployment label) to this database, and each bay instance id's heartbeat
-- lets a live bay tell a bay that is gone from one that runs, and adopt the gone one's orphans.
-- The deployment id is drawn once, here; it never changes.
-- NEVER edit this file once released: add a new numbered migration instead.
CREATE TABLE deployment (
    singleton integer NOT NULL PRIMARY KEY CHECK (singleton = 1),
    id        text    NOT NULL
);
INSERT INTO deployment (singleton, id) VALUES (1, md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text));

CREATE TABLE bay_instances (
    id           text COLLATE "C" NOT NULL PRIMARY KEY,
    boot_id      text        NOT NULL,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);
