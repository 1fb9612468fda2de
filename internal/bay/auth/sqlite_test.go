package auth

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

// TestProvisionWithSQLite runs first boot, a restart and a configured key against the real
// SQLite store in a file.
func TestProvisionWithSQLite(t *testing.T) {
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "bay.db")
	open := func() *sqlite.Store {
		s, err := sqlite.Open(ctx, sqlite.Options{Path: dbPath})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	dataDir := t.TempDir()

	s := open()
	a, res, err := Provision(ctx, s, cfgWith(nil), nil, dataDir, nil)
	if err != nil || !res.Generated {
		t.Fatalf("first boot: %+v %v", res, err)
	}
	var creds Credentials
	data, _ := os.ReadFile(res.CredentialsPath)
	json.Unmarshal(data, &creds)
	if owner, err := auth(a, "Authorization", "Bearer "+creds.APIKey); err != nil || owner != "default" {
		t.Fatalf("generated key: %q %v", owner, err)
	}
	s.Close()

	// Restart with a configured multi-owner key: nothing generated, both keys valid.
	s = open()
	c := cfgWith(func(c *config.Config) {
		c.Security.APIKeys = []config.APIKeyConfig{{Key: "alice-key", Owner: "alice"}}
	})
	a, res, err = Provision(ctx, s, c, nil, t.TempDir(), nil)
	if err != nil || res.Generated || res.Inserted != 1 || res.Active != 2 {
		t.Fatalf("restart: %+v %v", res, err)
	}
	if owner, err := auth(a, "Authorization", "Bearer alice-key"); err != nil || owner != "alice" {
		t.Errorf("alice: %q %v", owner, err)
	}
	if owner, err := auth(a, "Authorization", "Bearer "+creds.APIKey); err != nil || owner != "default" {
		t.Errorf("old key: %q %v", owner, err)
	}
	keys, _ := s.ListAPIKeys(ctx)
	for _, k := range keys {
		if k.KeyHash == creds.APIKey || k.KeyHash == "alice-key" || len(k.KeyHash) != 64 {
			t.Errorf("stored key is not a hash: %+v", k)
		}
	}
}
