-- Reuse keys: POST /v1/sandboxes with reuse {key} returns the owner's sandbox for the key, or
-- creates it. The primary key makes the mapping atomic across concurrent calls and bays.
CREATE TABLE sandbox_reuse_keys (
    owner      TEXT NOT NULL,
    key        TEXT NOT NULL,
    sandbox_id TEXT NOT NULL,
    PRIMARY KEY (owner, key)
) STRICT;
