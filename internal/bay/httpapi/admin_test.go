package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay/auth"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/httpapi"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

type warmReport struct{}

func (warmReport) WarmPoolStatus(context.Context) (bayapi.WarmPoolStatus, error) {
	return bayapi.WarmPoolStatus{Enabled: true, IntervalSeconds: 30,
		Profiles: []bayapi.WarmPoolProfile{{Profile: "python-default", Target: 2, Ready: 1, Starting: 1, Hits: 3, Misses: 1}}}, nil
}

// TestKeyAdminAPI drives /v1/admin/keys, /v1/admin/owners and /v1/admin/warmpool over the
// real authenticator and SQLite store: admin keys only, the secret once, revocation at once.
func TestKeyAdminAPI(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: sqlite.MemoryPath, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := config.DefaultConfig()
	cfg.Security.APIKey = "root-key"
	cfg.Security.APIKeys = []config.APIKeyConfig{{Key: "alice-key", Owner: "alice"}}
	authn, _, err := auth.Provision(ctx, st, cfg, nil, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := sandbox.New(st, fake.New(), shipclient.New(nil, nil), nil, nil, sandbox.Config{InstanceID: "test"})
	api := httpapi.New(httpapi.Options{Service: svc, Auth: authn, Keys: authn, WarmPool: warmReport{}, Version: "test"})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	do := func(method, path, key string, body any) (int, []byte, http.Header) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, srv.URL+path, rd)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, resp.Header
	}

	// Not an admin: 403 everywhere.
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/admin/keys"}, {"POST", "/v1/admin/keys"}, {"DELETE", "/v1/admin/keys/x"},
		{"GET", "/v1/admin/owners"}, {"GET", "/v1/admin/warmpool"},
		{"POST", "/v1/admin/gc/run"}, {"GET", "/v1/admin/gc/status"},
	} {
		code, b, _ := do(c.method, c.path, "alice-key", map[string]string{"owner": "bob", "name": "x"})
		if code != 403 || errCode(b) != bayapi.CodeForbidden {
			t.Errorf("%s %s as alice: %d %s", c.method, c.path, code, b)
		}
	}
	if code, _, _ := do("GET", "/v1/admin/keys", "", nil); code != 401 {
		t.Errorf("no key: %d", code)
	}

	code, b, h := do("POST", "/v1/admin/keys", "root-key", map[string]string{"owner": "bob", "name": "notebook"})
	if code != 201 || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("create: %d %s %v", code, b, h)
	}
	var created bayapi.CreatedAPIKey
	json.Unmarshal(b, &created)
	if created.Key == "" || created.Owner != "bob" || created.Name != "notebook" || created.Admin || created.Source != "stored" {
		t.Fatalf("created: %s", b)
	}
	if code, b, _ := do("GET", "/v1/sandboxes", created.Key, nil); code != 200 {
		t.Fatalf("new key: %d %s", code, b)
	}
	code, b, _ = do("GET", "/v1/admin/keys", "root-key", nil)
	if code != 200 || strings.Contains(string(b), created.Key) || strings.Contains(string(b), `"key"`) {
		t.Fatalf("list shows a secret or failed: %d %s", code, b)
	}
	var list bayapi.APIKeyList
	json.Unmarshal(b, &list)
	if len(list.Items) != 3 {
		t.Fatalf("list: %s", b)
	}
	var configured string
	for _, k := range list.Items {
		if k.Source == "config" && k.Owner == "alice" {
			configured = k.ID
		}
	}
	code, b, _ = do("GET", "/v1/admin/owners", "root-key", nil)
	if code != 200 || !strings.Contains(string(b), `"owner":"bob"`) {
		t.Fatalf("owners: %d %s", code, b)
	}

	// Refusals: a bad body, a configured key, an unknown key.
	for _, c := range []struct {
		body any
		code int
	}{{map[string]string{"owner": "bob"}, 422}, {map[string]string{"owner": "warm-pool", "name": "x"}, 400}, {map[string]string{"owner": "bob", "name": " "}, 400}} {
		if code, b, _ := do("POST", "/v1/admin/keys", "root-key", c.body); code != c.code || errCode(b) != bayapi.CodeValidation {
			t.Errorf("create %v: %d %s", c.body, code, b)
		}
	}
	if code, b, _ := do("DELETE", "/v1/admin/keys/"+configured, "root-key", nil); code != 409 || errCode(b) != bayapi.CodeConflict {
		t.Errorf("revoke configured: %d %s", code, b)
	}
	if code, b, _ := do("DELETE", "/v1/admin/keys/nope", "root-key", nil); code != 404 || errCode(b) != bayapi.CodeNotFound {
		t.Errorf("revoke unknown: %d %s", code, b)
	}

	code, b, _ = do("DELETE", "/v1/admin/keys/"+created.ID, "root-key", nil)
	var revoked bayapi.APIKeyInfo
	json.Unmarshal(b, &revoked)
	if code != 200 || revoked.Active || revoked.RevokedAt == nil {
		t.Fatalf("revoke: %d %s", code, b)
	}
	if code, b, _ := do("GET", "/v1/sandboxes", created.Key, nil); code != 401 || errCode(b) != bayapi.CodeUnauthorized {
		t.Fatalf("revoked key: %d %s", code, b)
	}
	if code, _, _ := do("GET", "/v1/sandboxes", "alice-key", nil); code != 200 {
		t.Fatalf("configured key after a revocation: %d", code)
	}

	code, b, _ = do("GET", "/v1/admin/warmpool", "root-key", nil)
	if code != 200 || !strings.Contains(string(b), `"profile":"python-default"`) || !strings.Contains(string(b), `"hits":3`) {
		t.Fatalf("warm pool: %d %s", code, b)
	}
}
