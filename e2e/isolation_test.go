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
