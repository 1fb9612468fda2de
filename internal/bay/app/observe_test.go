package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/app"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient/shipstub"
)

// jsonLines parses a JSON log.
func jsonLines(s *syncBuffer) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var v map[string]any
		if json.Unmarshal(sc.Bytes(), &v) == nil {
			out = append(out, v)
		}
	}
	return out
}

// sqliteConfig is the configuration of a test bay: a SQLite file in dir, the key sk-test, no
// background cycle at startup.
func sqliteConfig(t *testing.T, dir string) *config.Config {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Database.URL = "sqlite:///" + filepath.Join(dir, "bay.db")
	cfg.Security.APIKey = "sk-test"
	cfg.GC.RunOnStartup = false
	cfg.WarmPool.RunOnStartup = false
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runEchoBay runs the daemon (real SQLite, real auth, the key sk-test, no background cycle at
// startup) on the fake driver whose runtimes are a ship stub that echoes python code, logging
// JSON at debug level into the returned buffer; configure, if not nil, changes the stub first.
// stop ends it and returns what Run returned.
func runEchoBay(t *testing.T, configure func(*shipstub.Stub)) (m *app.Main, drv *fake.Driver, logs *syncBuffer, stop func() error) {
	t.Helper()
	dir := t.TempDir()
	stub := shipstub.New()
	t.Cleanup(stub.Close)
	stub.Python = func(req shipapi.ExecPythonRequest) (int, any) {
		n := 1
		return 200, shipapi.ExecPythonResponse{Success: true, ExecutionCount: &n, Output: shipapi.PythonOutput{Text: req.Code}}
	}
	if configure != nil {
		configure(stub)
	}
	drv = fake.New(fake.WithEndpointFunc(func(string, bay.ContainerSpec) string { return stub.URL() }))
	logs = &syncBuffer{}
	m = &app.Main{
		Config: sqliteConfig(t, dir), Addr: "127.0.0.1:0", Env: []string{"BAY_DATA_DIR=" + dir}, Driver: drv,
		Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Version: "v9.9.9-test",
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	select {
	case <-m.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("run: %v", err)
	}
	return m, drv, logs, func() error { cancel(); return <-done }
}

// TestObservability runs the daemon (real SQLite, real auth, fake driver, ship stub) and checks
// what an operator sees: /metrics behind authentication with the request, operation, error,
// replay, driver, store, session-start, warm-pool and state series moving; /readyz following
// the engine; GET /v1/sandboxes/{id}/metrics; an access log line per request and the request
// id on every line a request caused.
func TestObservability(t *testing.T) {
	m, drv, logs, stop := runEchoBay(t, nil)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	cfg := m.Config
	base := "http://" + m.ListenAddr()
	call := func(method, path, body string, hdr ...string) (int, http.Header, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-test")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, b
	}

	// Ready while the store and the engine answer; 503 naming the engine when it does not.
	if st, _, b := call("GET", "/readyz", ""); st != 200 || !strings.Contains(string(b), `"engine":"ok"`) || !strings.Contains(string(b), `"database":"ok"`) {
		t.Fatalf("readyz = %d %s", st, b)
	}
	drv.SetDown(true)
	if st, _, b := call("GET", "/readyz", ""); st != 503 || !strings.Contains(string(b), `"engine":"fail"`) || !strings.Contains(string(b), `"code":"unavailable"`) {
		t.Fatalf("readyz with the engine down = %d %s", st, b)
	}
	drv.SetDown(false)

	st, _, b := call("POST", "/v1/sandboxes", `{}`, "Idempotency-Key", "obs-key-1")
	if st != 201 {
		t.Fatalf("create = %d %s", st, b)
	}
	var sb struct{ ID string }
	_ = json.Unmarshal(b, &sb)
	if st, h, _ := call("POST", "/v1/sandboxes", `{}`, "Idempotency-Key", "obs-key-1"); st != 201 || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay = %d %v", st, h)
	}
	const reqID = "obs-request-0001"
	if st, _, b := call("POST", "/v1/sandboxes/"+sb.ID+"/python/exec", `{"code":"1+1"}`, "X-Request-Id", reqID); st != 200 {
		t.Fatalf("exec = %d %s", st, b)
	}
	const missID = "obs-request-0002"
	if st, _, _ := call("GET", "/v1/sandboxes/sbx-nope", "", "X-Request-Id", missID); st != 404 {
		t.Fatalf("missing sandbox = %d", st)
	}

	// Per-sandbox usage: the limits of the profile and the use the engine reports.
	sess := drv.Instances()
	if len(sess) != 1 {
		t.Fatalf("instances = %v, want one", sess)
	}
	drv.SetUsage(sess[0], bay.InstanceUsage{VolumeUsedBytes: 12345, Containers: []bay.ContainerUsage{{Name: "primary", CPUSeconds: 1.5, MemoryBytes: 7 << 20, Pids: 9}}})
	st, _, b = call("GET", "/v1/sandboxes/"+sb.ID+"/metrics", "")
	var um struct {
		Status     string
		Containers []struct {
			Name             string
			CPUSeconds       float64 `json:"cpu_seconds"`
			MemoryBytes      int64   `json:"memory_bytes"`
			MemoryLimitBytes *int64  `json:"memory_limit_bytes"`
			Pids             int64
			PidsLimit        *int64 `json:"pids_limit"`
		}
		Disk struct {
			UsedBytes  *int64 `json:"used_bytes"`
			LimitBytes int64  `json:"limit_bytes"`
		}
	}
	if err := json.Unmarshal(b, &um); err != nil || st != 200 {
		t.Fatalf("sandbox metrics = %d %s", st, b)
	}
	if um.Status != "ready" || len(um.Containers) != 1 || um.Containers[0].CPUSeconds != 1.5 || um.Containers[0].Pids != 9 ||
		um.Containers[0].MemoryBytes != 7<<20 || um.Containers[0].MemoryLimitBytes == nil || um.Containers[0].PidsLimit == nil ||
		um.Disk.UsedBytes == nil || *um.Disk.UsedBytes != 12345 || um.Disk.LimitBytes != int64(cfg.Cargo.DefaultSizeLimitMB)<<20 {
		t.Errorf("sandbox metrics = %s", b)
	}
	// Another owner's view of it does not exist.
	if st, _, _ := call("GET", "/v1/sandboxes/sbx-nope/metrics", ""); st != 404 {
		t.Errorf("metrics of a missing sandbox = %d, want 404", st)
	}

	// /metrics needs a key.
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 || res.Header.Get("WWW-Authenticate") != `Bearer realm="bay"` {
		t.Fatalf("anonymous /metrics = %d %v, want 401 naming the Bearer scheme", res.StatusCode, res.Header)
	}
	st, _, b = call("GET", "/metrics", "")
	if st != 200 {
		t.Fatalf("/metrics = %d %s", st, b)
	}
	text := string(b)
	for _, want := range []string{
		`bay_http_requests_total{method="POST",route="/v1/sandboxes/{sandbox_id}/python/exec",status="200"} 1`,
		`bay_operation_duration_seconds_count{capability="python",operation="exec",outcome="ok"} 1`,
		`bay_operation_duration_seconds_count{capability="",operation="create",outcome="ok"} 2`,
		`bay_errors_total{code="not_found",status="404"} 2`,
		`bay_errors_total{code="unavailable",status="503"} 1`,
		`bay_idempotent_replays_total{route="/v1/sandboxes"} 1`,
		`bay_session_start_duration_seconds_count{outcome="ok",profile="python-default"} 1`,
		`bay_driver_call_duration_seconds_count{method="CreateInstance",outcome="ok"} 1`,
		`bay_driver_call_duration_seconds_count{method="InstanceUsage",outcome="ok"} 1`,
		`bay_store_call_duration_seconds_count{method="InsertSandbox",outcome="ok"} 1`,
		`bay_sandboxes{status="ready"} 1`,
		`bay_sessions{state="running"} 1`,
		`bay_build_info{version="v9.9.9-test"} 1`,
		`go_goroutines `,
		`process_resident_memory_bytes `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if regexp.MustCompile(`sandbox-[0-9a-f]|sk-test|owner=`).MatchString(text) {
		t.Errorf("/metrics names a sandbox, a key or an owner")
	}

	// Logs: one access line per request at info with the route pattern and owner, and the
	// request id on every line the exec caused.
	var access, ofMiss int
	for _, l := range jsonLines(logs) {
		if l["msg"] == "request" && l["level"] == "INFO" {
			access++
			if l["request_id"] == reqID {
				if l["route"] != "/v1/sandboxes/{sandbox_id}/python/exec" || l["owner"] != "default" || l["status"] != float64(200) || l["method"] != "POST" {
					t.Errorf("access line of the exec = %v", l)
				}
				if _, ok := l["duration_ms"].(float64); !ok {
					t.Errorf("access line without duration_ms: %v", l)
				}
			}
		}
		if l["request_id"] == missID {
			ofMiss++
			if l["owner"] != "default" {
				t.Errorf("a line of an authenticated request without its owner: %v", l)
			}
		}
	}
	if access < 8 {
		t.Errorf("%d access log lines, want one per request", access)
	}
	if ofMiss < 2 {
		t.Errorf("%d log lines carry the 404's request id, want the refusal and the access line", ofMiss)
	}
}
