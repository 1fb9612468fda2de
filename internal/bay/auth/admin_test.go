package auth

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay/config"
)

// TestAdminKeys: the owner default's keys and admin: true entries administer bay; other keys
// and anonymous requests do not.
func TestAdminKeys(t *testing.T) {
	s := &memStore{}
	c := cfgWith(func(c *config.Config) {
		c.Security.APIKey = "root-key"
		c.Security.AllowAnonymous = true
		c.Security.APIKeys = []config.APIKeyConfig{
			{Key: "alice-key", Owner: "alice"},
			{KeySHA256: strings.ToUpper(config.KeyHash("ops-key")), Owner: "ops", Admin: true},
			{Key: "second-default"},
		}
	})
	a, _ := provision(t, s, c)
	for _, tc := range []struct {
		header, owner string
		admin         bool
	}{
		{"Bearer root-key", "default", true},
		{"Bearer second-default", "default", true},
		{"Bearer ops-key", "ops", true},
		{"Bearer alice-key", "alice", false},
		{"", "default", false}, // anonymous
	} {
		r := httptest.NewRequest("GET", "/v1/skills", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		owner, admin, err := a.Principal(r)
		if err != nil || owner != tc.owner || admin != tc.admin {
			t.Errorf("%q: owner %q admin %v err %v", tc.header, owner, admin, err)
		}
	}
	r := httptest.NewRequest("GET", "/v1/skills", nil)
	r.Header.Set("Authorization", "Bearer wrong")
	if _, admin, err := a.Principal(r); err == nil || admin {
		t.Errorf("wrong key: admin %v err %v", admin, err)
	}
}

// TestGeneratedKeyIsAdmin: the key generated on first boot belongs to default, so it is an
// admin, as the reference's clients expect.
func TestGeneratedKeyIsAdmin(t *testing.T) {
	s := &memStore{}
	a, res := provision(t, s, cfgWith(nil))
	if !res.Generated {
		t.Fatal("no key generated")
	}
	creds := readCredentials(t, res.CredentialsPath)
	r := httptest.NewRequest("GET", "/v1/skills", nil)
	r.Header.Set("Authorization", "Bearer "+creds.APIKey)
	if owner, admin, err := a.Principal(r); err != nil || owner != "default" || !admin {
		t.Fatalf("owner %q admin %v err %v", owner, admin, err)
	}
}

func readCredentials(t *testing.T, path string) Credentials {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var creds Credentials
	if err := json.Unmarshal(data, &creds); err != nil {
		t.Fatal(err)
	}
	return creds
}
