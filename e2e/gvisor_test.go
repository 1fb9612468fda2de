package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	baydocker "github.com/shipyard-dev/shipyard/internal/bay/docker"
	"github.com/shipyard-dev/shipyard/internal/testenv"
)

// TestExecUnderGVisor: with execs.container_runtime runsc an audited exec runs under gVisor
// (its kernel says so) with the isolation of every exec: uid 1000, no capability,
// no-new-privileges (asked of the kernel: gVisor's /proc has no NoNewPrivs line), loopback only
// (asked of the kernel too: gVisor's /sys/class/net is empty), inputs read-only, work and artifacts writable; meta.json records the runtime. The
// engine must have runsc (scripts/gvisor.sh, run by .ci/run): the test fails without it.
func TestExecUnderGVisor(t *testing.T) {
	cli, err := testenv.EngineClient(context.Background(), execImage)
	if err != nil {
		t.Fatalf("the exec tests need the Docker engine and %s: %v", execImage, err)
	}
	t.Cleanup(func() { cli.Close() })
	ws := filepath.Join(t.TempDir(), "ws")
	b := startBay(t, bayOptions{extraConfig: fmt.Sprintf(`execs:
  workspace_root: %q
  image: %q
  container_runtime: runsc
`, ws, execImage)})
	t.Cleanup(func() { execLeftovers(t, cli) })
	script := `dmesg | head -1
echo "uid=$(id -u) gid=$(id -g)"
python3 -c 'import socket; print("ifaces=" + " ".join(n for _, n in socket.if_nameindex()))'

grep -E '^Cap(Prm|Eff)' /proc/self/status
python3 -c 'import ctypes; print("nnp=%d" % ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))'
if touch /workspace/inputs/new 2>/dev/null; then echo inputs=writable; else echo inputs=readonly; fi
echo w > /workspace/work/w.txt && echo work=writable
echo a > /workspace/artifacts/a.txt && echo artifacts=writable
`
	r := expect(t, b.do("POST", "/v1/sandbox/execs", shellExec("gvisor", script, map[string]any{
		"inputs": []map[string]any{{"path": "in.txt", "content": "x"}},
	}), nil), 200, "run the exec under runsc")
	if r.Str("status") != "succeeded" {
		t.Fatalf("exec: %s", r)
	}
	out, err := os.ReadFile(filepath.Join(ws, r.Str("stdout_path")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Starting gVisor", "uid=1000 gid=1000", "ifaces=lo\n", "CapPrm:\t0000000000000000",
		"CapEff:\t0000000000000000", "nnp=1", "inputs=readonly", "work=writable", "artifacts=writable"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	meta, err := os.ReadFile(filepath.Join(ws, r.Str("artifacts_dir"), "meta.json"))
	if err != nil || !strings.Contains(string(meta), `"runtime": "runsc"`) {
		t.Errorf("meta.json: %s, %v", meta, err)
	}
}

// TestBrowserUnderGVisor: a ship + gull profile with runtime runsc: both containers run under
// gVisor, Chromium starts there, and the browser opens by name (http://ship:8000/, through the
// hosts file bay binds into containers under runsc), fills and submits a page ship serves from
// the shared workspace; ship resolves the browser's container by name too.
func TestBrowserUnderGVisor(t *testing.T) {
	t.Parallel()
	profiles := strings.Replace(strings.ReplaceAll(browserProfiles, `"ship:latest"`, fmt.Sprintf("%q", testImage)),
		"    pids_limit: 512\n", "    pids_limit: 512\n    runtime: runsc\n", 1)
	b := startBay(t, bayOptions{profiles: profiles})
	id := b.create(map[string]any{"profile": "browser-python"}, nil).Str("id")
	b.writeFile(id, "site/index.html", formPage)
	contains(t, b.shellOK(id, "dmesg | head -1"), "gVisor", "ship's kernel")
	serveSite(t, b, id)
	contains(t, b.browserOK(id, "open http://ship:8000/index.html"), "Form", "open by name")
	snap := b.browserOK(id, "snapshot -i")
	input, button := refOf(t, snap, "textbox"), refOf(t, snap, "button")
	b.browserOK(id, "fill "+input+" Ada")
	b.browserOK(id, "click "+button)
	if title := strings.TrimSpace(b.browserOK(id, "get title")); title != "Hello, Ada" {
		t.Fatalf("title after submit: %q", title)
	}
	out := strings.Fields(b.shellOK(id, "getent hosts browser || echo unresolved"))
	if len(out) < 2 || out[1] != "browser" || net.ParseIP(out[0]) == nil {
		t.Errorf("ship resolving the browser's container: %q", out)
	}
}

// TestNetworkPoliciesUnderGVisor: the network policies hold under runsc, with the test's
// local "internet" (egressInternet). Allowlist: /etc/resolv.conf names bay's resolver on the
// policy network's gateway; an allowed name resolves inside the sandbox and is reached with and
// without the proxy; a refused one fails at once (the resolver refuses it, curl does not wait
// for a timeout). None: the resolver there refuses every name at once and nothing is reached.
func TestNetworkPoliciesUnderGVisor(t *testing.T) {
	cli, in, host := policyInternet(t)
	b := startPolicyBay(t, strings.ReplaceAll(policyProfilesFor(), "    capabilities: [filesystem, shell, python]\n",
		"    capabilities: [filesystem, shell, python]\n    runtime: runsc\n"), in, host, "198.51.100.0/24")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("allowlist", func(t *testing.T) {
		id := b.create(map[string]any{"profile": "listed"}, nil).Str("id")
		sh := func(cmd string) string { return strings.TrimSpace(b.shellOK(id, cmd)) }
		contains(t, sh("dmesg | head -1"), "gVisor", "the sandbox's kernel")
		gw, _ := engineGateway(t, ctx, cli, baydocker.EgressNetwork)
		if conf := sh("grep nameserver /etc/resolv.conf"); conf != "nameserver "+gw.String() {
			t.Errorf("/etc/resolv.conf: %q, want bay's resolver on %s only", conf, gw)
		}
		// bay's resolver answers an allowed name with the gateway, which carries the connection.
		if got := strings.Fields(sh("getent hosts api.example.com || echo unresolved")); len(got) != 2 || got[0] != gw.String() || got[1] != "api.example.com" {
			t.Errorf("allowed name inside the sandbox: %q, want it at the gateway %s", got, gw)
		}
		curl := func(args string) string { return sh("curl -sS -m 20 " + args + " 2>&1; echo \" rc=$?\"") }
		for _, args := range []string{"http://api.example.com/", "--noproxy '*' http://api.example.com/"} {
			if got := curl(args); got != "hello from api.example.com rc=0" {
				t.Errorf("curl %s: %q", args, got)
			}
		}
		began := time.Now()
		if got := curl("--noproxy '*' http://evil.test/"); !strings.HasSuffix(got, "rc=6") {
			t.Errorf("refused name: %q, want not resolved", got)
		}
		// A lost query would cost glibc's 5 s timeout twice: a refusal is answered at once.
		d := time.Since(began)
		t.Logf("a refused name failed after %v", d)
		if d > 9*time.Second {
			t.Errorf("the refused name took %v to fail, as long as a resolver that does not answer", d)
		}
		if got := curl("http://evil.test/"); !strings.Contains(got, "evil.test port 80 is refused by the sandbox's network policy") {
			t.Errorf("refused name through the proxy: %q", got)
		}
	})

	t.Run("none", func(t *testing.T) {
		off := b.create(map[string]any{"profile": "offline"}, nil).Str("id")
		gw, _ := engineGateway(t, ctx, cli, baydocker.NoneNetwork)
		if conf := strings.TrimSpace(b.shellOK(off, "grep nameserver /etc/resolv.conf")); conf != "nameserver "+gw.String() {
			t.Errorf("/etc/resolv.conf: %q, want the refusing resolver on %s only", conf, gw)
		}
		noneReachesNothing(t, b, cli, off, host)
	})

	// Under runc bay routes an allowlist's ranges inside the container's network namespace.
	// gVisor's own network stack takes the namespace's routes at boot, so none can be added
	// later; it sends every address off its subnet to the network's gateway address (its
	// routing table has a default route there), where the host's table and the gateway take
	// what the list allows and refuse the rest, as they do for runc's routed ranges.
	t.Run("allowlist with ranges", func(t *testing.T) {
		target, _ := rangeTargets(t)
		open := serveOK(t, net.JoinHostPort(target.String(), "0"))
		away := serveOK(t, net.JoinHostPort(host.String(), "0"))
		id := b.create(map[string]any{"profile": "ranged"}, nil).Str("id")
		curl := func(args string) string {
			return strings.TrimSpace(b.shellOK(id, "curl -sS -m 10 "+args+" 2>&1; echo \" rc=$?\""))
		}
		for _, args := range []string{"http://" + open + "/", "--noproxy '*' http://" + open + "/"} {
			if got := curl(args); got != "ok rc=0" {
				t.Errorf("the allowed range (%s): %q", args, got)
			}
		}
		began := time.Now()
		if got := curl("--noproxy '*' http://" + away + "/"); !strings.HasSuffix(got, "rc=7") {
			t.Errorf("an address off the list, directly: %q, want no connection", got)
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Errorf("the refused direct connection took %v to fail", d)
		}
		if got := curl("http://" + away + "/"); !strings.Contains(got, "not in allow list") {
			t.Errorf("an address off the list through the proxy: %q", got)
		}
		if got := curl("http://api.example.com/"); got != "hello from api.example.com rc=0" {
			t.Errorf("an allowed name beside the range: %q", got)
		}
		// A PATCH that drops the range: refused from then on, both ways.
		expect(t, b.do("PATCH", "/v1/sandboxes/"+id+"/network", map[string]any{"mode": "allowlist", "allow": []string{"api.example.com"}}, nil), 200, "PATCH")
		if got := curl("http://" + open + "/"); !strings.Contains(got, "not in allow list") {
			t.Errorf("the range through the proxy after the PATCH dropped it: %q", got)
		}
		if got := curl("--noproxy '*' http://" + open + "/"); strings.HasSuffix(got, "rc=0") || strings.Contains(got, "ok") {
			t.Errorf("the range directly after the PATCH dropped it: %q", got)
		}
	})
}
