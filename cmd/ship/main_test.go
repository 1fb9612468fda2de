package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDependencies keeps the sandbox runtime free of control-plane clients.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{
		"github.com/shipyard-dev/shipyard/internal/bay",
		"github.com/moby/", "github.com/docker/", "k8s.io/", "database/sql",
		"modernc.org/sqlite", "github.com/jackc/",
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("cmd/ship links %s", dep)
			}
		}
	}
}

// TestBinaryServesAndStopsOnSIGTERM builds the static binary, starts it on
// loopback and checks a graceful stop.
func TestBinaryServesAndStopsOnSIGTERM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ship")
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X github.com/shipyard-dev/shipyard/internal/ship/version.Version=9.9.9-test", ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--workspace", t.TempDir(), "--no-kernel", "--skills-dir", t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The listening address is logged at start.
	addrRE := regexp.MustCompile(`msg="ship listening".* addr=(\S+)`)
	sc := bufio.NewScanner(stderr)
	var addr string
	for sc.Scan() {
		if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
			break
		}
	}
	if addr == "" {
		t.Fatal("ship did not log its address")
	}
	go io.Copy(io.Discard, stderr)
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]string
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if h["status"] != "healthy" || h["version"] != "9.9.9-test" {
		t.Fatalf("health %v", h)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ship exited with %v after SIGTERM", err)
		}
	case <-ctx.Done():
		t.Fatal("ship did not stop after SIGTERM")
	}
}
