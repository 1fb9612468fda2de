package bayapi

// Admin API: API keys, owners and the warm pool. Every route needs an admin key (403
// forbidden otherwise).
const (
	PathAdminKeys     = "/v1/admin/keys"
	PathAdminKey      = "/v1/admin/keys/{key_id}"
	PathAdminOwners   = "/v1/admin/owners"
	PathAdminWarmPool = "/v1/admin/warmpool"
)

// CreateAPIKeyRequest is POST /v1/admin/keys. Keys of the owner "default" are admin keys.
type CreateAPIKeyRequest struct {
	Owner string `json:"owner" maxLength:"64" doc:"owner the key acts as: 1-64 of A-Z a-z 0-9 _ . -; not warm-pool"`
	Name  string `json:"name" maxLength:"64" doc:"what the key is for, 1-64 characters"`
}

// APIKeyInfo is one key as the admin API shows it: never the secret nor its hash.
type APIKeyInfo struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Prefix string `json:"prefix" doc:"first 12 characters of the key, to recognise it"`
	Owner  string `json:"owner"`
	Admin  bool   `json:"admin"`
	// Source is "config" (BAY_API_KEY, security.api_key, security.api_keys: revoke it there)
	// or "stored" (created through this API, or generated on first boot).
	Source     string `json:"source"`
	Active     bool   `json:"active"`
	CreatedAt  Time   `json:"created_at"`
	LastUsedAt *Time  `json:"last_used_at" doc:"when a bay last accepted the key, to about a minute; null: never"`
	RevokedAt  *Time  `json:"revoked_at"`
}

// CreatedAPIKey is the answer of POST /v1/admin/keys: the only time the secret is shown.
type CreatedAPIKey struct {
	APIKeyInfo
	Key string `json:"key" doc:"the secret; shown only in this answer, bay stores its SHA-256 hash"`
}

// APIKeyList is GET /v1/admin/keys: every key, revoked ones included, oldest first.
type APIKeyList struct {
	Items []APIKeyInfo `json:"items"`
}

// OwnerInfo is one owner that has keys.
type OwnerInfo struct {
	Owner       string `json:"owner"`
	ActiveKeys  int    `json:"active_keys"`
	RevokedKeys int    `json:"revoked_keys"`
	Admin       bool   `json:"admin" doc:"one of its active keys is an admin key"`
	Sandboxes   int    `json:"sandboxes" doc:"live sandboxes (warm pool excluded)"`
}

// OwnerList is GET /v1/admin/owners, by owner.
type OwnerList struct {
	Items []OwnerInfo `json:"items"`
}

// WarmPoolProfile is one profile's warm pool. Hits and misses are counted by this bay since
// it started (other bays on the same database count their own).
type WarmPoolProfile struct {
	Profile  string `json:"profile"`
	Target   int    `json:"target" doc:"warm sandboxes to keep"`
	Ready    int    `json:"ready" doc:"available to claim"`
	Starting int    `json:"starting" doc:"being warmed up"`
	Retiring int    `json:"retiring" doc:"being replaced or removed"`
	Hits     int64  `json:"hits" doc:"creates served from the pool by this bay since it started"`
	Misses   int64  `json:"misses" doc:"creates of this profile that found no warm sandbox, on this bay since it started"`
}

// WarmPoolStatus is GET /v1/admin/warmpool: the configured pools, by profile.
type WarmPoolStatus struct {
	Enabled         bool              `json:"enabled"`
	IntervalSeconds int               `json:"interval_seconds"`
	Profiles        []WarmPoolProfile `json:"profiles"`
}
