package main

import (
	"bufio"
	"encoding/json"
	"fmt"
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

// buildShip builds the static binary as `make build` does.
func buildShip(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ship")
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X github.com/shipyard-dev/shipyard/internal/ship/version.Version=9.9.9-test", ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// startShip starts bin with args (which make ship listen on loopback) and returns it and its
// address.
func startShip(t *testing.T, bin string, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// The listening address is logged at start.
	addrRE := regexp.MustCompile(`msg="ship listening".* addr=(\S+)`)
	sc := bufio.NewScanner(stderr)
	var addr string
	var log strings.Builder
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
			break
		}
	}
	if addr == "" {
		t.Fatalf("ship did not log its address:\n%s", log.String())
	}
	go io.Copy(io.Discard, stderr)
	return cmd, addr
}

// stopShip sends SIGTERM and expects a clean exit.
func stopShip(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ship exited with %v after SIGTERM", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("ship did not stop after SIGTERM")
	}
}

// TestBinaryServesAndStopsOnSIGTERM builds the static binary, starts it on
// loopback as a user other than root (no privilege separation) and checks a
// graceful stop.
func TestBinaryServesAndStopsOnSIGTERM(t *testing.T) {
	bin := buildShip(t)
	dir := sharedDir(t)
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	env := os.Environ()
	var cmd *exec.Cmd
	var addr string
	if os.Geteuid() == 0 {
		// Started as root ship would separate privileges; run it as uid 1000 directly.
		if err := os.Chown(ws, 1000, 1000); err != nil {
			t.Fatal(err)
		}
		cmd, addr = startShipAs(t, bin, env, 1000, "--workspace", ws, "--no-kernel", "--skills-dir", dir)
	} else {
		cmd, addr = startShip(t, bin, env, "--listen", "127.0.0.1:0", "--workspace", ws, "--no-kernel", "--skills-dir", dir)
	}
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
	stopShip(t, cmd)
}

// sharedDir is a temporary directory every user may enter.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for p := filepath.Dir(dir); p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	return dir
}

// startShipAs is startShip for another uid (and gid).
func startShipAs(t *testing.T, bin string, env []string, uid int, args ...string) (*exec.Cmd, string) {
	t.Helper()
	shared := filepath.Join(sharedDir(t), "ship")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shared, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return startShip(t, "/usr/bin/setpriv", env, append([]string{
		fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", uid), "--clear-groups", "--", shared, "--listen", "127.0.0.1:0"}, args...)...)
}
