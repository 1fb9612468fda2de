-- The secret a session's runtime (ship) requires on every call but /health: bay generates it
-- per session and passes it to the container's environment. '' (sessions started before this
-- migration) means the runtime was started without one.
ALTER TABLE sessions ADD COLUMN runtime_token TEXT NOT NULL DEFAULT '';
