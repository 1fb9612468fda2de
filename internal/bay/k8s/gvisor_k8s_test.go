//go:build k8s

package k8s_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/drivertest/testimage"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s"
	"github.com/shipyard-dev/shipyard/internal/testenv"
	"github.com/shipyard-dev/shipyard/internal/testenv/k8stest"
)

// The test node runs Pods of the RuntimeClass gvisor under gVisor: containerd's handler runsc
// is gVisor's containerd shim (scripts/k8s/up.sh). These tests fail, never skip, when it is
// missing.

// runscShim is the containerd runtime of the handler runsc.
const runscShim = "io.containerd.runsc.v1"

// runscSpec is a single-container instance of img under runsc (the driver's default
// RuntimeClass for it, gvisor).
func runscSpec(name, img string, p bay.NetworkPolicy) bay.InstanceSpec {
	sp := spec(name, img)
	sp.Runtime = bay.ContainerRuntimeRunsc
	sp.Network = p
	return sp
}

// TestGVisorNetworkPolicy: a sandbox under gVisor keeps its NetworkPolicy. gVisor's network
// stack takes over the Pod's interface inside the sandbox, but the Pod's end of the CNI
// bridge and the enforcer's rules on it are the host's, as under runc: mode none reaches
// nothing, mode open reaches the Pod network (the control that the sandbox's network works at
// all) but not the blocked node, and ingress stays bay's alone. The runtime of the Pod's
// container is gVisor's shim.
func TestGVisorNetworkPolicy(t *testing.T) {
	env := k8stest.Node(t)
	ns := env.Namespace(t, "gvisor-netpol")
	img := testImage(t, env)
	nodeIP := env.NodeIP(t)
	host := hostServer(t, nodeIP)
	peer := startPeer(t, env, ns, "peer", img, nil)
	bayPod := startPeer(t, env, ns, "bay", img, map[string]string{"app.kubernetes.io/name": "shipyard-bay"})
	peerURL := "http://" + net.JoinHostPort(peer, strconv.Itoa(testimage.Port)) + "/health"
	bayURL := "http://" + net.JoinHostPort(bayPod, strconv.Itoa(testimage.Port))
	expectReached(t, bayURL, host+"/health", "control: bay's Pod -> node")
	expectReached(t, bayURL, peerURL, "control: bay's Pod -> peer Pod")

	t.Run("none", func(t *testing.T) {
		d := newDriver(t, env, ns, nil)
		ep := startSpec(t, d, runscSpec("gvisor-none", img, bay.NetworkPolicy{Mode: bay.NetworkNone}))
		inst, err := d.InspectInstance(t.Context(), "gvisor-none")
		if err != nil {
			t.Fatal(err)
		}
		if rt := env.ContainerRuntime(t, inst.Containers[0].ID); rt != runscShim {
			t.Fatalf("the sandbox's container runs with %q, want %s", rt, runscShim)
		}
		waitEnforced(t, ep, peerURL, "egress none under gVisor: sandbox -> peer Pod")
		expectRefused(t, ep, host+"/health", "egress none under gVisor: sandbox -> node")
		expectReached(t, bayURL, ep+"/health", "ingress under gVisor: bay's Pod -> sandbox")
		expectRefused(t, "http://"+net.JoinHostPort(peer, strconv.Itoa(testimage.Port)), ep+"/health", "ingress under gVisor: peer Pod -> sandbox")
	})

	t.Run("open", func(t *testing.T) {
		d := newDriver(t, env, ns, func(c *k8s.Config) { c.BlockedRanges = []netip.Prefix{netip.PrefixFrom(nodeIP, 32)} })
		ep := startSpec(t, d, runscSpec("gvisor-open", img, bay.NetworkPolicy{Mode: bay.NetworkOpen}))
		waitEnforced(t, ep, host+"/health", "egress open under gVisor: sandbox -> node (a blocked host)")
		expectReached(t, ep, peerURL, "egress open under gVisor: sandbox -> peer Pod")
	})
}

// TestGVisorForkBomb: under gVisor the Pod's pids cgroup (the kubelet's podPidsLimit) also
// counts the sandbox kernel's own tasks, so a fork bomb that fills it leaves gVisor's kernel
// unable to make a thread, and it dies with every process of the Pod. The node's runsc handler
// sets RLIMIT_NPROC below it (bay.RunscPodProcessLimit of the podPidsLimit), which gVisor enforces
// per uid: the bomb's forks fail with EAGAIN as under runc, and the script's last line, printed
// by bash builtins after five seconds of the bomb, appears. A one-shot in mode none, as an
// exec's container runs.
func TestGVisorForkBomb(t *testing.T) {
	env := k8stest.Node(t)
	ns := env.Namespace(t, "gvisor-bomb")
	const img = "ship:base" // bash and mkfifo
	env.ImportImage(t, img)
	d := newDriver(t, env, ns, nil)
	ctx := t.Context()
	sp := bay.InstanceSpec{Name: "gvisor-bomb", Runtime: bay.ContainerRuntimeRunsc, Network: bay.NetworkPolicy{Mode: bay.NetworkNone},
		Labels:     map[string]string{bay.LabelOwner: "alice"},
		Containers: []bay.ContainerSpec{{Name: "exec", RuntimeType: "exec", Image: img, User: "1000:1000", Command: []string{"bash", "-c", testenv.ForkBombScript}}}}
	if _, err := d.CreateInstance(ctx, sp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.DestroyInstance(context.WithoutCancel(ctx), sp.Name) })
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	exit, err := d.WaitInstance(wctx, sp.Name, &stdout, &stderr)
	limit := bay.RunscPodProcessLimit(nodePidsLimit)
	var nproc, procs int64
	if n, _ := fmt.Sscanf(stdout.String(), "%d\nprocesses %d\nsurvived\n", &nproc, &procs); n != 2 || err != nil || exit.Code != 0 {
		t.Fatalf("one-shot fork bomb under gVisor: %+v %v: stdout %q, stderr %q", exit, err, stdout.String(), lastLines(stderr.String(), 5))
	}
	if nproc != limit || procs < limit/3 {
		t.Fatalf("RLIMIT_NPROC %d (want %d), %d processes at the end of the bomb", nproc, limit, procs)
	}
	t.Logf("%d processes of at most %d at the end of the bomb", procs, limit)
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
