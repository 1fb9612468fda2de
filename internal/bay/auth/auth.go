// Package auth is bay's API-key authentication: provisioning of the configured keys into the
// store (only SHA-256 hashes are stored), first-boot key generation with credentials.json, and
// the per-request Authenticate, which differs from the reference where it was unsafe: keys
// have owners, X-Owner cannot claim a reserved owner, and anonymous access is off by default.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
)

// Header names read by Authenticate.
const (
	HeaderAuthorization = "Authorization"
	HeaderOwner         = "X-Owner"
	bearerPrefix        = "Bearer " // exact and case-sensitive, as in the reference
)

// compare is subtle.ConstantTimeCompare; a variable so that a test can prove it is used for
// every stored hash.
var compare = subtle.ConstantTimeCompare

type keyEntry struct {
	sum   [32]byte
	id    string
	owner string
	admin bool
}

// Authenticator maps bearer tokens to owners. It holds the hashes of the active keys in
// memory; Reload re-reads them from the store. It is safe for concurrent use: mu guards keys
// and keyOwners, which are replaced (never mutated) by Reload.
type Authenticator struct {
	store          bay.Reader
	allowAnonymous bool
	// ownerOverride maps a configured key's hash to its configured owner, which wins over the
	// owner stored with the same hash (the store has no update for keys).
	ownerOverride map[string]string
	// adminHashes are the configured keys with admin: true.
	adminHashes map[string]bool
	// onlyConfigured (security.revoke_unlisted_keys): stored keys that are not configured are
	// ignored.
	onlyConfigured bool
	log            *slog.Logger

	mu        sync.RWMutex
	keys      []keyEntry
	keyOwners map[string]bool // owners that have at least one key (reserved for X-Owner)

	// useMu guards the last uses: pending are waiting for flushUses, written were stored.
	useMu   sync.Mutex
	pending map[string]time.Time
	written map[string]time.Time
}

// Options configures an Authenticator built with New.
type Options struct {
	AllowAnonymous bool
	// OwnerOverride maps key hashes (sha256 hex) to the owner to use instead of the stored one.
	OwnerOverride map[string]string
	// AdminHashes are key hashes (sha256 hex) that are admins besides the keys of the owner
	// "default" (security.api_keys entries with admin: true).
	AdminHashes map[string]bool
	// OnlyConfigured, when set, accepts only the hashes present in OwnerOverride.
	OnlyConfigured bool
	Log            *slog.Logger
}

// New returns an Authenticator over the keys of store, without provisioning anything. Call
// Reload before use. Provision is the usual constructor.
func New(store bay.Reader, opts Options) *Authenticator {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	override := make(map[string]string, len(opts.OwnerOverride))
	for h, o := range opts.OwnerOverride {
		override[strings.ToLower(h)] = o
	}
	admins := make(map[string]bool, len(opts.AdminHashes))
	for h, ok := range opts.AdminHashes {
		admins[strings.ToLower(h)] = ok
	}
	return &Authenticator{
		store:          store,
		adminHashes:    admins,
		allowAnonymous: opts.AllowAnonymous,
		ownerOverride:  override,
		onlyConfigured: opts.OnlyConfigured,
		log:            log.With("component", "auth"),
		keyOwners:      map[string]bool{},
	}
}

// Reload re-reads the active keys from the store and replaces the in-memory hash map. On
// error the previous map stays in use.
func (a *Authenticator) Reload(ctx context.Context) error {
	stored, err := a.store.ListAPIKeys(ctx)
	if err != nil {
		return fmt.Errorf("auth: load api keys: %w", err)
	}
	keys := make([]keyEntry, 0, len(stored))
	owners := map[string]bool{}
	ignored := 0
	for _, k := range stored {
		h := strings.ToLower(k.KeyHash)
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != sha256.Size {
			a.log.WarnContext(ctx, "ignoring stored api key with a malformed hash", "key_id", k.ID)
			continue
		}
		owner := k.Owner
		if o, ok := a.ownerOverride[h]; ok {
			owner = o
		} else if a.onlyConfigured {
			ignored++
			continue
		}
		if owner == "" {
			owner = bay.OwnerDefault
		}
		var e keyEntry
		copy(e.sum[:], b)
		e.id, e.owner = k.ID, owner
		e.admin = owner == bay.OwnerDefault || a.adminHashes[h]
		keys = append(keys, e)
		owners[owner] = true
	}
	if ignored > 0 {
		a.log.InfoContext(ctx, "ignoring stored api keys that are not configured (security.revoke_unlisted_keys)", "count", ignored)
	}
	a.mu.Lock()
	a.keys, a.keyOwners = keys, owners
	a.mu.Unlock()
	return nil
}

// KeyCount returns how many keys are currently accepted.
func (a *Authenticator) KeyCount() int {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return len(a.keys)
}

// AllowAnonymous reports whether requests without a token are accepted.
func (a *Authenticator) AllowAnonymous() bool { return a.allowAnonymous }

// Authenticate returns the owner a request acts as:
//
//   - "Authorization: Bearer <token>" (exact prefix): sha256(token) is compared in constant
//     time with every accepted hash; a match gives that key's owner; no match is
//     unauthorized "Invalid API key", even in anonymous mode. With no key at all, anonymous
//     mode gives "default" and otherwise the request is unauthorized "Authentication required".
//   - no token, anonymous mode: X-Owner if non-empty, else "default". X-Owner must match
//     ^[A-Za-z0-9_.-]{1,64}$ (else validation_error) and must not be a reserved owner:
//     "warm-pool" or any owner other than "default" that has an API key (else unauthorized).
//   - no token, anonymous disabled: unauthorized "Authentication required".
//
// Errors are *bay.Error with CodeUnauthorized or CodeValidation.
func (a *Authenticator) Authenticate(r *http.Request) (string, error) {
	owner, _, err := a.Principal(r)
	return owner, err
}

// Principal is Authenticate that also says whether the request may administer bay (the skill
// library): true for a key of the owner "default" (security.api_key, BAY_API_KEY, the
// generated key) and for security.api_keys entries with admin: true; false for every other
// key and for anonymous requests.
func (a *Authenticator) Principal(r *http.Request) (owner string, admin bool, err error) {
	a.mu.RLock()
	keys, keyOwners := a.keys, a.keyOwners
	a.mu.RUnlock()

	if h := r.Header.Get(HeaderAuthorization); strings.HasPrefix(h, bearerPrefix) {
		if len(keys) == 0 {
			if a.allowAnonymous {
				return bay.OwnerDefault, false, nil
			}
			return "", false, errAuthRequired()
		}
		if k, ok := match(keys, h[len(bearerPrefix):]); ok {
			a.noteUse(k.id, time.Now())
			return k.owner, k.admin, nil
		}
		return "", false, bay.Errorf(bay.CodeUnauthorized, "Invalid API key")
	}
	if !a.allowAnonymous {
		return "", false, errAuthRequired()
	}
	owner = r.Header.Get(HeaderOwner)
	if owner == "" {
		return bay.OwnerDefault, false, nil
	}
	if !config.OwnerRe.MatchString(owner) {
		return "", false, bay.Errorf(bay.CodeValidation, "Invalid X-Owner header: must be 1-64 characters of A-Z, a-z, 0-9, '_', '.', '-'").
			WithDetails(map[string]any{"field": HeaderOwner})
	}
	if owner == bay.OwnerWarmPool || (owner != bay.OwnerDefault && keyOwners[owner]) {
		return "", false, bay.Errorf(bay.CodeUnauthorized, "Owner %q requires an API key", owner)
	}
	return owner, false, nil
}

func errAuthRequired() *bay.Error {
	return bay.Errorf(bay.CodeUnauthorized, "Authentication required")
}

// match compares sha256(token) with every key, always all of them, in constant time per key.
func match(keys []keyEntry, token string) (keyEntry, bool) {
	sum := sha256.Sum256([]byte(token))
	var k keyEntry
	found := false
	for i := range keys {
		if compare(sum[:], keys[i].sum[:]) == 1 && !found {
			k, found = keys[i], true
		}
	}
	return k, found
}
