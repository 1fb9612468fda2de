package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
)

// TestAdminKeysAcrossBays: two bays on one PostgreSQL database. A key created through one is
// accepted by it at once and by the other within a few seconds; revoked through the other, it
// is refused there at once and by the first within a few seconds; the configured key works
// throughout, and a key that is not an admin key cannot administer keys.
func TestAdminKeysAcrossBays(t *testing.T) {
	t.Parallel()
	docker(t)
	dbURL := pgtest.NewDatabase(t)
	a := startBay(t, bayOptions{databaseURL: dbURL})
	b := startBay(t, bayOptions{databaseURL: dbURL})
	status := func(bay *Bay, key string) int { return keyStatus(t, bay, key) }
	within := func(what string, bay *Bay, key string, want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for status(bay, key) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: still not %d after 5 s", what, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	k := expect(t, a.do("POST", "/v1/admin/keys", map[string]any{"owner": "dana", "name": "across bays"}, nil), 201, "create on bay a")
	secret, keyID := k.Str("key"), k.Str("id")
	if got := status(a, secret); got != 200 {
		t.Fatalf("the new key on the bay that made it: %d", got)
	}
	within("the new key on the other bay", b, secret, 200)

	// dana is not an admin.
	req, _ := http.NewRequest("GET", b.URL+"/v1/admin/keys", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp := b.send(req)
	expectError(t, resp, 403, "forbidden", "dana lists keys")

	list := expect(t, b.do("GET", "/v1/admin/keys", nil, nil), 200, "list on bay b")
	found := false
	for _, it := range list.Get("items").([]any) {
		m := it.(map[string]any)
		if m["id"] == keyID {
			found = m["owner"] == "dana" && m["name"] == "across bays" && m["active"] == true && m["key"] == nil
		}
	}
	if !found {
		t.Fatalf("the key as bay b lists it: %s", list)
	}

	expect(t, b.do("DELETE", "/v1/admin/keys/"+keyID, nil, nil), 200, "revoke on bay b")
	if got := status(b, secret); got != 401 {
		t.Fatalf("the revoked key on the bay that revoked it: %d", got)
	}
	within("the revoked key on the other bay", a, secret, 401)
	if status(a, apiKey) != 200 || status(b, apiKey) != 200 {
		t.Fatal("the configured key stopped working")
	}
	owners := expect(t, a.do("GET", "/v1/admin/owners", nil, nil), 200, "owners")
	contains(t, owners.String(), `{"owner":"dana","active_keys":0,"revoked_keys":1,"admin":false,"sandboxes":0}`, "owners")
}

// keyStatus is the status of GET /v1/sandboxes on bay with key.
func keyStatus(t *testing.T, bay *Bay, key string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", bay.URL+"/v1/sandboxes", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
