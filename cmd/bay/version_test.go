package main_test

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/testenv"
)

// testVersion is injected the way the Makefile injects git's version.
const testVersion = "9.8.7-onever"

// build builds ./cmd/<name>... of the module with the test version, in one go build.
func build(t *testing.T, names ...string) []string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + "/", "-ldflags", "-X github.com/shipyard-dev/shipyard/internal/version.Version=" + testVersion}
	var bins []string
	for _, n := range names {
		args = append(args, "./cmd/"+n)
		bins = append(bins, filepath.Join(dir, n))
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %v: %v\n%s", names, err, out)
	}
	return bins
}

func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(bin), args, err, out)
	}
	return string(out)
}

// One version, injected at build, is what every binary and every surface reports: bay version,
// bay's /health, shipyard version (client and server), the MCP server's serverInfo. The
// runtimes report the same variable (cmd/ship's tests build ship the same way and check /meta).
func TestOneVersionEverywhere(t *testing.T) {
	bins := build(t, "bay", "shipyard")
	bay, cli := bins[0], bins[1]
	for _, c := range [][]string{{bay, "version"}, {bay, "--version"}, {cli, "--version"}} {
		if out := run(t, c[0], c[1:]...); !strings.Contains(out, testVersion) {
			t.Errorf("%s %s = %q, want %s", filepath.Base(c[0]), c[1], out, testVersion)
		}
	}

	dir := t.TempDir()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testenv.Config{Port: port, DataDir: dir, APIKey: "sk-version", InstanceID: "version-test"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := testenv.StartBay(ctx, testenv.BayOptions{Binary: bay, Dir: dir, Config: cfg.YAML(), URL: cfg.URL(), Log: &testenv.LogBuffer{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(10 * time.Second)

	res, err := http.Get(cfg.URL() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `"version":"`+testVersion+`"`) {
		t.Errorf("/health = %s", body)
	}

	out := run(t, cli, "version", "--endpoint", cfg.URL(), "--token", "sk-version")
	if out != "client "+testVersion+"\nserver "+testVersion+" (bay at "+cfg.URL()+")\n" {
		t.Errorf("shipyard version = %q", out)
	}

	req, _ := http.NewRequest("POST", cfg.URL()+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer sk-version")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `"serverInfo":{`) || !strings.Contains(string(body), `"version":"`+testVersion+`"`) {
		t.Errorf("MCP initialize = %d %s", res.StatusCode, body)
	}
}
