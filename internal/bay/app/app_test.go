package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/app"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient/shipstub"
)

// TestMainServesAndDrains runs the whole daemon on :0 (real SQLite file, real auth, real
// HTTP; the fake driver pointing at a ship stub), makes calls, then cancels while a python
// call is in flight: the call completes (drained) and Run returns nil.
func TestMainServesAndDrains(t *testing.T) {
	dir := t.TempDir()
	stub := shipstub.New()
	defer stub.Close()
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	stub.Python = func(req shipapi.ExecPythonRequest) (int, any) {
		if req.Code == "slow" {
			entered <- struct{}{}
			<-release
		}
		n := 1
		return 200, shipapi.ExecPythonResponse{Success: true, ExecutionCount: &n, Output: shipapi.PythonOutput{Text: req.Code}}
	}
	cfg := sqliteConfig(t, dir)
	m := &app.Main{
		Config: cfg, Addr: "127.0.0.1:0", Env: []string{"BAY_DATA_DIR=" + dir},
		Driver: fake.New(fake.WithEndpointFunc(func(string, bay.ContainerSpec) string { return stub.URL() })),
		Log:    slog.New(slog.DiscardHandler), Version: "test",
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	select {
	case <-m.Ready():
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	base := "http://" + m.ListenAddr()
	call := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-test")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var v map[string]any
		_ = json.Unmarshal(b, &v)
		return res.StatusCode, v
	}
	if st, v := call("GET", "/health", ""); st != 200 || v["version"] != "test" {
		t.Fatalf("health: %d %v", st, v)
	}
	// Real authentication: a wrong key and a missing key are 401 in the envelope.
	for _, h := range []string{"Bearer sk-wrong", ""} {
		req, _ := http.NewRequest("GET", base+"/v1/sandboxes", nil)
		if h != "" {
			req.Header.Set("Authorization", h)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Error struct{ Code, Message, RequestID string } `json:"error"`
		}
		_ = json.NewDecoder(res.Body).Decode(&env)
		res.Body.Close()
		if res.StatusCode != 401 || env.Error.Code != "unauthorized" {
			t.Fatalf("auth %q: %d %+v", h, res.StatusCode, env)
		}
	}
	for _, p := range []string{"/v1/profiles", "/openapi.json"} {
		res, err := http.Get(base + p)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("%s without auth: %v %v", p, res, err)
		}
		res.Body.Close()
	}
	st, v := call("POST", "/v1/sandboxes", "{}")
	if st != 201 {
		t.Fatalf("create: %d %v", st, v)
	}
	id := v["id"].(string)
	if st, v := call("POST", "/v1/sandboxes/"+id+"/python/exec", `{"code":"1+1"}`); st != 200 || v["output"] != "1+1" {
		t.Fatalf("exec: %d %v", st, v)
	}
	if st, _ := call("GET", "/v1/admin/gc/status", ""); st != 200 {
		t.Fatalf("gc status: %d", st)
	}

	slow := make(chan int, 1)
	go func() {
		st, _ := call("POST", "/v1/sandboxes/"+id+"/python/exec", `{"code":"slow"}`)
		slow <- st
	}()
	<-entered
	cancel()
	// New connections are refused once shutdown began; the in-flight call still completes.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", m.ListenAddr())
		if err != nil {
			break // the listener is closed: shutdown is draining
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("listener still open after cancel")
		}
		runtime.Gosched()
	}
	close(release)
	if st := <-slow; st != 200 {
		t.Fatalf("in-flight call: %d", st)
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// Two bays with one instance id on one database would take each other's starts for their own
// leftovers: the second refuses to start while the first runs, and starts once it is gone.
func TestInstanceIDIsExclusive(t *testing.T) {
	dir := t.TempDir()
	newMain := func() *app.Main {
		cfg := config.DefaultConfig()
		cfg.Database.URL = "sqlite:///" + filepath.Join(dir, "bay.db")
		cfg.Security.APIKey = "sk-test"
		cfg.GC.InstanceID = "same-id"
		cfg.GC.RunOnStartup = false
		cfg.WarmPool.RunOnStartup = false
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		return &app.Main{Config: cfg, Addr: "127.0.0.1:0", Env: []string{"BAY_DATA_DIR=" + dir},
			Driver: fake.New(), Log: slog.New(slog.DiscardHandler), Version: "test"}
	}
	first := newMain()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	select {
	case <-first.Ready():
	case err := <-done:
		t.Fatalf("first bay: %v", err)
	}
	err := newMain().Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), `another bay is running with instance id "same-id"`) {
		t.Fatalf("second bay with the same instance id: %v", err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("first bay: %v", err)
	}
	// The first released its lease when it stopped: a successor starts at once.
	again := newMain()
	ctx2, stop2 := context.WithCancel(context.Background())
	defer stop2()
	done2 := make(chan error, 1)
	go func() { done2 <- again.Run(ctx2) }()
	select {
	case <-again.Ready():
	case err := <-done2:
		t.Fatalf("successor: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("successor did not start within 5 s of a clean stop")
	}
	stop2()
	<-done2
}
