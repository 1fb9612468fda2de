package auth

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
)

// memStore is an in-memory bay.Store with just the API-key methods; the embedded nil
// interfaces make any other call panic. Transactions are all-or-nothing: inserts are staged
// and applied only when fn succeeds and failCommit is not set.
type memStore struct {
	bay.Store
	mu         sync.Mutex
	keys       []*bay.APIKey
	failList   error
	failInsert error
	failCommit error
}

type memTx struct {
	bay.Tx
	s      *memStore
	staged []*bay.APIKey
}

func (s *memStore) ListAPIKeys(ctx context.Context) ([]*bay.APIKey, error) {
	all, err := s.ListAllAPIKeys(ctx)
	var out []*bay.APIKey
	for _, k := range all {
		if k.Active {
			out = append(out, k)
		}
	}
	return out, err
}

func (s *memStore) ListAllAPIKeys(ctx context.Context) ([]*bay.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failList != nil {
		return nil, s.failList
	}
	var out []*bay.APIKey
	for _, k := range s.keys {
		c := *k
		out = append(out, &c)
	}
	return out, nil
}

func (s *memStore) Tx(ctx context.Context, fn func(bay.Tx) error) error {
	tx := &memTx{s: s}
	if err := fn(tx); err != nil {
		return err
	}
	if s.failCommit != nil {
		return s.failCommit
	}
	s.mu.Lock()
	s.keys = append(s.keys, tx.staged...)
	s.mu.Unlock()
	return nil
}

func (t *memTx) ListAPIKeys(ctx context.Context) ([]*bay.APIKey, error) {
	out, err := t.s.ListAPIKeys(ctx)
	return append(out, t.staged...), err
}

func (t *memTx) ListAllAPIKeys(ctx context.Context) ([]*bay.APIKey, error) {
	out, err := t.s.ListAllAPIKeys(ctx)
	return append(out, t.staged...), err
}

func (t *memTx) InsertAPIKey(ctx context.Context, k *bay.APIKey) error {
	if t.s.failInsert != nil {
		return t.s.failInsert
	}
	c := *k
	t.staged = append(t.staged, &c)
	return nil
}

func (s *memStore) add(plain, owner string) {
	s.keys = append(s.keys, &bay.APIKey{ID: newUUID(), KeyHash: config.KeyHash(plain), Owner: owner, Active: true})
}

func cfgWith(f func(c *config.Config)) *config.Config {
	c := config.DefaultConfig()
	if f != nil {
		f(c)
	}
	if err := c.Validate(); err != nil {
		panic(err)
	}
	return c
}

func provision(t *testing.T, s *memStore, c *config.Config, env ...string) (*Authenticator, ProvisionResult) {
	t.Helper()
	a, res, err := Provision(context.Background(), s, c, env, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	return a, res
}

func auth(a *Authenticator, headers ...string) (string, error) {
	r := httptest.NewRequest("GET", "/v1/sandboxes", nil)
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	return a.Authenticate(r)
}

func wantCode(t *testing.T, err error, code, msg string) {
	t.Helper()
	var be *bay.Error
	if !errors.As(err, &be) {
		t.Fatalf("want *bay.Error %s, got %T %v", code, err, err)
	}
	if be.Code != code || (msg != "" && be.Message != msg) {
		t.Fatalf("got %s %q, want %s %q", be.Code, be.Message, code, msg)
	}
}

func TestProvisionGeneratesKeyOnFirstBoot(t *testing.T) {
	s := &memStore{}
	dir := filepath.Join(t.TempDir(), "data") // created by Provision
	c := cfgWith(func(c *config.Config) { c.Server.Host, c.Server.Port = "0.0.0.0", 9001 })
	a, res, err := Provision(context.Background(), s, c, nil, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "credentials.json")
	if !res.Generated || res.CredentialsPath != path || res.Inserted != 1 || res.Active != 1 {
		t.Fatalf("result %+v", res)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	var creds Credentials
	if err := json.Unmarshal(data, &creds); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^sk-bay-[0-9a-f]{64}$`).MatchString(creds.APIKey) {
		t.Errorf("key %q", creds.APIKey)
	}
	if creds.Endpoint != "http://127.0.0.1:9001" {
		t.Errorf("endpoint %q", creds.Endpoint)
	}
	if ts, err := time.Parse(time.RFC3339Nano, creds.GeneratedAt); err != nil || !strings.HasSuffix(creds.GeneratedAt, "+00:00") || time.Since(ts) > time.Minute {
		t.Errorf("generated_at %q %v", creds.GeneratedAt, err)
	}
	// Only the hash is stored.
	if len(s.keys) != 1 || s.keys[0].KeyHash != config.KeyHash(creds.APIKey) || s.keys[0].KeyPrefix != creds.APIKey[:12] ||
		s.keys[0].Owner != "default" || strings.Contains(s.keys[0].KeyHash, creds.APIKey) {
		t.Errorf("stored %+v", s.keys[0])
	}
	if owner, err := auth(a, "Authorization", "Bearer "+creds.APIKey); err != nil || owner != "default" {
		t.Errorf("generated key: %q %v", owner, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("leftover temp files: %v", entries)
	}

	// Second boot: the stored key is reused, nothing generated.
	dir2 := t.TempDir()
	_, res2, err := Provision(context.Background(), s, c, nil, dir2, nil)
	if err != nil || res2.Generated || res2.Inserted != 0 || res2.Active != 1 {
		t.Fatalf("second boot %+v %v", res2, err)
	}
	if _, err := os.Stat(filepath.Join(dir2, "credentials.json")); !os.IsNotExist(err) {
		t.Error("credentials written on second boot")
	}
}

func TestProvisionNoGenerationInAnonymousMode(t *testing.T) {
	s := &memStore{}
	a, res := provision(t, s, cfgWith(func(c *config.Config) { c.Security.AllowAnonymous = true }))
	if res.Generated || len(s.keys) != 0 || a.KeyCount() != 0 {
		t.Fatalf("%+v", res)
	}
	// No keys at all + anonymous: a bearer token is treated as anonymous "default" (reference).
	if owner, err := auth(a, "Authorization", "Bearer whatever"); err != nil || owner != "default" {
		t.Errorf("%q %v", owner, err)
	}
}

func TestProvisionFailuresLeaveNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *memStore
	}{
		{"insert fails", &memStore{failInsert: errors.New("disk full")}},
		{"commit fails", &memStore{failCommit: errors.New("database is locked")}},
		{"list fails", &memStore{failList: errors.New("no table")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			_, _, err := Provision(context.Background(), tc.s, cfgWith(nil), nil, dir, nil)
			if err == nil {
				t.Fatal("Provision succeeded")
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("left files behind: %v", entries)
			}
			if len(tc.s.keys) != 0 {
				t.Errorf("left keys behind: %v", tc.s.keys)
			}
		})
	}
}

func TestProvisionCredentialsWriteFailureRollsBack(t *testing.T) {
	s := &memStore{}
	file := filepath.Join(t.TempDir(), "not-a-dir")
	os.WriteFile(file, nil, 0o600)
	_, _, err := Provision(context.Background(), s, cfgWith(nil), nil, file, nil)
	if err == nil || len(s.keys) != 0 {
		t.Fatalf("err %v, keys %v", err, s.keys)
	}
}

func TestEnvKeyBeatsConfigKey(t *testing.T) {
	s := &memStore{}
	c := cfgWith(func(c *config.Config) { c.Security.APIKey = "from-config" })
	a, res := provision(t, s, c, "BAY_API_KEY=from-env")
	if res.Configured != 1 || res.Inserted != 1 || res.Generated {
		t.Fatalf("%+v", res)
	}
	if owner, err := auth(a, "Authorization", "Bearer from-env"); err != nil || owner != "default" {
		t.Errorf("env key: %q %v", owner, err)
	}
	_, err := auth(a, "Authorization", "Bearer from-config")
	wantCode(t, err, bay.CodeUnauthorized, "Invalid API key")
	if s.keys[0].KeyPrefix != "from-env" {
		t.Errorf("prefix %q", s.keys[0].KeyPrefix)
	}

	// Without the env var the config key is used; the env key stays valid (reference semantics).
	a, res = provision(t, s, c)
	if res.Inserted != 1 || res.Active != 2 {
		t.Fatalf("%+v", res)
	}
	for _, k := range []string{"from-env", "from-config"} {
		if _, err := auth(a, "Authorization", "Bearer "+k); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	// Provisioning again inserts nothing.
	if _, res = provision(t, s, c); res.Inserted != 0 {
		t.Errorf("re-provision inserted %d", res.Inserted)
	}
}

func TestMultiOwnerKeys(t *testing.T) {
	s := &memStore{}
	c := cfgWith(func(c *config.Config) {
		c.Security.APIKeys = []config.APIKeyConfig{
			{Key: "alice-key", Owner: "alice"},
			{KeySHA256: strings.ToUpper(config.KeyHash("bob-key")), Owner: "bob"},
			{Key: "default-key"},
		}
	})
	a, res := provision(t, s, c)
	if res.Configured != 3 || res.Inserted != 3 || res.Active != 3 {
		t.Fatalf("%+v", res)
	}
	for key, want := range map[string]string{"alice-key": "alice", "bob-key": "bob", "default-key": "default"} {
		if owner, err := auth(a, "Authorization", "Bearer "+key); err != nil || owner != want {
			t.Errorf("%s: %q %v", key, owner, err)
		}
	}
	for _, k := range s.keys {
		if k.Owner == "bob" && k.KeyPrefix != "" {
			t.Errorf("hash-only key has a prefix %q", k.KeyPrefix)
		}
	}
}

func TestConfiguredOwnerWinsOverStoredOwner(t *testing.T) {
	s := &memStore{}
	s.add("shared", "default")
	c := cfgWith(func(c *config.Config) { c.Security.APIKeys = []config.APIKeyConfig{{Key: "shared", Owner: "carol"}} })
	a, res := provision(t, s, c)
	if res.Inserted != 0 {
		t.Errorf("%+v", res)
	}
	if owner, _ := auth(a, "Authorization", "Bearer shared"); owner != "carol" {
		t.Errorf("owner %q", owner)
	}
}

func TestEnvKeyConflictsWithOwnedKey(t *testing.T) {
	c := cfgWith(func(c *config.Config) { c.Security.APIKeys = []config.APIKeyConfig{{Key: "k", Owner: "alice"}} })
	_, _, err := Provision(context.Background(), &memStore{}, c, []string{"BAY_API_KEY=k"}, t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), "different owners") {
		t.Fatalf("err %v", err)
	}
}

func TestRevokeUnlistedKeys(t *testing.T) {
	s := &memStore{}
	s.add("old-key", "default")
	c := cfgWith(func(c *config.Config) {
		c.Security.APIKey = "new-key"
		c.Security.RevokeUnlistedKeys = true
	})
	a, res := provision(t, s, c)
	if res.Active != 1 {
		t.Fatalf("%+v", res)
	}
	_, err := auth(a, "Authorization", "Bearer old-key")
	wantCode(t, err, bay.CodeUnauthorized, "Invalid API key")
	if _, err := auth(a, "Authorization", "Bearer new-key"); err != nil {
		t.Error(err)
	}
	// Needs a configured key.
	c = cfgWith(func(c *config.Config) { c.Security.RevokeUnlistedKeys = true })
	if _, _, err := Provision(context.Background(), s, c, nil, t.TempDir(), nil); err == nil {
		t.Error("revoke_unlisted_keys without keys accepted")
	}
}

func TestAuthenticate(t *testing.T) {
	s := &memStore{}
	s.add("good", "default")
	s.add("alice-key", "alice")
	strict := New(s, Options{})
	anon := New(s, Options{AllowAnonymous: true})
	for _, a := range []*Authenticator{strict, anon} {
		if err := a.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	type want struct {
		owner, code, msg string
	}
	cases := []struct {
		name    string
		a       *Authenticator
		headers []string
		want    want
	}{
		{"strict valid key", strict, []string{"Authorization", "Bearer good"}, want{owner: "default"}},
		{"strict owner key", strict, []string{"Authorization", "Bearer alice-key"}, want{owner: "alice"}},
		{"strict X-Owner ignored with key", strict, []string{"Authorization", "Bearer alice-key", "X-Owner", "bob"}, want{owner: "alice"}},
		{"strict bad key", strict, []string{"Authorization", "Bearer nope"}, want{code: bay.CodeUnauthorized, msg: "Invalid API key"}},
		{"strict empty token", strict, []string{"Authorization", "Bearer "}, want{code: bay.CodeUnauthorized, msg: "Invalid API key"}},
		{"strict no header", strict, nil, want{code: bay.CodeUnauthorized, msg: "Authentication required"}},
		{"strict lower-case bearer is no token", strict, []string{"Authorization", "bearer good"}, want{code: bay.CodeUnauthorized, msg: "Authentication required"}},
		{"strict basic auth is no token", strict, []string{"Authorization", "Basic Zm9vOmJhcg=="}, want{code: bay.CodeUnauthorized, msg: "Authentication required"}},
		{"strict X-Owner alone", strict, []string{"X-Owner", "bob"}, want{code: bay.CodeUnauthorized, msg: "Authentication required"}},
		{"anon bad key still refused", anon, []string{"Authorization", "Bearer nope"}, want{code: bay.CodeUnauthorized, msg: "Invalid API key"}},
		{"anon valid key", anon, []string{"Authorization", "Bearer alice-key"}, want{owner: "alice"}},
		{"anon no header", anon, nil, want{owner: "default"}},
		{"anon X-Owner", anon, []string{"X-Owner", "bob.smith_1-x"}, want{owner: "bob.smith_1-x"}},
		{"anon X-Owner default", anon, []string{"X-Owner", "default"}, want{owner: "default"}},
		{"anon X-Owner warm-pool reserved", anon, []string{"X-Owner", "warm-pool"}, want{code: bay.CodeUnauthorized}},
		{"anon X-Owner with a key reserved", anon, []string{"X-Owner", "alice"}, want{code: bay.CodeUnauthorized}},
		{"anon X-Owner malformed", anon, []string{"X-Owner", "a b"}, want{code: bay.CodeValidation}},
		{"anon X-Owner too long", anon, []string{"X-Owner", strings.Repeat("a", 65)}, want{code: bay.CodeValidation}},
		{"anon X-Owner path-like", anon, []string{"X-Owner", "../x"}, want{code: bay.CodeValidation}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			owner, err := auth(tc.a, tc.headers...)
			if tc.want.code != "" {
				wantCode(t, err, tc.want.code, tc.want.msg)
				return
			}
			if err != nil || owner != tc.want.owner {
				t.Fatalf("got %q %v, want %q", owner, err, tc.want.owner)
			}
		})
	}
}

func TestNoKeysNotAnonymous(t *testing.T) {
	a := New(&memStore{}, Options{})
	if err := a.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := auth(a, "Authorization", "Bearer x")
	wantCode(t, err, bay.CodeUnauthorized, "Authentication required")
}

func TestConstantTimeCompareAgainstEveryKey(t *testing.T) {
	s := &memStore{}
	for _, k := range []string{"k1", "k2", "k3", "k4"} {
		s.add(k, "default")
	}
	a := New(s, Options{})
	a.Reload(context.Background())
	calls := 0
	orig := compare
	compare = func(x, y []byte) int { calls++; return orig(x, y) }
	defer func() { compare = orig }()
	for _, token := range []string{"k1", "k4", "nope"} {
		calls = 0
		auth(a, "Authorization", "Bearer "+token)
		if calls != 4 {
			t.Errorf("token %s: %d comparisons, want 4 (all keys, no early exit)", token, calls)
		}
	}
}

func TestReload(t *testing.T) {
	s := &memStore{}
	s.add("first", "default")
	a := New(s, Options{})
	if err := a.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := auth(a, "Authorization", "Bearer second"); err == nil {
		t.Fatal("unknown key accepted")
	}
	s.add("second", "bob")
	s.keys = append(s.keys, &bay.APIKey{KeyHash: "not-hex", Owner: "x", Active: true})
	s.keys = append(s.keys, &bay.APIKey{KeyHash: config.KeyHash("inactive"), Owner: "x", Active: false})
	if err := a.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if owner, err := auth(a, "Authorization", "Bearer second"); err != nil || owner != "bob" {
		t.Errorf("%q %v", owner, err)
	}
	if _, err := auth(a, "Authorization", "Bearer inactive"); err == nil {
		t.Error("inactive key accepted")
	}
	if a.KeyCount() != 2 {
		t.Errorf("count %d", a.KeyCount())
	}
	// A failed reload keeps the previous keys.
	s.failList = errors.New("boom")
	if err := a.Reload(context.Background()); err == nil {
		t.Fatal("reload succeeded")
	}
	if _, err := auth(a, "Authorization", "Bearer second"); err != nil {
		t.Error(err)
	}
}

func TestConcurrentAuthenticateAndReload(t *testing.T) {
	s := &memStore{}
	s.add("k", "default")
	a := New(s, Options{AllowAnonymous: true})
	a.Reload(context.Background())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 200 {
				if i%2 == 0 {
					a.Reload(context.Background())
				} else if owner, err := auth(a, "Authorization", "Bearer k"); err != nil || owner != "default" {
					t.Errorf("%q %v", owner, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestEndpoint(t *testing.T) {
	for host, want := range map[string]string{
		"127.0.0.1": "http://127.0.0.1:8114", "0.0.0.0": "http://127.0.0.1:8114", "::": "http://127.0.0.1:8114",
		"::1": "http://[::1]:8114", "bay.internal": "http://bay.internal:8114",
	} {
		if got := endpoint(config.ServerConfig{Host: host, Port: 8114}); got != want {
			t.Errorf("%s: %s, want %s", host, got, want)
		}
	}
}

func TestGeneratedKeyIsNeverLogged(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dir := t.TempDir()
	_, res, err := Provision(context.Background(), &memStore{}, cfgWith(nil), nil, dir, log)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(res.CredentialsPath)
	var creds Credentials
	json.Unmarshal(data, &creds)
	out := buf.String()
	if !strings.Contains(out, res.CredentialsPath) {
		t.Errorf("log does not say where the key is:\n%s", out)
	}
	if creds.APIKey == "" || strings.Contains(out, creds.APIKey) || strings.Contains(out, creds.APIKey[7:20]) {
		t.Errorf("log contains the key:\n%s", out)
	}
	if !strings.Contains(out, "component=auth") {
		t.Errorf("no component attr:\n%s", out)
	}
}
