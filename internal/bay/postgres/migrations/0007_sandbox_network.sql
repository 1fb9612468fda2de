-- A sandbox's effective network policy as JSON ({"mode": ..., "allow": [...], "deny": [...]}),
-- written when a create request or a PATCH tightens its profile's policy. '' (sandboxes created
-- before this migration or without a policy of their own) means the profile's policy.
ALTER TABLE sandboxes ADD COLUMN network TEXT NOT NULL DEFAULT '';
