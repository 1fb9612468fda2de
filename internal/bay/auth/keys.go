package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
)

// Bounds of the key administration.
const (
	// MaxStoredKeys bounds the rows of api_keys (revoked ones included): every one is held in
	// memory and compared on every request.
	MaxStoredKeys = 1000
	// MaxKeyNameLen bounds a key's name in characters.
	MaxKeyNameLen = 64
	// touchEvery is how often at most one bay writes a key's last use.
	touchEvery = time.Minute
	// RefreshInterval is how often Run re-reads the keys, so that a key created or revoked
	// through another bay on the same database is honoured here within about this long.
	RefreshInterval = time.Second
)

// Key sources as the admin API reports them.
const (
	SourceConfig = "config" // BAY_API_KEY, security.api_key or security.api_keys
	SourceStored = "stored" // created through the admin API, or generated on first boot
)

// KeyInfo is one key as the admin API lists it: never the secret nor its hash.
type KeyInfo struct {
	ID         string
	Name       string
	Prefix     string
	Owner      string
	Admin      bool
	Source     string
	Active     bool
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// OwnerInfo is one owner that has keys.
type OwnerInfo struct {
	Owner       string
	ActiveKeys  int
	RevokedKeys int
	Admin       bool // one of its active keys is an admin key
	Sandboxes   int  // live sandboxes (warm pool excluded)
}

// CreatedKey is the answer of CreateKey: the only time the secret is known.
type CreatedKey struct {
	KeyInfo
	Secret string
}

// writer is the store the key administration writes to.
func (a *Authenticator) writer() (bay.Store, error) {
	st, ok := a.store.(bay.Store)
	if !ok {
		return nil, bay.Errorf(bay.CodeUnavailable, "Key administration is not available")
	}
	return st, nil
}

// info renders a stored key, resolving its owner and admin flag as Reload does.
func (a *Authenticator) info(k *bay.APIKey) KeyInfo {
	h := strings.ToLower(k.KeyHash)
	owner, source := k.Owner, SourceStored
	if o, ok := a.ownerOverride[h]; ok {
		owner, source = o, SourceConfig
	}
	if owner == "" {
		owner = bay.OwnerDefault
	}
	return KeyInfo{
		ID: k.ID, Name: k.Name, Prefix: k.KeyPrefix, Owner: owner, Source: source,
		Admin:     owner == bay.OwnerDefault || a.adminHashes[h],
		Active:    k.Active && (source == SourceConfig || !a.onlyConfigured),
		CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt,
	}
}

// ListKeys returns every stored key, revoked ones included, oldest first.
func (a *Authenticator) ListKeys(ctx context.Context) ([]KeyInfo, error) {
	stored, err := a.store.ListAllAPIKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("auth: list api keys: %w", err)
	}
	out := make([]KeyInfo, 0, len(stored))
	for _, k := range stored {
		out = append(out, a.info(k))
	}
	return out, nil
}

// ValidateKeyRequest checks the owner and name of a key to create; errors are
// validation_error with the field in the details.
func ValidateKeyRequest(owner, name string) error {
	field := func(f, format string, args ...any) error {
		return bay.Errorf(bay.CodeValidation, format, args...).WithDetails(map[string]any{"field": f})
	}
	if !config.OwnerRe.MatchString(owner) {
		return field("owner", "owner must be 1-64 characters of A-Z, a-z, 0-9, '_', '.', '-'")
	}
	if owner == bay.OwnerWarmPool {
		return field("owner", "owner %q is reserved", owner)
	}
	if strings.TrimSpace(name) == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxKeyNameLen {
		return field("name", "name must be 1-%d characters and not blank", MaxKeyNameLen)
	}
	if strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return field("name", "name must not contain control characters")
	}
	return nil
}

// CreateKey stores a new key of owner named name and returns its secret, which is not kept
// anywhere: only its SHA-256 hash is stored. Keys of the owner "default" are admin keys. The
// key is accepted by this bay at once, by the others on the same database within
// RefreshInterval.
func (a *Authenticator) CreateKey(ctx context.Context, owner, name string, now time.Time) (*CreatedKey, error) {
	if err := ValidateKeyRequest(owner, name); err != nil {
		return nil, err
	}
	if a.onlyConfigured {
		return nil, bay.Errorf(bay.CodeConflict, "security.revoke_unlisted_keys is set: bay accepts only the keys of its configuration")
	}
	st, err := a.writer()
	if err != nil {
		return nil, err
	}
	plain, err := generateKey()
	if err != nil {
		return nil, bay.Internal("Could not generate a key", err)
	}
	row := &bay.APIKey{ID: newUUID(), KeyHash: config.KeyHash(plain), KeyPrefix: plain[:12], Owner: owner,
		Active: true, CreatedAt: now.UTC().Truncate(time.Microsecond), Name: strings.TrimSpace(name)}
	err = st.Tx(ctx, func(tx bay.Tx) error {
		all, err := tx.ListAllAPIKeys(ctx)
		if err != nil {
			return err
		}
		if len(all) >= MaxStoredKeys {
			return bay.Errorf(bay.CodeConflict, "At most %d keys can be stored (revoked ones included)", MaxStoredKeys)
		}
		return tx.InsertAPIKey(ctx, row)
	})
	if err != nil {
		return nil, bay.Classify(err, "Could not store the key")
	}
	a.reloadAfterChange(ctx)
	a.log.InfoContext(ctx, "api key created", "key_id", row.ID, "owner", owner, "prefix", row.KeyPrefix)
	return &CreatedKey{KeyInfo: a.info(row), Secret: plain}, nil
}

// RevokeKey revokes key id: this bay refuses it at once, the others on the same database
// within RefreshInterval. Keys of the configuration cannot be revoked here (they would be
// stored again at the next start), nor the last active admin key (nobody could administer
// bay any more). Revoking a revoked key changes nothing.
func (a *Authenticator) RevokeKey(ctx context.Context, id string, now time.Time) (*KeyInfo, error) {
	st, err := a.writer()
	if err != nil {
		return nil, err
	}
	var out KeyInfo
	err = st.Tx(ctx, func(tx bay.Tx) error {
		all, err := tx.ListAllAPIKeys(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(all, func(k *bay.APIKey) bool { return k.ID == id })
		if i < 0 {
			return bay.Errorf(bay.CodeNotFound, "API key not found: %s", id)
		}
		k := a.info(all[i])
		if k.Source == SourceConfig {
			return bay.Errorf(bay.CodeConflict, "This key is defined in bay's configuration: remove it there")
		}
		if !all[i].Active {
			out = k
			return nil
		}
		admins := 0
		for _, o := range all {
			if oi := a.info(o); oi.Active && oi.Admin {
				admins++
			}
		}
		if k.Admin && admins <= 1 {
			return bay.Errorf(bay.CodeConflict, "This is the last active admin key: create another admin key first")
		}
		if err := tx.RevokeAPIKey(ctx, id, now.UTC().Truncate(time.Microsecond)); err != nil {
			return err
		}
		all[i].Active, all[i].RevokedAt = false, ptr(now.UTC().Truncate(time.Microsecond))
		out = a.info(all[i])
		return nil
	})
	if err != nil {
		return nil, bay.Classify(err, "Could not revoke the key")
	}
	a.reloadAfterChange(ctx)
	a.log.InfoContext(ctx, "api key revoked", "key_id", id, "owner", out.Owner)
	return &out, nil
}

// Owners lists the owners that have stored keys, by name, with their live sandboxes.
func (a *Authenticator) Owners(ctx context.Context) ([]OwnerInfo, error) {
	keys, err := a.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	byOwner := map[string]*OwnerInfo{}
	for _, k := range keys {
		o := byOwner[k.Owner]
		if o == nil {
			o = &OwnerInfo{Owner: k.Owner}
			byOwner[k.Owner] = o
		}
		if k.Active {
			o.ActiveKeys++
			o.Admin = o.Admin || k.Admin
		} else {
			o.RevokedKeys++
		}
	}
	out := make([]OwnerInfo, 0, len(byOwner))
	notWarm := false
	for _, o := range byOwner {
		n, err := a.store.CountSandboxes(ctx, bay.SandboxQuery{Owner: o.Owner, Warm: &notWarm})
		if err != nil {
			return nil, fmt.Errorf("auth: count sandboxes of %s: %w", o.Owner, err)
		}
		o.Sandboxes = n
		out = append(out, *o)
	}
	slices.SortFunc(out, func(x, y OwnerInfo) int { return strings.Compare(x.Owner, y.Owner) })
	return out, nil
}

// reloadAfterChange re-reads the keys after this bay changed them. The change is committed;
// a failed reload leaves the previous keys in use until Run's next refresh, so it is logged,
// not returned.
func (a *Authenticator) reloadAfterChange(ctx context.Context) {
	if err := a.Reload(context.WithoutCancel(ctx)); err != nil {
		a.log.ErrorContext(ctx, "reload api keys after a change", "err", err)
	}
}

// Run refreshes the keys every RefreshInterval (keys created or revoked by another bay on the
// same database) and writes the last uses this bay saw, until ctx ends. It returns nil.
func (a *Authenticator) Run(ctx context.Context) error {
	t := time.NewTicker(RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			a.flushUses(context.WithoutCancel(ctx))
			return nil
		case <-t.C:
		}
		a.flushUses(ctx)
		if err := a.Reload(ctx); err != nil && ctx.Err() == nil {
			a.log.WarnContext(ctx, "refresh api keys", "err", err)
		}
	}
}

// noteUse records that key id was accepted at now; the write happens in flushUses, at most
// once per touchEvery and key.
func (a *Authenticator) noteUse(id string, now time.Time) {
	a.useMu.Lock()
	defer a.useMu.Unlock()
	if last, ok := a.written[id]; ok && now.Sub(last) < touchEvery {
		return
	}
	if a.pending == nil {
		a.pending = map[string]time.Time{}
	}
	a.pending[id] = now
}

// flushUses writes the recorded last uses in one transaction; on failure they are kept for
// the next attempt.
func (a *Authenticator) flushUses(ctx context.Context) {
	a.useMu.Lock()
	pending := a.pending
	a.pending = nil
	a.useMu.Unlock()
	if len(pending) == 0 {
		return
	}
	st, err := a.writer()
	if err != nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = st.Tx(cctx, func(tx bay.Tx) error {
		for id, at := range pending {
			if err := tx.TouchAPIKey(cctx, id, at.UTC().Truncate(time.Microsecond)); err != nil {
				return err
			}
		}
		return nil
	})
	a.useMu.Lock()
	defer a.useMu.Unlock()
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			a.log.WarnContext(ctx, "write api key last use", "err", err)
		}
		for id, at := range pending {
			if _, newer := a.pending[id]; !newer {
				if a.pending == nil {
					a.pending = map[string]time.Time{}
				}
				a.pending[id] = at
			}
		}
		return
	}
	if a.written == nil {
		a.written = map[string]time.Time{}
	}
	for id, at := range pending {
		a.written[id] = at
	}
}

func ptr[T any](v T) *T { return &v }
