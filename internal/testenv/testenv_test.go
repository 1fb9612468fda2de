package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/testenv"
)

// The test binary doubles as a fake bay: with TESTENV_FAKE_BAY set it runs the mode named
// there (serve on TESTENV_FAKE_ADDR, exit at once, or serve ignoring SIGTERM).
func TestMain(m *testing.M) {
	switch mode := os.Getenv("TESTENV_FAKE_BAY"); mode {
	case "":
		os.Exit(m.Run())
	case "exit":
		fmt.Println("fake bay: giving up")
		os.Exit(3)
	case "serve", "stubborn":
		if mode == "stubborn" {
			signal.Ignore(syscall.SIGTERM)
		}
		cfg, _ := os.ReadFile(os.Getenv("BAY_CONFIG_FILE"))
		wd, _ := os.Getwd()
		fmt.Printf("fake bay: args=%v data=%s wd=%s config=%d bytes\n", os.Args[1:], os.Getenv("BAY_DATA_DIR"), wd, len(cfg))
		http.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"status":"healthy"}`)) })
		fmt.Println(http.ListenAndServe(os.Getenv("TESTENV_FAKE_ADDR"), nil))
		os.Exit(1)
	}
}

func fakeBay(t *testing.T, mode string, logs io.Writer) (testenv.BayOptions, testenv.Config) {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := testenv.Config{Port: port, DataDir: dir, APIKey: "sk-testenv", InstanceID: "testenv"}
	return testenv.BayOptions{Binary: os.Args[0], Dir: dir, Config: cfg.YAML(), URL: cfg.URL(), Log: logs,
		Env: []string{"TESTENV_FAKE_BAY=" + mode, fmt.Sprintf("TESTENV_FAKE_ADDR=127.0.0.1:%d", port)}}, cfg
}

func start(t *testing.T, o testenv.BayOptions) *testenv.BayProcess {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := testenv.StartBay(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	return p
}

func TestStartBayHealthyThenTerminate(t *testing.T) {
	logs := &testenv.LogBuffer{}
	o, cfg := fakeBay(t, "serve", logs)
	p := start(t, o)
	if p.URL != cfg.URL() || p.ConfigPath != filepath.Join(o.Dir, "config.yaml") || p.PID() <= 0 {
		t.Fatalf("process: %+v pid %d", p, p.PID())
	}
	resp, err := http.Get(p.URL + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health after start: %v %v", resp, err)
	}
	resp.Body.Close()
	want := fmt.Sprintf("args=[serve] data=%s wd=%s config=%d bytes", o.Dir, o.Dir, len(o.Config))
	if !strings.Contains(logs.String(), want) {
		t.Fatalf("log %q lacks %q", logs, want)
	}
	if err := p.Terminate(30 * time.Second); err != nil {
		t.Fatalf("terminate: %v", err)
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("Exited not closed after Terminate")
	}
	if err := p.Terminate(time.Second); err != nil {
		t.Fatalf("terminate of an ended bay: %v", err)
	}
}

func TestStartBayExitBeforeHealthy(t *testing.T) {
	logs := &testenv.LogBuffer{}
	o, _ := fakeBay(t, "exit", logs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := testenv.StartBay(ctx, o)
	if !errors.Is(err, testenv.ErrExited) || p != nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("want ErrExited with the exit status, got %v %v", p, err)
	}
	if !strings.Contains(logs.String(), "giving up") {
		t.Fatalf("log: %q", logs)
	}
}

func TestStartBayNotHealthyInTimeKills(t *testing.T) {
	o, _ := fakeBay(t, "serve", nil)
	o.URL = "http://127.0.0.1:1" // nothing answers there
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("start-up budget spent"))
	p, err := testenv.StartBay(ctx, o)
	if err == nil || p != nil || errors.Is(err, testenv.ErrExited) || !strings.Contains(err.Error(), "start-up budget spent") {
		t.Fatalf("want the context's cause, got %v %v", p, err)
	}
	// The fake was killed: its port is free again once it is gone.
	addr := strings.TrimPrefix(o.Env[1], "TESTENV_FAKE_ADDR=")
	if resp, err := http.Get("http://" + addr + "/health"); err == nil {
		resp.Body.Close()
		t.Fatal("the fake bay still answers after a failed start")
	}
}

func TestStubbornBayTerminateThenStop(t *testing.T) {
	o, _ := fakeBay(t, "stubborn", nil)
	o.OwnProcessGroup = true
	p := start(t, o)
	if err := p.Terminate(50 * time.Millisecond); err == nil {
		t.Fatal("Terminate of a bay that ignores SIGTERM returned nil")
	}
	select {
	case <-p.Exited():
		t.Fatal("a bay that ignores SIGTERM exited")
	default:
	}
	if err := p.Stop(50 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Stop: %v", err)
	}
	<-p.Exited()
}

func TestKill(t *testing.T) {
	o, _ := fakeBay(t, "serve", nil)
	p := start(t, o)
	p.Kill()
	if err := p.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("exit after Kill: %v", err)
	}
}

// The shared configuration is one bay accepts: it loads and validates with the fragments of
// the harnesses pasted in.
func TestConfigLoads(t *testing.T) {
	dir := t.TempDir()
	c := testenv.Config{Port: 18114, DataDir: dir, APIKey: "sk-testenv-0123456789", InstanceID: "inst-1",
		Driver: "  image_pull_policy: never\n",
		GC:     "  orphan_container:\n    enabled: true\n    grace_seconds: 0\n",
		Extra:  "profiles:\n  - id: p\n    image: \"ship:latest\"\n"}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(c.YAML()), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := config.Load(config.LoadOptions{File: path, Env: []string{}})
	if err != nil {
		t.Fatalf("%v\n%s", err, c.YAML())
	}
	if got.Server.Port != 18114 || got.Server.Host != "127.0.0.1" || got.Database.URL != "sqlite:///"+dir+"/bay.db" ||
		got.Driver.Type != "docker" || got.Driver.ImagePullPolicy != "never" || got.Driver.Docker.ConnectMode != "auto" ||
		got.Security.APIKey != c.APIKey || got.Security.AllowAnonymous || got.GC.Enabled || got.GC.RunOnStartup ||
		got.GC.InstanceID != "inst-1" || !got.GC.OrphanContainer.Enabled || len(got.Profiles) != 1 {
		t.Fatalf("loaded %+v", got)
	}
	if c.URL() != "http://127.0.0.1:18114" {
		t.Fatal(c.URL())
	}
}

func TestLogBufferConcurrent(t *testing.T) {
	var l testenv.LogBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				l.Write([]byte("x"))
				_ = l.String()
			}
		})
	}
	wg.Wait()
	if n := len(l.String()); n != 800 {
		t.Fatalf("%d bytes", n)
	}
}

// RoundRobin sends consecutive requests to its backends in turn, names the one that answered,
// and sends a request refused by a backend that is down (body included) to the next one.
func TestRoundRobin(t *testing.T) {
	var backends []string
	for i := range 2 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%d %s %s", i, r.URL.Path, b)
		}))
		t.Cleanup(srv.Close)
		backends = append(backends, srv.URL)
	}
	port, err := testenv.FreePort() // nothing listens there: a bay that is down
	if err != nil {
		t.Fatal(err)
	}
	backends = append(backends, fmt.Sprintf("http://127.0.0.1:%d", port))
	p, err := testenv.StartRoundRobin(backends...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var got []string
	for range 6 {
		resp, err := http.Post(p.URL+"/v1/x", "text/plain", strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasSuffix(string(b), " /v1/x body") {
			t.Fatalf("proxied answer: %d %q", resp.StatusCode, b)
		}
		if h := resp.Header.Get(testenv.HeaderBackend); h != string(b[0]) {
			t.Fatalf("%s header %q, answered by %q", testenv.HeaderBackend, h, b[:1])
		}
		got = append(got, string(b[0]))
	}
	if strings.Join(got, "") != "010010" {
		t.Fatalf("backends in turn (the third one down): %v", got)
	}
	if s := p.Served(); s[0] != 4 || s[1] != 2 || s[2] != 0 || p.Skipped() != 2 {
		t.Fatalf("served %v, skipped %d", s, p.Skipped())
	}
	if _, err := testenv.StartRoundRobin("ftp://x"); err == nil {
		t.Fatal("a backend that is not an http:// URL was accepted")
	}
}
