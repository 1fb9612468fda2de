package e2e

import (
	"strings"
	"testing"
)

// An operator's view of a real bay on the real engine: /readyz, /metrics behind the API key,
// and a sandbox's resource use read from the engine, its cargo measured inside the container.
func TestOperatorObservesABay(t *testing.T) {
	t.Parallel()
	b := startBay(t, bayOptions{profiles: strings.ReplaceAll(defaultProfiles, "ship:latest", "ship:base")})
	r := expect(t, b.do("GET", "/readyz", nil, map[string]string{"Authorization": ""}), 200, "readyz")
	if r.Str("checks.engine") != "ok" || r.Str("checks.database") != "ok" {
		t.Fatalf("readyz: %s", r)
	}

	id := b.create(map[string]any{"ttl": 600}, nil).Str("id")
	idle := expect(t, b.do("GET", "/v1/sandboxes/"+id+"/metrics", nil, nil), 200, "metrics of an idle sandbox")
	if idle.Str("status") != "idle" || len(idle.Get("containers").([]any)) != 0 || idle.Get("disk.used_bytes") != nil {
		t.Fatalf("idle sandbox metrics: %s", idle)
	}
	// 3 MB of incompressible data in the workspace, and a process that holds memory.
	b.shellOK(id, "head -c 3000000 /dev/urandom > /workspace/blob")
	got := expect(t, b.do("GET", "/v1/sandboxes/"+id+"/metrics", nil, nil), 200, "metrics of a ready sandbox")
	cs, _ := got.Get("containers").([]any)
	if got.Str("status") != "ready" || len(cs) != 1 {
		t.Fatalf("ready sandbox metrics: %s", got)
	}
	c := cs[0].(map[string]any)
	if c["name"] != "primary" || c["pids"].(float64) < 2 || c["memory_bytes"].(float64) < 1<<20 || c["cpu_seconds"].(float64) <= 0 ||
		c["memory_limit_bytes"].(float64) != 1<<30 || c["cpu_limit_cores"].(float64) != 1 || c["pids_limit"] == nil {
		t.Errorf("container use: %v", c)
	}
	used, _ := got.Get("disk.used_bytes").(float64)
	if used < 3_000_000 || used > 200_000_000 || got.Get("disk.limit_bytes").(float64) <= 0 {
		t.Errorf("disk use %v of %v, want the 3 MB blob and the workspace's few files", got.Get("disk.used_bytes"), got.Get("disk.limit_bytes"))
	}

	if r := b.do("GET", "/metrics", nil, map[string]string{"Authorization": ""}); r.Status != 401 {
		t.Fatalf("anonymous /metrics: %d", r.Status)
	}
	m := expect(t, b.do("GET", "/metrics", nil, nil), 200, "metrics")
	text := string(m.Body)
	for _, want := range []string{
		`bay_session_start_duration_seconds_count{outcome="ok",profile="python-default"} 1`,
		`bay_operation_duration_seconds_count{capability="shell",operation="exec",outcome="ok"} 1`,
		`bay_driver_call_duration_seconds_count{method="CreateInstance",outcome="ok"} 1`,
		`bay_sandboxes{status="ready"} 1`,
		`bay_sessions{state="running"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
