package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// Code in one sandbox cannot reach another sandbox's runtime: ship's API has no authentication
// of its own, so on a shared bridge any sandbox could run commands in any other (another
// owner's included). Bay itself still reaches both.
func TestSandboxesCannotReachEachOther(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	b := startBay(t, bayOptions{})
	a := b.create(nil, nil).Str("id")
	victim := b.create(nil, nil).Str("id")
	b.shellOK(a, "true")
	b.shellOK(victim, "echo secret > /workspace/s.txt")

	ip := containerIP(t, cli, victim)
	out := b.shellOK(a, "curl -s -m 3 -o /dev/null -w '%{http_code}' http://"+ip+":8123/health; echo \" rc=$?\"")
	if strings.Contains(out, "200") || strings.Contains(out, "rc=0") {
		t.Fatalf("sandbox %s reached sandbox %s's runtime at %s: %q", a, victim, ip, out)
	}
	if got := b.shellOK(victim, "cat /workspace/s.txt"); got != "secret" {
		t.Fatalf("bay must still reach the sandbox: %q", got)
	}

	// Whoever does reach the port (a host user, a shared network) still needs the session's
	// runtime token for anything but /health.
	hc := &http.Client{Timeout: 5 * time.Second}
	for path, want := range map[string]int{"/health": http.StatusOK, "/meta": http.StatusUnauthorized} {
		resp, err := hc.Get("http://" + ip + ":8123" + path)
		if err != nil {
			t.Fatalf("GET %s from the host: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s without the runtime token: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// containerIP is the address of the sandbox's container on its (first) network.
func containerIP(t *testing.T, cli *client.Client, sandboxID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ins, err := cli.ContainerInspect(ctx, runningContainer(t, cli, sandboxID), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, ep := range ins.Container.NetworkSettings.Networks {
		if ep != nil && ep.IPAddress.IsValid() {
			t.Logf("sandbox %s is at %s on %s", sandboxID, ep.IPAddress, name)
			return ep.IPAddress.String()
		}
	}
	t.Fatalf("sandbox %s has no IP address", sandboxID)
	return ""
}

// User code cannot read the runtime's secrets nor stop it: ship runs under its own uid with
// only the capabilities it needs to start user code as uid 1000 with none (bay starts the
// container as the image's runtime-caps label asks).
func TestRuntimeSecretsAreOutOfReach(t *testing.T) {
	t.Parallel()
	b := startBay(t, bayOptions{})
	id := b.create(map[string]any{}, nil).Str("id")
	out := b.shellOK(id, `id -u; grep CapEff /proc/self/status | tr -d '\t'
ship=""; for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = ship ] && ship=${p#/proc/}; done
echo ship=$ship
cat /proc/1/environ >/dev/null 2>&1 && echo init-env-readable || echo init-env-denied
cat /proc/$ship/environ >/dev/null 2>&1 && echo ship-env-readable || echo ship-env-denied
head -c1 /proc/$ship/mem >/dev/null 2>&1 && echo ship-mem-readable || echo ship-mem-denied
kill -STOP $ship 2>/dev/null && echo ship-stopped || echo ship-signal-denied
env | grep -c AUTH_TOKEN || true`)
	for _, want := range []string{"1000", "CapEff:0000000000000000", "init-env-denied", "ship-env-denied", "ship-mem-denied", "ship-signal-denied"} {
		if !strings.Contains(out, want) {
			t.Errorf("user code: want %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ship=\n") || strings.HasSuffix(strings.TrimSpace(out), "1") {
		t.Errorf("no ship process found, or a token in the shell's environment:\n%s", out)
	}
	py := b.pythonOK(id, "import os; print(os.getuid(), open('/proc/self/status').read().count('CapEff:\\t0000000000000000'))")
	if py != "1000 1" {
		t.Errorf("the kernel runs as %q, want uid 1000 without capabilities", py)
	}
	b.writeFile(id, "owned.txt", "x")
	if got := b.shellOK(id, "stat -c %u:%g owned.txt"); got != "1000:1000" {
		t.Errorf("a file written through the API is owned by %s, want 1000:1000", got)
	}
}
