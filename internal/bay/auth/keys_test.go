package auth

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

// TestKeyAdministration creates, uses, lists and revokes keys through two bays sharing one
// SQLite database: the bay that made a change honours it at once, the other at its next
// refresh; configured keys keep working and cannot be revoked; the secret is never stored.
func TestKeyAdministration(t *testing.T) {
	ctx := context.Background()
	c := cfgWith(func(c *config.Config) {
		c.Security.APIKey = "root-key"
		c.Security.APIKeys = []config.APIKeyConfig{{Key: "alice-key", Owner: "alice"}}
	})
	s1, bay1, bay2 := twoBays(t, c)
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

	created, err := bay1.CreateKey(ctx, "bob", "  ci runner ", now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.Secret, GeneratedKeyPrefix) || len(created.Secret) != len(GeneratedKeyPrefix)+64 ||
		created.Prefix != created.Secret[:12] || created.Name != "ci runner" || created.Owner != "bob" ||
		created.Admin || created.Source != SourceStored || !created.Active {
		t.Fatalf("created: %+v", created)
	}
	if owner, err := auth(bay1, "Authorization", "Bearer "+created.Secret); err != nil || owner != "bob" {
		t.Fatalf("new key on the bay that made it: %q %v", owner, err)
	}
	if _, err := auth(bay2, "Authorization", "Bearer "+created.Secret); bay.ErrorCode(err) != bay.CodeUnauthorized {
		t.Fatalf("new key on the other bay before its refresh: %v", err)
	}
	if err := bay2.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if owner, err := auth(bay2, "Authorization", "Bearer "+created.Secret); err != nil || owner != "bob" {
		t.Fatalf("new key on the other bay after its refresh: %q %v", owner, err)
	}

	// Only the hash is stored; the list never carries the secret.
	rows, _ := s1.ListAllAPIKeys(ctx)
	for _, r := range rows {
		if strings.Contains(r.KeyHash+r.KeyPrefix+r.Name, created.Secret) || r.KeyHash == created.Secret {
			t.Fatalf("secret stored: %+v", r)
		}
	}
	keys, err := bay1.ListKeys(ctx)
	if err != nil || len(keys) != 3 {
		t.Fatalf("list: %+v %v", keys, err)
	}
	bySource := map[string]int{}
	for _, k := range keys {
		bySource[k.Source]++
	}
	if bySource[SourceConfig] != 2 || bySource[SourceStored] != 1 {
		t.Fatalf("sources: %v", bySource)
	}

	// The last use is written by the refresh loop.
	bay1.flushUses(ctx)
	keys, _ = bay1.ListKeys(ctx)
	for _, k := range keys {
		if k.ID == created.ID && k.LastUsedAt == nil {
			t.Fatalf("last use not written: %+v", k)
		}
	}

	// Configured keys cannot be revoked; unknown ids are not found.
	for _, k := range keys {
		if k.Source == SourceConfig {
			if _, err := bay1.RevokeKey(ctx, k.ID, now); bay.ErrorCode(err) != bay.CodeConflict {
				t.Fatalf("revoke configured key %s: %v", k.Owner, err)
			}
		}
	}
	if _, err := bay1.RevokeKey(ctx, "nope", now); bay.ErrorCode(err) != bay.CodeNotFound {
		t.Fatalf("revoke unknown: %v", err)
	}

	// Revocation: refused at once by the bay that revoked, by the other after its refresh.
	rev, err := bay1.RevokeKey(ctx, created.ID, now.Add(time.Minute))
	if err != nil || rev.Active || rev.RevokedAt == nil {
		t.Fatalf("revoke: %+v %v", rev, err)
	}
	if _, err := auth(bay1, "Authorization", "Bearer "+created.Secret); bay.ErrorCode(err) != bay.CodeUnauthorized {
		t.Fatalf("revoked key on the bay that revoked it: %v", err)
	}
	if err := bay2.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := auth(bay2, "Authorization", "Bearer "+created.Secret); bay.ErrorCode(err) != bay.CodeUnauthorized {
		t.Fatalf("revoked key on the other bay: %v", err)
	}
	if _, err := bay1.RevokeKey(ctx, created.ID, now.Add(2*time.Minute)); err != nil {
		t.Fatalf("revoke again: %v", err)
	}
	for _, h := range []string{"Bearer root-key", "Bearer alice-key"} {
		if _, err := auth(bay2, "Authorization", h); err != nil {
			t.Fatalf("configured key %s after revocations: %v", h, err)
		}
	}

	owners, err := bay1.Owners(ctx)
	if err != nil || len(owners) != 3 || owners[0].Owner != "alice" || owners[1].Owner != "bob" ||
		owners[1].ActiveKeys != 0 || owners[1].RevokedKeys != 1 || !owners[2].Admin {
		t.Fatalf("owners: %+v %v", owners, err)
	}

	for _, tc := range []struct{ owner, name, field string }{
		{"", "x", "owner"}, {"bad owner", "x", "owner"}, {bay.OwnerWarmPool, "x", "owner"},
		{"bob", "   ", "name"}, {"bob", strings.Repeat("n", MaxKeyNameLen+1), "name"}, {"bob", "a\nb", "name"},
	} {
		_, err := bay1.CreateKey(ctx, tc.owner, tc.name, now)
		var be *bay.Error
		if bay.ErrorCode(err) != bay.CodeValidation || !asError(err, &be) || be.Details["field"] != tc.field {
			t.Errorf("create %q %q: %v", tc.owner, tc.name, err)
		}
	}
}

// TestRevokeLastAdmin: the last active admin key cannot be revoked, so that bay always has
// an administrator.
func TestRevokeLastAdmin(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, filepath.Join(t.TempDir(), "bay.db"))
	a, res, err := Provision(ctx, s, cfgWith(nil), nil, t.TempDir(), nil) // the generated key
	if err != nil || !res.Generated {
		t.Fatalf("provision: %+v %v", res, err)
	}
	keys, _ := a.ListKeys(ctx)
	if len(keys) != 1 || !keys[0].Admin || keys[0].Source != SourceStored {
		t.Fatalf("keys: %+v", keys)
	}
	if _, err := a.RevokeKey(ctx, keys[0].ID, time.Now()); bay.ErrorCode(err) != bay.CodeConflict {
		t.Fatalf("revoke the only admin key: %v", err)
	}
	second, err := a.CreateKey(ctx, bay.OwnerDefault, "second admin", time.Now())
	if err != nil || !second.Admin {
		t.Fatalf("create admin key: %+v %v", second, err)
	}
	if _, err := a.RevokeKey(ctx, keys[0].ID, time.Now()); err != nil {
		t.Fatalf("revoke the generated key once another admin exists: %v", err)
	}
	if _, err := a.RevokeKey(ctx, second.ID, time.Now()); bay.ErrorCode(err) != bay.CodeConflict {
		t.Fatalf("revoke the last admin key: %v", err)
	}
}

// TestCreateKeyOnlyConfigured: with security.revoke_unlisted_keys bay accepts only configured
// keys, so creating one is a conflict rather than a key that would never work.
func TestCreateKeyOnlyConfigured(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, filepath.Join(t.TempDir(), "bay.db"))
	c := cfgWith(func(c *config.Config) { c.Security.APIKey = "root-key"; c.Security.RevokeUnlistedKeys = true })
	a, _, err := Provision(ctx, s, c, nil, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateKey(ctx, "bob", "x", time.Now()); bay.ErrorCode(err) != bay.CodeConflict {
		t.Fatalf("create: %v", err)
	}
}

// TestRunRefreshes: Run picks up a key another bay created, within a few refresh intervals.
func TestRunRefreshes(t *testing.T) {
	ctx := context.Background()
	_, bay1, bay2 := twoBays(t, cfgWith(func(c *config.Config) { c.Security.APIKey = "root-key" }))
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- bay2.Run(rctx) }()
	defer func() { cancel(); <-done }()
	k, err := bay1.CreateKey(ctx, "bob", "x", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * RefreshInterval)
	for {
		if _, err := auth(bay2, "Authorization", "Bearer "+k.Secret); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other bay did not accept the new key within 5 refresh intervals")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func asError(err error, target **bay.Error) bool { return errors.As(err, target) }

// openStore opens the SQLite store at path, closed when the test ends.
func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// twoBays provisions c for two bays sharing one SQLite database; it returns the first bay's
// store and both authenticators.
func twoBays(t *testing.T, c *config.Config) (*sqlite.Store, *Authenticator, *Authenticator) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bay.db")
	var stores [2]*sqlite.Store
	var bays [2]*Authenticator
	for i := range bays {
		stores[i] = openStore(t, path)
		a, _, err := Provision(context.Background(), stores[i], c, nil, t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		bays[i] = a
	}
	return stores[0], bays[0], bays[1]
}
