package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/httpapi"
	"github.com/shipyard-dev/shipyard/internal/bay/reuse"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient/shipstub"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

// twoBays are two bays (each its own store handle, service and HTTP server) on one database
// file, as several bays share one database.
func twoBays(t *testing.T) [2]*harness {
	t.Helper()
	hs, _ := twoBaysWith(t, reuse.Config{})
	return hs
}

// twoBaysWith is twoBays with the bays' reuse settings; it also returns a third handle of the
// database.
func twoBaysWith(t *testing.T, rc reuse.Config) ([2]*harness, bay.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bay.db")
	stub := shipstub.New()
	t.Cleanup(stub.Close)
	var hs [2]*harness
	for i := range hs {
		st, err := sqlite.Open(context.Background(), sqlite.Options{Path: path, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		drv := fake.New(fake.WithEndpointFunc(func(string, bay.ContainerSpec) string { return stub.URL() }))
		profiles := []bay.Profile{{ID: "python-default", IdleTimeout: 30 * time.Minute,
			Containers: []bay.ContainerProfile{{Name: "primary", Image: "ship:test", RuntimeType: "ship", RuntimePort: 8123,
				Resources: bay.Resources{CPUs: 1, Memory: "1g"}, Capabilities: bay.DefaultCapabilities}}}}
		svc := sandbox.New(st, drv, shipclient.New(nil, nil), nil, nil, sandbox.Config{Profiles: profiles, InstanceID: fmt.Sprintf("bay-%d", i)})
		api := httpapi.New(httpapi.Options{Service: svc, Auth: tokens{}, Version: "test", Reuse: rc})
		srv := httptest.NewServer(api.Handler())
		t.Cleanup(srv.Close)
		hs[i] = &harness{t: t, srv: srv, api: api, drv: drv, ship: stub}
	}
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return hs, st
}

func TestReuseByKey(t *testing.T) {
	hs := twoBays(t)
	body := `{"reuse":{"key":"proj-1:agent-a","hard_ttl":3600}}`
	// 20 concurrent calls over two bays: one sandbox, created once.
	ids := make([]string, 20)
	statuses := make([]int, 20)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := hs[i%2].do("POST", "/v1/sandboxes", "alice", body)
			statuses[i] = r.status
			if r.status == 200 || r.status == 201 {
				ids[i] = r.json(t)["id"].(string)
			}
		}()
	}
	wg.Wait()
	created := 0
	for i, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("call %d: status %d id %q (first %q)", i, statuses[i], id, ids[0])
		}
		if statuses[i] == 201 {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d calls created a sandbox: %v", created, statuses)
	}
	list := hs[0].ok(hs[0].do("GET", "/v1/sandboxes", "alice", nil), 200)
	if n := len(list["items"].([]any)); n != 1 {
		t.Fatalf("alice has %d sandboxes", n)
	}
	sb := hs[0].ok(hs[0].do("GET", "/v1/sandboxes/"+ids[0], "alice", nil), 200)
	if sb["expires_at"] == nil {
		t.Fatalf("hard_ttl gave no expiry: %v", sb)
	}

	// Another owner's key of the same name is another sandbox.
	bob := hs[1].do("POST", "/v1/sandboxes", "bob", body)
	hs[1].expect(bob, 201, "")
	if bob.json(t)["id"] == ids[0] {
		t.Fatal("bob got alice's sandbox")
	}
	// A reused answer says so.
	again := hs[0].do("POST", "/v1/sandboxes", "alice", body)
	hs[0].expect(again, 200, "")
	if again.header.Get("Shipyard-Reused") != "true" {
		t.Fatalf("reused answer headers %v", again.header)
	}
	// A deleted sandbox is replaced.
	hs[0].expect(hs[0].do("DELETE", "/v1/sandboxes/"+ids[0], "alice", nil), 204, "")
	fresh := hs[1].do("POST", "/v1/sandboxes", "alice", body)
	hs[1].expect(fresh, 201, "")
	freshID := fresh.json(t)["id"].(string)
	if freshID == ids[0] {
		t.Fatal("a deleted sandbox was reused")
	}
	// One idle longer than idle_ttl is deleted and replaced.
	time.Sleep(1100 * time.Millisecond)
	idle := hs[0].do("POST", "/v1/sandboxes", "alice", `{"reuse":{"key":"proj-1:agent-a","idle_ttl":1}}`)
	hs[0].expect(idle, 201, "")
	if idle.json(t)["id"] == freshID {
		t.Fatal("an idle sandbox was reused past idle_ttl")
	}
	hs[0].expect(hs[0].do("GET", "/v1/sandboxes/"+freshID, "alice", nil), 404, "not_found")

	for _, bad := range []string{`{"reuse":{"key":""}}`, `{"reuse":{"key":"a b"}}`, `{"reuse":{"key":"k","idle_ttl":0}}`,
		`{"reuse":{"key":"k","hard_ttl":-5}}`, `{"reuse":{}}`} {
		if r := hs[0].do("POST", "/v1/sandboxes", "alice", bad); r.status < 400 || r.status >= 500 {
			t.Errorf("%s: %d %s", bad, r.status, r.body)
		}
	}
}

// TestReuseLockAndDefaults: the calls of one key wait for its lock, held in the database (here
// by a call on a third handle, as on another bay), at most the lock timeout; the operator's
// default TTLs apply to requests that give none; reuse_mode none refuses reuse.
func TestReuseLockAndDefaults(t *testing.T) {
	hs, st := twoBaysWith(t, reuse.Config{LockTimeout: time.Second, Defaults: reuse.Policy{HardTTL: time.Hour, IdleTTL: time.Hour}})
	body := `{"reuse":{"key":"proj-2:agent-b"}}`
	unlock, err := reuse.Lock(t.Context(), st, "alice", "proj-2:agent-b", time.Now, time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	r := hs[0].do("POST", "/v1/sandboxes", "alice", body)
	hs[0].expect(r, 409, "conflict")
	if d := time.Since(began); d < 900*time.Millisecond || d > 5*time.Second {
		t.Fatalf("the locked call gave up after %v; want the 1 s lock timeout", d)
	}
	// Another key, or another owner's key of that name, is not held up.
	hs[1].expect(hs[1].do("POST", "/v1/sandboxes", "alice", `{"reuse":{"key":"proj-2:agent-c"}}`), 201, "")
	hs[1].expect(hs[1].do("POST", "/v1/sandboxes", "bob", body), 201, "")
	// A call that waits gets the key once the holder is done.
	go func() {
		time.Sleep(300 * time.Millisecond)
		unlock()
	}()
	began = time.Now()
	r = hs[1].do("POST", "/v1/sandboxes", "alice", body)
	hs[1].expect(r, 201, "")
	if d := time.Since(began); d < 250*time.Millisecond {
		t.Fatalf("the call did not wait for the lock (%v)", d)
	}
	// The default hard TTL became the new sandbox's TTL.
	if r.json(t)["expires_at"] == nil {
		t.Fatalf("no expiry from the default hard TTL: %s", r.body)
	}
	// The lock is released after each call: the next one gets it (a held lock would answer 409
	// once the 1 s lock timeout passed).
	hs[0].expect(hs[0].do("POST", "/v1/sandboxes", "alice", body), 200, "")

	off, _ := twoBaysWith(t, reuse.Config{Disabled: true})
	off[0].expect(off[0].do("POST", "/v1/sandboxes", "alice", body), 400, "validation_error")
}
