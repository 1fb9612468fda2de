package e2e

import (
	"strings"
	"testing"
	"time"
)

// The sandbox detail describes its runtimes only while it is ready, and then with the real
// runtime's version (read from ship's /meta with the session's token) and health.
func TestSandboxDetailContainers(t *testing.T) {
	t.Parallel()
	b := startBay(t, bayOptions{})
	id := b.create(map[string]any{"ttl": 600}, nil).Str("id")
	if c := b.get(id).Get("containers"); c != nil {
		t.Fatalf("idle sandbox: containers = %v, want null", c)
	}
	// The version of the ship binary the image carries (one version, injected at build).
	want := strings.TrimSpace(b.shellOK(id, "/usr/local/bin/ship -version"))
	got := expect(t, b.get(id), 200, "get ready sandbox")
	cs, ok := got.Get("containers").([]any)
	if got.Str("status") != "ready" || !ok || len(cs) != 1 {
		t.Fatalf("ready sandbox: %s", got)
	}
	c := cs[0].(map[string]any)
	// bay relays the version of the ship that runs, read from its /meta.
	if want == "" || c["version"] != want || c["name"] != "ship" || c["runtime_type"] != "ship" || c["healthy"] != true {
		t.Fatalf("container %v: want ship %s, healthy", c, want)
	}
	expect(t, b.do("POST", "/v1/sandboxes/"+id+"/stop", nil, nil), 200, "stop")
	if got := b.get(id); got.Get("containers") != nil || got.Str("status") != "idle" {
		t.Fatalf("stopped sandbox: %s", got)
	}

	// Expired while its session still runs: no containers either.
	exp := b.create(map[string]any{"ttl": 2}, nil).Str("id")
	b.shellOK(exp, "true")
	time.Sleep(2100 * time.Millisecond) // the TTL is whole seconds; waiting it out is the test
	if got := b.get(exp); got.Str("status") != "expired" || got.Get("containers") != nil {
		t.Fatalf("expired sandbox: %s", got)
	}
}
