-- API keys administered through /v1/admin/keys: a name the admin gave the key, when bay last
-- accepted it (written at most about once a minute per key and bay), and when it was revoked.
-- A revoked key keeps its row (active = false) so that the list still shows it and its hash
-- can never be stored again. NULL means never.
-- NEVER edit this file once released: add a new numbered migration instead.
ALTER TABLE api_keys ADD COLUMN name text NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
ALTER TABLE api_keys ADD COLUMN revoked_at timestamptz;
