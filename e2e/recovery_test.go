package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawPython sends a python/exec without failing the test on transport errors (bay may be
// killed while the call is in flight).
func (b *Bay) rawPython(id, code string) (int, error) {
	body, _ := json.Marshal(map[string]any{"code": code, "timeout": 120})
	req, _ := http.NewRequest("POST", b.URL+"/v1/sandboxes/"+id+"/python/exec", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := b.http.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Bay killed with SIGKILL while a session is starting, and restarted on the same database,
// loses no sandbox, keeps running sessions (with their kernel state), rebuilds the interrupted
// one, and leaves no duplicate container once orphan GC has run.
func TestRestartAfterSIGKILL(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	b := startBay(t, bayOptions{})
	a := b.create(nil, nil).Str("id")
	bb := b.create(nil, nil).Str("id")
	c := b.create(nil, nil).Str("id")
	b.pythonOK(a, "x = 41")

	done := make(chan error, 1)
	go func() { _, err := b.rawPython(bb, "print('never answered')"); done <- err }()
	// Kill while bb's session is being created/started (a cold start takes ~0.5-2 s).
	deadline := time.Now().Add(10 * time.Second)
	for len(sessionContainers(t, cli, bb)) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	b.kill()
	<-done

	b.launch()
	list := expect(t, b.do("GET", "/v1/sandboxes?limit=200", nil, nil), 200, "list after restart")
	ids := map[string]bool{}
	for _, it := range list.Get("items").([]any) {
		ids[it.(map[string]any)["id"].(string)] = true
	}
	for _, id := range []string{a, bb, c} {
		if !ids[id] {
			t.Fatalf("sandbox %s lost across the restart: %s", id, list)
		}
	}
	if out := b.pythonOK(a, "print(x + 1)"); out != "42" {
		t.Fatalf("a running session must survive bay's restart with its kernel state: %q", out)
	}
	if out := b.pythonOK(bb, "print('rebuilt')"); out != "rebuilt" {
		t.Fatalf("the interrupted session must be rebuilt: %q", out)
	}
	// A create the killed bay had sent may still be running in the engine, invisible to the
	// restarted bay's recovery; it never starts (nobody is left to start it), and orphan GC
	// removes it once the engine lists it. Run GC until the counts settle (bounded).
	want := map[string]int{a: 1, bb: 1, c: 0}
	deadline = time.Now().Add(60 * time.Second)
	for {
		b.gcRun(t, "orphan_container")
		settled := true
		for id, n := range want {
			got := sessionContainers(t, cli, id)
			running := 0
			for _, g := range got {
				if strings.Contains(g, " running ") {
					running++
				}
			}
			if running > 1 {
				t.Fatalf("sandbox %s has %d running containers after the restart: %q", id, running, got)
			}
			if len(got) != n {
				settled = false
				if time.Now().After(deadline) {
					t.Fatalf("sandbox %s has %d containers after restart and GC, want %d: %q", id, len(got), n, got)
				}
			}
		}
		if settled {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Any number of concurrent first calls start exactly one session.
func TestConcurrentFirstCalls(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	b := startBay(t, bayOptions{})
	id := b.create(nil, nil).Str("id")
	const n = 8
	var wg sync.WaitGroup
	outs := make([]Response, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i] = b.do("POST", "/v1/sandboxes/"+id+"/python/exec", map[string]any{"code": "print('hi')", "timeout": 120}, nil)
		}()
	}
	wg.Wait()
	for i, r := range outs {
		if r.Status != 200 || r.Get("success") != true || r.Str("output") != "hi" {
			t.Fatalf("call %d: %s", i, r)
		}
	}
	if got := len(sessionContainers(t, cli, id)); got != 1 {
		t.Fatalf("%d concurrent first calls started %d containers, want 1", n, got)
	}
}

// The warm pool on the real engine: creates without a cargo claim distinct ready sandboxes,
// the claimed sandbox gets a fresh idle deadline and the caller's TTL, the pool refills, and
// warm sandboxes are invisible to list.
func TestWarmPoolClaim(t *testing.T) {
	t.Parallel()
	docker(t)
	b := startBay(t, bayOptions{
		profiles: `profiles:
  - id: warm
    image: "ship:latest"
    capabilities: [filesystem, shell, python]
    idle_timeout: 600
    warm_pool_size: 2
`,
		extraConfig: `warm_pool:
  interval_seconds: 1
  cleanup_on_shutdown: true
`,
	})
	// A warm sandbox is offered once its kernel answered a priming cell; bay logs that.
	b.waitLog(t, `"msg":"warm sandbox available"`, 2, 90*time.Second)
	list := expect(t, b.do("GET", "/v1/sandboxes", nil, nil), 200, "list")
	if items := list.Get("items").([]any); len(items) != 0 {
		t.Fatalf("warm sandboxes must be invisible to list: %s", list)
	}

	var wg sync.WaitGroup
	got := make([]Response, 2)
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = b.create(map[string]any{"profile": "warm", "ttl": 300}, nil) }()
	}
	wg.Wait()
	if got[0].Str("id") == got[1].Str("id") {
		t.Fatal("two concurrent creates claimed the same warm sandbox")
	}
	for _, g := range got {
		id := g.Str("id")
		cur := b.get(id)
		if cur.Str("status") != "ready" {
			t.Fatalf("a claimed warm sandbox must be ready at once: %s", cur)
		}
		idle := mustTime(t, cur.Str("idle_expires_at"))
		if d := time.Until(idle); d < 590*time.Second {
			t.Fatalf("a claimed sandbox needs a fresh idle deadline, got %v left", d)
		}
		if cur.Str("expires_at") == "" {
			t.Fatal("the caller's TTL was not applied to the claimed sandbox")
		}
		if out := b.pythonOK(id, "print('warm')"); out != "warm" {
			t.Fatalf("exec on claimed sandbox: %q", out)
		}
		if !strings.Contains(b.shellOK(id, "id"), "uid=1000(shipyard)") {
			t.Fatal("claimed sandbox runs as the wrong user")
		}
	}
	b.waitLog(t, `"msg":"warm sandbox available"`, 4, 90*time.Second) // refilled
}

// SIGTERM drains requests in flight: a running cell finishes and its answer arrives.
func TestGracefulShutdownDrains(t *testing.T) {
	t.Parallel()
	docker(t)
	b := startBay(t, bayOptions{})
	id := b.create(nil, nil).Str("id")
	b.pythonOK(id, "import time")
	status := make(chan int, 1)
	go func() {
		code, err := b.rawPython(id, "time.sleep(3); print('done')")
		if err != nil {
			t.Errorf("in-flight call failed during shutdown: %v", err)
		}
		status <- code
	}()
	time.Sleep(500 * time.Millisecond) // the call is in flight
	b.terminate()
	if code := <-status; code != 200 {
		t.Fatalf("in-flight call answered %d during a graceful shutdown", code)
	}
	b.launch() // so cleanup can delete the sandbox through the API
}
