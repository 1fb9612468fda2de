//go:build k8s

package k8se2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/testenv"
	"github.com/shipyard-dev/shipyard/internal/testenv/k8stest"
	"github.com/shipyard-dev/shipyard/sdk"
)

// gvisorProfile runs the sandbox image under gVisor (runtime: runsc, the Pod's RuntimeClass
// gvisor: the test node's containerd handler runsc) without any network.
const gvisorProfile = `  - id: python-gvisor
    image: %q
    runtime: runsc
    network: {mode: none}
    resources: {cpus: 1.0, memory: "512m"}
    capabilities: [filesystem, shell, python]
    idle_timeout: 1800
`

// TestGVisorOnKubernetes: a sandbox of a runsc profile on the cluster. Its Pod names the
// RuntimeClass gvisor and its containers run under gVisor's containerd shim; ship serves
// python and shell there with its privileges separated (user code is 1000 with no capability
// and no-new-privileges, cannot take root's uid); in mode none nothing outside the Pod is
// reachable; the workspace survives stop and resume (the resumed Pod under gVisor again); a
// fork bomb in the session leaves gVisor's kernel alive and the sandbox answers again.
func TestGVisorOnKubernetes(t *testing.T) {
	env := k8stest.Node(t)
	ns := env.Namespace(t, "shipyard-k8se2e-gvisor")
	env.ImportImage(t, image)
	c := startBay(t, env, ns, fmt.Sprintf(gvisorProfile, image))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	listener := nodeListener(t, env)

	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{Profile: "python-gvisor"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = sb.Delete(context.WithoutCancel(ctx)) })
	py := func(code string) string {
		t.Helper()
		r, err := sb.Python(ctx, code)
		if err != nil || !r.Success {
			t.Fatalf("python %q: %+v %v", code, r, err)
		}
		return strings.TrimSpace(r.Output)
	}
	sh := func(cmd string) string {
		t.Helper()
		r, err := sb.Shell(ctx, cmd)
		if err != nil || !r.Success {
			t.Fatalf("shell %q: %+v %v", cmd, r, err)
		}
		return r.Output
	}

	began := time.Now()
	if out := py("x = 6 * 7\nprint(x)"); out != "42" {
		t.Fatalf("python: %q", out)
	}
	t.Logf("cold create -> first python result under gVisor: %v", time.Since(began).Round(time.Millisecond))
	checkGVisorPod(t, env, ns, sb)
	if out := sh("dmesg 2>&1 | head -1"); !strings.Contains(out, "gVisor") {
		t.Fatalf("the sandbox's kernel is not gVisor's: dmesg says %q", out)
	}

	t.Run("user code holds nothing", func(t *testing.T) { testenv.CheckUserCodeHoldsNothing(t, sh, py) })

	t.Run("mode none reaches nothing", func(t *testing.T) {
		// What the Pod's network looks like inside gVisor: its own stack holds the CNI
		// bridge's interface and address (the host's rules on the bridge filter it).
		t.Logf("the sandbox's network under gVisor:\n%s", sh("cat /proc/net/dev; python3 -c 'import socket; print(socket.if_nameindex())'; cat /proc/net/route"))
		out := py(fmt.Sprintf(`import socket
try:
    socket.create_connection((%q, %d), timeout=3).close()
    print("connected")
except OSError as e:
    print("refused:", e)`, listener.IP.String(), listener.Port))
		if !strings.HasPrefix(out, "refused:") {
			t.Errorf("a sandbox in mode none reached the node (%s): %q", listener, out)
		}
		t.Logf("mode none -> node %s: %s", listener, out)
	})

	t.Run("the workspace survives stop and resume", func(t *testing.T) {
		if err := sb.WriteFile(ctx, "notes/keep.txt", "kept under gVisor"); err != nil {
			t.Fatal(err)
		}
		if out := sh("stat -c %u:%g notes notes/keep.txt"); out != "1000:1000\n1000:1000" {
			t.Errorf("owners of the API's files: %q", out)
		}
		if err := sb.Stop(ctx); err != nil {
			t.Fatalf("stop: %v", err)
		}
		waitObjects(t, env, ns, sb, "after stop", func(n map[string]int) bool { return n["pods"] == 0 && n["claims"] == 1 })
		if out := py("print(open('notes/keep.txt').read())"); out != "kept under gVisor" {
			t.Fatalf("the file after resume: %q", out)
		}
		checkGVisorPod(t, env, ns, sb)
	})

	t.Run("a session heals after a fork bomb", func(t *testing.T) {
		r, err := sb.ExecShell(ctx, sdk.ShellRequest{Command: "timeout 10 bash -c ':(){ :|:& };:' 2>/dev/null; echo ended", ExecOptions: sdk.ExecOptions{Timeout: time.Minute}})
		t.Logf("the fork bomb's call: %+v %v", r, err)
		// Then the sandbox answers again in bounded time: ship finds the user's processes at
		// RLIMIT_NPROC and kills them, or, when the bomb starved ship past bay's health checks,
		// bay replaces the runtime and answers a retryable session_not_ready meanwhile. Had
		// gVisor's kernel died, the Pod would have ended with every process in it.
		deadline := time.Now().Add(3 * time.Minute)
		for {
			r, err := sb.ExecShell(ctx, sdk.ShellRequest{Command: "echo alive", ExecOptions: sdk.ExecOptions{Timeout: 30 * time.Second}})
			if err == nil && r.Output == "alive" {
				t.Logf("answered again; notice %q", r.Notice)
				break
			}
			if err != nil && !sdk.IsCode(err, bayapi.CodeSessionNotReady) {
				t.Fatalf("a call after the fork bomb: %v", err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("no call succeeded within 3 min of the fork bomb; the last: %+v %v", r, err)
			}
			t.Logf("a call after the fork bomb: %+v %v", r, err)
			time.Sleep(time.Second)
		}
		if out := py("print(open('notes/keep.txt').read())"); out != "kept under gVisor" {
			t.Errorf("the workspace after the fork bomb: %q", out)
		}
	})
}

// checkGVisorPod asserts that the sandbox's one Pod names the RuntimeClass gvisor and that
// containerd runs its containers with gVisor's shim.
func checkGVisorPod(t *testing.T, env *k8stest.Env, ns string, sb *sdk.Sandbox) {
	t.Helper()
	pods, err := env.Clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "bay.sandbox_id=" + sb.ID})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the sandbox's Pods: %v %v", pods, err)
	}
	p := pods.Items[0]
	if p.Spec.RuntimeClassName == nil || *p.Spec.RuntimeClassName != k8stest.GVisorRuntimeClass {
		t.Fatalf("Pod %s: runtimeClassName %v, want %s", p.Name, p.Spec.RuntimeClassName, k8stest.GVisorRuntimeClass)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if rt := env.ContainerRuntime(t, cs.ContainerID); rt != "io.containerd.runsc.v1" {
			t.Fatalf("container %s of Pod %s runs with %q, want io.containerd.runsc.v1", cs.Name, p.Name, rt)
		}
	}
}

// nodeListener accepts TCP connections on the node's address until the test ends: a target
// outside the Pod that a sandbox in mode none must not reach.
func nodeListener(t *testing.T, env *k8stest.Env) *net.TCPAddr {
	t.Helper()
	n, err := env.Clientset.CoreV1().Nodes().Get(t.Context(), k8stest.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ip string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && net.ParseIP(a.Address).To4() != nil {
			ip = a.Address
		}
	}
	ln, err := net.Listen("tcp4", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on the node's address %q: %v", ip, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr)
}
