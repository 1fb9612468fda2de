package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
// gVisor, Chromium starts there, and the browser opens, fills and submits a page ship wrote to
// the shared workspace. (By file: under gVisor the containers do not resolve each other's names,
// see docs/gvisor.md.)
func TestBrowserUnderGVisor(t *testing.T) {
	t.Parallel()
	profiles := strings.Replace(strings.ReplaceAll(browserProfiles, `"ship:latest"`, fmt.Sprintf("%q", testImage)),
		"    pids_limit: 512\n", "    pids_limit: 512\n    runtime: runsc\n", 1)
	b := startBay(t, bayOptions{profiles: profiles})
	id := b.create(map[string]any{"profile": "browser-python"}, nil).Str("id")
	b.writeFile(id, "site/index.html", formPage)
	contains(t, b.shellOK(id, "dmesg | head -1"), "gVisor", "ship's kernel")
	contains(t, b.browserOK(id, "open file:///workspace/site/index.html"), "Form", "open")
	snap := b.browserOK(id, "snapshot -i")
	input, button := refOf(t, snap, "textbox"), refOf(t, snap, "button")
	b.browserOK(id, "fill "+input+" Ada")
	b.browserOK(id, "click "+button)
	if title := strings.TrimSpace(b.browserOK(id, "get title")); title != "Hello, Ada" {
		t.Fatalf("title after submit: %q", title)
	}
	// Name resolution inside gVisor does not reach the engine's embedded DNS server.
	if out := b.shellOK(id, "getent hosts browser || echo unresolved"); out != "unresolved" {
		t.Logf("the browser container's name resolves under gVisor now: %q (update docs/gvisor.md)", out)
	}
}
