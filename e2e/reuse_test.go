package e2e

import (
	"sync"
	"testing"
)

// TestReuseByKeyConcurrent: 20 concurrent creates with one reuse key yield one sandbox, which
// then serves.
func TestReuseByKeyConcurrent(t *testing.T) {
	docker(t)
	b := startBay(t, bayOptions{})
	body := map[string]any{"profile": "python-default", "reuse": map[string]any{"key": "proj:agent-" + randHex(t), "idle_ttl": 1800, "hard_ttl": 21600}}
	ids := make([]string, 20)
	created := make([]bool, 20)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := b.do("POST", "/v1/sandboxes", body, nil)
			if r.Status != 200 && r.Status != 201 {
				t.Errorf("create %d: %s", i, r)
				return
			}
			ids[i], created[i] = r.Str("id"), r.Status == 201
		}()
	}
	wg.Wait()
	n := 0
	for i, id := range ids {
		if id != ids[0] {
			t.Fatalf("call %d got %s, call 0 %s", i, id, ids[0])
		}
		if created[i] {
			n++
		}
	}
	b.mu.Lock()
	b.created = append(b.created, ids[0])
	b.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d of 20 calls created a sandbox", n)
	}
	if out := b.shellOK(ids[0], "echo reused"); out != "reused" {
		t.Fatalf("shell: %q", out)
	}
}
