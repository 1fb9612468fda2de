package e2e

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay/netguard"
	"github.com/shipyard-dev/shipyard/internal/testenv"
)

// Code in a sandbox reaches no listener of the host: neither one bound to every address
// through the sandbox network's gateway nor one on another address of the host (the default
// bridge's gateway, read from the engine). Bay (as root, with nft) installs its firewall when
// the driver ensures the sandbox network; without the firewall the same connection succeeds
// (internal/bay/netguard's test proves that on a network of its own).
func TestSandboxesCannotReachTheHost(t *testing.T) {
	t.Parallel()
	cli := docker(t)
	b := startBay(t, bayOptions{})
	id := b.create(nil, nil).Str("id")
	b.shellOK(id, "true")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gw, bridge := engineGateway(t, ctx, cli, "shipyard-sandboxes")
	docker0, _ := engineGateway(t, ctx, cli, "bridge")
	anyAddr := serveOK(t, "0.0.0.0:0")
	_, port, _ := net.SplitHostPort(anyAddr)
	targets := []string{net.JoinHostPort(gw.String(), port), serveOK(t, net.JoinHostPort(docker0.String(), "0"))}
	for _, addr := range targets {
		// The host itself reaches the listener: the address exists and answers.
		if c, err := net.DialTimeout("tcp", addr, 3*time.Second); err != nil {
			t.Fatalf("the host cannot reach its own listener %s: %v", addr, err)
		} else {
			c.Close()
		}
		out := b.shellOK(id, "curl -s -m 3 -o /dev/null -w '%{http_code}' http://"+addr+"/; echo \" rc=$?\"")
		// curl's 7 (could not connect) or 28 (timed out), not a missing curl or another failure.
		if !strings.HasSuffix(out, " rc=7") && !strings.HasSuffix(out, " rc=28") {
			t.Errorf("the sandbox reached the host listener %s, or could not try: %q", addr, out)
		}
		t.Logf("sandbox to %s: %q", addr, out)
	}
	list, err := exec.Command("nft", "list", "set", "inet", netguard.DefaultTable, "guarded").CombinedOutput()
	if err != nil || !strings.Contains(string(list), `"`+bridge+`"`) {
		t.Errorf("the sandbox bridge %s is not in bay's firewall: %v %s", bridge, err, list)
	}
}

// Where the firewall cannot be installed (here: no nft on bay's PATH), sandboxes do not start,
// with the reason in bay's log: never a sandbox running open; with
// security.sandbox_firewall: false the operator runs them without it.
func TestNoFirewallNoSandbox(t *testing.T) {
	t.Parallel()
	docker(t)
	noNFT := []string{"PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin"}
	if _, err := exec.LookPath("/usr/bin/nft"); err == nil {
		t.Fatal("nft is in /usr/bin: this test needs a PATH without it")
	}
	b := startBay(t, bayOptions{env: noNFT})
	id := b.create(nil, nil).Str("id")
	r := b.do("POST", "/v1/sandboxes/"+id+"/shell/exec", map[string]any{"command": "true"}, nil)
	// A retryable 503 that says why; the details are in bay's log, at start-up and with the
	// refused create.
	if r.Status != 503 || r.Str("error.code") != "unavailable" || !strings.Contains(r.Str("error.message"), "firewall") {
		t.Fatalf("exec without a firewall: %s", r)
	}
	// Bay's log reaches the test through a pipe, possibly after the answer.
	for _, line := range []string{"sandbox firewall unavailable: sandboxes will not start", "create runtime instance failed", "the nft command is not installed"} {
		b.waitLog(t, line, 1, 10*time.Second)
	}

	open := startBay(t, bayOptions{env: append(noNFT, "BAY_SECURITY__SANDBOX_FIREWALL=false")})
	id = open.create(nil, nil).Str("id")
	if got := open.shellOK(id, "echo up"); got != "up" {
		t.Fatalf("with the firewall off: %q", got)
	}
	if !strings.Contains(open.logText(), "security.sandbox_firewall is off") {
		t.Fatalf("running open is not said in the log:\n%s", open.logText())
	}
}

// engineGateway reads a network's IPv4 gateway and bridge from the engine; the default
// bridge's gateway, which the engine leaves out, is the bridge interface's address in the
// network's subnet. It must be an address of this host.
func engineGateway(t *testing.T, ctx context.Context, cli *client.Client, name string) (netip.Addr, string) {
	t.Helper()
	res, err := cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if err != nil {
		t.Fatalf("inspect network %s: %v", name, err)
	}
	bridge := netguard.BridgeName(res.Network.ID, res.Network.Options)
	ifc, err := net.InterfaceByName(bridge)
	if err != nil {
		t.Fatalf("bridge %s of %s: %v", bridge, name, err)
	}
	addrs, _ := ifc.Addrs()
	for _, c := range res.Network.IPAM.Config {
		for _, a := range addrs {
			p, err := netip.ParsePrefix(a.String())
			if err == nil && c.Subnet.Contains(p.Addr()) && (!c.Gateway.IsValid() || c.Gateway == p.Addr()) {
				return p.Addr(), bridge
			}
		}
	}
	t.Fatalf("network %s has no gateway address on %s", name, bridge)
	return netip.Addr{}, ""
}

// serveOK answers HTTP 200 on addr until the test ends and returns the bound address.
func serveOK(t *testing.T, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go testenv.Answer(ln, []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
	return ln.Addr().String()
}
