package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X github.com/shipyard-dev/shipyard/internal/version.Version=9.9.9-test", ".")
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

// TestNoKernelFromEnv: SHIP_NO_KERNEL=1 (what a browser profile sets on its ship container)
// keeps the kernel from starting at boot, as --no-kernel does; without it ship starts one.
func TestNoKernelFromEnv(t *testing.T) {
	bin := buildShip(t)
	dir := sharedDir(t)
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	if err := os.Chown(ws, 1000, 1000); err != nil && os.Geteuid() == 0 {
		t.Fatal(err)
	}
	status := func(env []string) string {
		t.Helper()
		// A python that cannot be a kernel: the start at boot is attempted all the same.
		args := []string{"--workspace", ws, "--skills-dir", dir, "--python", "/bin/false"}
		var cmd *exec.Cmd
		var addr string
		if os.Geteuid() == 0 {
			cmd, addr = startShipAs(t, bin, env, 1000, args...)
		} else {
			cmd, addr = startShip(t, bin, env, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
		}
		defer stopShip(t, cmd)
		resp, err := http.Get("http://" + addr + "/ipython/kernel/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st struct{ Status string }
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st.Status
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SHIP_") })
	if got := status(append(env, "SHIP_NO_KERNEL=1")); got != "not_started" {
		t.Errorf("kernel with SHIP_NO_KERNEL=1: %s, want not_started", got)
	}
	if got := status(env); got == "not_started" {
		t.Errorf("kernel without SHIP_NO_KERNEL: %s, want a start at boot", got)
	}
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

// TestBinarySeparatesPrivileges starts the binary as root on this machine (with every
// capability: the most ship could get) and checks that it kept only its own uid and SETUID,
// SETGID and KILL on every thread, bounding set included, and that user code runs as the
// sandbox user with nothing and cannot touch ship. Without no-new-privileges ship refuses to
// serve (user code could regain root through a set-user-id program of the host's); with it,
// set by setpriv, it serves. The same in a
// container of the image: internal/imagebuild's TestShipSeparatesPrivilegesInContainer.
func TestBinarySeparatesPrivileges(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("needs root")
		}
		t.Skip("needs root")
	}
	bin := buildShip(t)
	dir := sharedDir(t)
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ws, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	const token = "host-privsep-token"
	env := append(os.Environ(), "SHIP_AUTH_TOKEN="+token, "SHIP_SANDBOX_USER=1000:1000")
	// The probe runs ship's binary as the sandbox user: it must be where that user may run it.
	shared := filepath.Join(dir, "ship")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shared, data, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"--listen", "127.0.0.1:0", "--workspace", ws, "--no-kernel", "--skills-dir", dir}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	refused := exec.CommandContext(ctx, shared, args...)
	refused.Env = env
	out, err := refused.CombinedOutput()
	cancel()
	if err == nil || !strings.Contains(string(out), "no-new-privileges is 0") || strings.Contains(string(out), "ship listening") {
		t.Fatalf("ship without no-new-privileges: %v\n%s", err, out)
	}
	cmd, addr := startShip(t, "/usr/bin/setpriv", env, append([]string{"--no-new-privs", "--", shared}, args...)...)
	pid := cmd.Process.Pid

	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if len(tasks) < 2 {
		t.Fatalf("threads: %v", tasks)
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, want := range []string{"Uid:\t999\t999\t999\t999", "Gid:\t999\t999\t999\t999", "CapEff:\t00000000000000e0",
			"CapPrm:\t00000000000000e0", "CapInh:\t0000000000000000", "CapBnd:\t00000000000000e0", "CapAmb:\t0000000000000000"} {
			if !strings.Contains(string(b), want+"\n") {
				t.Errorf("%s lacks %q", f, want)
			}
		}
	}

	script := fmt.Sprintf(`id -u; id -G; grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status | tr -s '\t' ' '
(exec 3</proc/%[1]d/environ) 2>/dev/null && echo ENVIRON-OPENED
(exec 3</proc/%[1]d/mem) 2>/dev/null && echo MEM-OPENED
kill -STOP %[1]d 2>/dev/null && echo STOPPED
kill -9 %[1]d 2>/dev/null && echo KILLED
echo > written; stat -c %%u:%%g written`, pid)
	body, _ := json.Marshal(map[string]any{"command": script})
	req, _ := http.NewRequest("POST", "http://"+addr+"/shell/exec", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Stdout, Stderr string }
	json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	want := "1000\n1000\nCapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapBnd: 00000000000000e0\n1000:1000\n"
	if r.Stdout != want {
		t.Errorf("user code sees:\n%s\nwant:\n%s(stderr %s)", r.Stdout, want, r.Stderr)
	}
	stopShip(t, cmd)

	// Without SHIP_SANDBOX_USER ship never changes its user (a runtime started by hand).
	plain, _ := startShip(t, bin, os.Environ(), "--listen", "127.0.0.1:0", "--workspace", ws, "--no-kernel", "--skills-dir", dir)
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", plain.Process.Pid)); err != nil || !strings.Contains(string(b), "Uid:\t0\t0\t0\t0\n") {
		t.Errorf("ship without SHIP_SANDBOX_USER changed its user: %v\n%s", err, b)
	}
	stopShip(t, plain)
	// A malformed sandbox user is refused before anything runs.
	for _, bad := range []string{"1000", "0:0", "x:1", "999:999"} {
		out, err := exec.Command(bin, "--sandbox-user", bad, "--workspace", ws).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "sandbox") && !strings.Contains(string(out), "ship uid") {
			t.Errorf("--sandbox-user %s: %v %s", bad, err, out)
		}
	}
}
