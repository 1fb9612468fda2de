//go:build k8s

// The Kubernetes driver's tests need the test cluster: make test-k8s starts it and runs them.

package k8s_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/drivertest"
	"github.com/shipyard-dev/shipyard/internal/bay/drivertest/testimage"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
	"github.com/shipyard-dev/shipyard/internal/testenv/k8stest"
)

// nodePidsLimit is the test node's kubelet podPidsLimit (scripts/k8s/up.sh).
const nodePidsLimit = 256

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newDriver(t *testing.T, env *k8stest.Env, ns string, tune func(*k8s.Config)) *k8s.Driver {
	t.Helper()
	cfg := k8s.DefaultConfig()
	cfg.Namespace = ns
	cfg.Kubeconfig = env.Kubeconfig
	cfg.StorageClass = k8stest.StorageClass
	cfg.StorageEnforcesSize = true       // localpv: a loop-mounted ext4 file of the claim's size
	cfg.ImagePullPolicy = kube.PullNever // there is no registry
	cfg.PodStartupTimeout = 60 * time.Second
	if tune != nil {
		tune(&cfg)
	}
	d, err := k8s.New(cfg, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatalf("k8s.New: %v", err)
	}
	if err := d.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	return d
}

var image struct {
	once sync.Once
	ref  string
	err  error
}

// testImage builds the conformance image on the Docker engine (once) and copies it into the
// node's containerd.
func testImage(t *testing.T, env *k8stest.Env) string { return benchImage(t, env) }

func benchImage(t testing.TB, env *k8stest.Env) string {
	t.Helper()
	image.once.Do(func() {
		cli, err := client.New(client.FromEnv)
		if err != nil {
			image.err = err
			return
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		image.ref, image.err = testimage.Ensure(ctx, cli)
	})
	if image.err != nil {
		t.Fatalf("the test image needs the Docker engine: %v", image.err)
	}
	env.ImportImage(t, image.ref)
	return image.ref
}

// TestConformance runs the driver suite against the real node (tier 2).
func TestConformance(t *testing.T) {
	env := k8stest.Node(t)
	ns := env.Namespace(t, "drivertest")
	d := newDriver(t, env, ns, func(c *k8s.Config) { c.NoNetworkRuntimeClass = k8stest.LoopbackRuntimeClass })
	img := testImage(t, env)
	drivertest.Run(t, drivertest.Harness{
		Driver:        d,
		Image:         img,
		RuntimePort:   testimage.Port,
		Live:          true,
		ReadyTimeout:  30 * time.Second,
		NodePidsLimit: nodePidsLimit,
		Kill:          func(t *testing.T, id string) { kill(t, env, ns, id) },
		Effective:     func(t *testing.T, id string) drivertest.Effective { return effective(t, env, ns, id) },
	})
}

// kill SIGKILLs a container through the node's containerd and waits until the API server
// reports it terminated (the kubelet notices within about a second), as the Docker engine
// reports a kill at once.
func kill(t *testing.T, env *k8stest.Env, ns, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := env.Ctr(ctx, "tasks", "kill", "-s", "SIGKILL", k8stest.ContainerdID(id)); err != nil {
		t.Fatalf("kill %s: %v", id, err)
	}
	for {
		pods, err := env.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list pods: %v", err)
		}
		for _, p := range pods.Items {
			for _, s := range p.Status.ContainerStatuses {
				if s.ContainerID == id && s.State.Terminated != nil {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("container %s killed, but the API server does not report it terminated", id)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ociSpec is the part of a container's OCI runtime spec (containerd's record of what it runs)
// the checks read.
type ociSpec struct {
	Root struct {
		Readonly bool `json:"readonly"`
	} `json:"root"`
	Process struct {
		User struct {
			UID uint32 `json:"uid"`
			GID uint32 `json:"gid"`
		} `json:"user"`
		Capabilities struct {
			Bounding  []string `json:"bounding"`
			Effective []string `json:"effective"`
		} `json:"capabilities"`
		NoNewPrivileges bool `json:"noNewPrivileges"`
	} `json:"process"`
	Linux struct {
		CgroupsPath string `json:"cgroupsPath"`
		Resources   struct {
			Memory *struct {
				Limit *int64 `json:"limit"`
				Swap  *int64 `json:"swap"`
			} `json:"memory"`
			CPU *struct {
				Quota  *int64  `json:"quota"`
				Period *uint64 `json:"period"`
			} `json:"cpu"`
		} `json:"resources"`
		Seccomp *struct {
			DefaultAction string `json:"defaultAction"`
		} `json:"seccomp"`
	} `json:"linux"`
}

// effective reads what containerd runs the container with, and the pids limit of its Pod's
// cgroup (where the kubelet's podPidsLimit applies).
func effective(t *testing.T, env *k8stest.Env, ns, id string) drivertest.Effective {
	t.Helper()
	out, err := env.Ctr(t.Context(), "containers", "info", "--spec", k8stest.ContainerdID(id))
	if err != nil {
		t.Fatal(err)
	}
	var s ociSpec
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("containers info %s: %v: %s", id, err, out)
	}
	e := drivertest.Effective{User: fmt.Sprintf("%d:%d", s.Process.User.UID, s.Process.User.GID), ReadonlyRootfs: s.Root.Readonly}
	e.TmpfsBytes = tmpfsSizes(t, env, id)
	for _, c := range s.Process.Capabilities.Bounding {
		e.CapAdd = append(e.CapAdd, strings.TrimPrefix(c, "CAP_"))
	}
	if len(e.CapAdd) <= len(bay.AddableCaps) {
		e.CapDrop = []string{"ALL"} // nothing beyond what may be added is left
	}
	if s.Process.NoNewPrivileges {
		e.SecurityOpt = append(e.SecurityOpt, "no-new-privileges:true")
	}
	if s.Linux.Seccomp == nil {
		t.Errorf("container %s runs without a seccomp profile", id)
	}
	if m := s.Linux.Resources.Memory; m != nil {
		if m.Limit != nil {
			e.Memory = *m.Limit
		}
		if m.Swap != nil {
			e.MemorySwap = *m.Swap
		}
	}
	if c := s.Linux.Resources.CPU; c != nil && c.Quota != nil && c.Period != nil && *c.Quota > 0 {
		e.NanoCPUs = *c.Quota * 1_000_000_000 / int64(*c.Period)
	}
	// The Pod's cgroup is the container's parent (cgroup v1 pids hierarchy on this machine).
	podCgroup := path.Dir(s.Linux.CgroupsPath)
	for _, f := range []string{"/sys/fs/cgroup/pids" + podCgroup + "/pids.max", "/sys/fs/cgroup" + podCgroup + "/pids.max"} {
		if b, err := os.ReadFile(f); err == nil {
			e.PidsLimit, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			break
		}
	}
	// Privileged is the Pod spec's (the OCI spec has no such flag; its effect is the caps and
	// devices checked above).
	pods, err := env.Clientset.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for i, cs := range p.Status.ContainerStatuses {
			if cs.ContainerID != id {
				continue
			}
			for _, c := range p.Spec.Containers {
				if c.Name == p.Status.ContainerStatuses[i].Name && c.SecurityContext != nil && c.SecurityContext.Privileged != nil {
					e.Privileged = *c.SecurityContext.Privileged
				}
			}
		}
	}
	return e
}

// tmpfsSizes reads the memory-backed mounts of a running container and their sizes from its
// process's mount table (the kubelet mounts a memory emptyDir as a tmpfs of its size limit).
func tmpfsSizes(t *testing.T, env *k8stest.Env, id string) map[string]int64 {
	t.Helper()
	out, err := env.Ctr(t.Context(), "tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	pid := ""
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == k8stest.ContainerdID(id) {
			pid = f[1]
		}
	}
	sizes := map[string]int64{}
	if pid == "" {
		return sizes // not running
	}
	b, err := os.ReadFile("/proc/" + pid + "/mountinfo")
	if errors.Is(err, os.ErrNotExist) {
		return sizes // ended meanwhile (a one-shot)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || g[0] != "tmpfs" {
			continue
		}
		for _, o := range strings.Split(g[2], ",") {
			if v, ok := strings.CutPrefix(o, "size="); ok {
				n, _ := strconv.ParseInt(strings.TrimSuffix(v, "k"), 10, 64)
				if strings.HasSuffix(v, "k") {
					n <<= 10
				}
				sizes[f[4]] = n
			}
		}
	}
	return sizes
}

// TestProxyMode reaches a runtime through the API server's Pod proxy (connect_mode proxy):
// the driver's loopback forwarder adds its credentials (the test cluster's client
// certificate) on an HTTP/1.1 connection of its own.
func TestProxyMode(t *testing.T) {
	env := k8stest.Node(t)
	ns := env.Namespace(t, "proxymode")
	d := newDriver(t, env, ns, func(c *k8s.Config) { c.ConnectMode = k8s.ConnectProxy })
	t.Cleanup(func() { _ = d.Close() })
	img := testImage(t, env)
	ctx := t.Context()
	sp := spec("proxy-1", img)
	inst, err := d.CreateInstance(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.DestroyInstance(context.WithoutCancel(ctx), sp.Name) })
	ep := inst.Containers[0].Endpoint
	if !strings.HasPrefix(ep, "http://127.0.0.1:") || !strings.HasSuffix(ep, "/proxy-1/8123") {
		t.Fatalf("endpoint %q, want the loopback forwarder's path to the pod's port", ep)
	}
	getOK(t, ep+"/health", "through the API server")
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	// A path that names no runtime is refused by the forwarder itself.
	base := strings.TrimSuffix(ep, "/proxy-1/8123")
	if resp, err := hc.Get(base + "/Not_A_Pod/8123/health"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a path naming no pod: %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}
}

// spec is a single-container instance of image named name.
func spec(name, img string) bay.InstanceSpec {
	return bay.InstanceSpec{
		Name:      name,
		Labels:    map[string]string{"bay.owner": "Ann O'Neil <ann@example.com>", bay.LabelCreatedAt: "2026-11-26T07:00:00Z", bay.LabelSessionID: "s1"},
		MountPath: "/workspace",
		Containers: []bay.ContainerSpec{{
			Name: "ship", RuntimeType: bay.RuntimeShip, Image: img, Port: 8123,
			Env: map[string]string{"SHIP_AUTH_TOKEN": "secret-token-value", "PORT": "8123"},
		}},
	}
}

// TestObjects checks the objects the driver makes, against the API server alone (tier 1): the
// API server validates every Pod and policy in a dry run; nothing needs the node.
func TestObjects(t *testing.T) {
	env := k8stest.Cluster(t)
	ns := env.Namespace(t, "k8sobjects")
	// The API server admits a Pod only with a RuntimeClass that exists.
	rc, err := env.Clientset.NodeV1().RuntimeClasses().Create(t.Context(), &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-gvisor"}, Handler: "runsc",
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Clientset.NodeV1().RuntimeClasses().Delete(context.WithoutCancel(t.Context()), rc.Name, metav1.DeleteOptions{})
	})
	d := newDriver(t, env, ns, func(c *k8s.Config) {
		c.RuntimeCaps = map[string][]string{"registry.example:5000/ship": {"SETUID", "SETGID", "KILL"}}
		c.RuntimeClassName = rc.Name
		c.ImagePullSecrets = []string{"regcred"}
		c.BayCIDRs = []string{"192.0.2.2/32"}
		c.PodStartupTimeout = 3 * time.Second
	})
	cs := env.Clientset
	ctx := t.Context()

	t.Run("pod", func(t *testing.T) {
		sp := spec("objects-pod", "shipyard-drivertest:1")
		sp.VolumeRef = "bay-cargo-x"
		sp.Containers[0].Limits = bay.Limits{NanoCPUs: 1_500_000_000, MemoryBytes: 512 << 20, ShmBytes: 256 << 20}
		// A skill tree and the index delivered through ConfigMaps: the projected volume and the
		// index's subPath mount must pass the API server's validation too.
		tree := t.TempDir()
		if err := os.WriteFile(path.Join(tree, "SKILL.md"), []byte("# b"), 0o644); err != nil {
			t.Fatal(err)
		}
		gull := bay.ContainerSpec{Name: "gull", RuntimeType: bay.RuntimeGull, Image: "registry.example:5000/ship:v2", Port: 8115,
			Mounts: []bay.Mount{{Source: "/opt/skills/a", Target: "/skills/a", ReadOnly: true},
				{Source: tree, Target: "/skills/b", ReadOnly: true, Snapshot: true},
				{Source: path.Join(tree, "SKILL.md"), Target: bay.SkillsIndexFile, ReadOnly: true, Snapshot: true}}}
		sp.Containers = append(sp.Containers, gull)
		pod, np, err := d.PodFor(sp)
		if err != nil {
			t.Fatal(err)
		}
		// The API server accepts both (a dry run validates without storing).
		pod.Namespace, np.Namespace = ns, ns
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("the API server refuses the Pod: %v", err)
		}
		if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("the API server refuses the NetworkPolicy: %v", err)
		}
		ps := pod.Spec
		if ps.RestartPolicy != corev1.RestartPolicyNever || *ps.AutomountServiceAccountToken || *ps.EnableServiceLinks {
			t.Errorf("restart %s, automount token %v, service links %v; want Never, false, false", ps.RestartPolicy, *ps.AutomountServiceAccountToken, *ps.EnableServiceLinks)
		}
		if ps.RuntimeClassName == nil || *ps.RuntimeClassName != rc.Name || len(ps.ImagePullSecrets) != 1 || ps.ImagePullSecrets[0].Name != "regcred" {
			t.Errorf("runtime class %v, pull secrets %v", ps.RuntimeClassName, ps.ImagePullSecrets)
		}
		if ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("pod seccomp = %v", ps.SecurityContext.SeccompProfile)
		}
		if len(ps.HostAliases) != 1 || ps.HostAliases[0].IP != "127.0.0.1" || !slices.Equal(ps.HostAliases[0].Hostnames, []string{"ship", "gull"}) {
			t.Errorf("host aliases = %+v, want ship and gull on 127.0.0.1", ps.HostAliases)
		}
		raw, _ := json.Marshal(pod)
		if strings.Contains(string(raw), "secret-token-value") {
			t.Error("the runtime token is in the Pod's spec; it belongs in the Secret")
		}
		ship, g := ps.Containers[0], ps.Containers[1]
		for _, c := range ps.Containers {
			sc := c.SecurityContext
			if *sc.AllowPrivilegeEscalation || *sc.Privileged || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
				sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || c.ImagePullPolicy != corev1.PullNever {
				t.Errorf("container %s is not hardened: %+v", c.Name, sc)
			}
		}
		if *ship.SecurityContext.RunAsUser != 1000 || *ship.SecurityContext.RunAsGroup != 1000 || !*ship.SecurityContext.RunAsNonRoot || len(ship.SecurityContext.Capabilities.Add) != 0 {
			t.Errorf("ship: %+v, want 1000:1000, non-root, no capabilities", ship.SecurityContext)
		}
		// The configured runtime caps: root with exactly those, as on Docker for a labelled image.
		if *g.SecurityContext.RunAsUser != 0 || *g.SecurityContext.RunAsNonRoot ||
			!slices.Equal(g.SecurityContext.Capabilities.Add, []corev1.Capability{"SETUID", "SETGID", "KILL"}) {
			t.Errorf("gull with runtime caps: %+v, want uid 0 with SETUID SETGID KILL", g.SecurityContext)
		}
		if got := ship.Resources.Limits.Cpu().MilliValue(); got != 1500 {
			t.Errorf("cpu limit = %dm, want 1500m", got)
		}
		if got := ship.Resources.Limits.Memory().Value(); got != 512<<20 {
			t.Errorf("memory limit = %d", got)
		}
		if got := ship.Resources.Requests.Cpu().MilliValue(); got != 375 {
			t.Errorf("cpu request = %dm, want a quarter of the limit", got)
		}
		if len(g.Resources.Limits) != 0 {
			t.Errorf("gull without limits got %v", g.Resources.Limits)
		}
		mounts := map[string]corev1.VolumeMount{}
		for _, m := range append(ship.VolumeMounts, g.VolumeMounts...) {
			mounts[m.MountPath] = m
		}
		if _, ok := mounts["/workspace"]; !ok || !mounts["/skills/a"].ReadOnly || !mounts["/skills/b"].ReadOnly || mounts[bay.SkillsIndexFile].SubPath != "INDEX.md" {
			t.Errorf("mounts = %+v, want the cargo, read-only skills and the index file", mounts)
		}
		if _, ok := mounts["/dev/shm"]; !ok {
			t.Error("no /dev/shm of the asked size")
		}
		for _, e := range ship.Env {
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != sp.Name {
				t.Errorf("env %s is not taken from the instance's Secret: %+v", e.Name, e)
			}
		}
		// Ingress from bay only, on the runtime ports; egress not to private ranges.
		if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].IPBlock.CIDR != "192.0.2.2/32" || len(np.Spec.Ingress[0].Ports) != 2 {
			t.Errorf("ingress = %+v", np.Spec.Ingress)
		}
		if e := np.Spec.Egress[0].To[0].IPBlock; e.CIDR != "0.0.0.0/0" || !slices.Contains(e.Except, "10.0.0.0/8") || !slices.Contains(e.Except, "169.254.0.0/16") {
			t.Errorf("egress = %+v", np.Spec.Egress)
		}
	})

	t.Run("volumes", func(t *testing.T) {
		labels := map[string]string{bay.LabelOwner: "Ann O'Neil", bay.LabelCreatedAt: "2026-11-26T07:00:00Z", bay.LabelManaged: "true"}
		ref, err := d.CreateVolume(ctx, bay.VolumeSpec{Name: "bay-cargo-objects", Labels: labels, SizeBytes: 300 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.DeleteVolume(context.WithoutCancel(ctx), ref) })
		pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, ref, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.Value() != 300<<20 {
			t.Errorf("claim size = %s, want 300Mi from the cargo's size limit", q.String())
		}
		if *pvc.Spec.StorageClassName != k8stest.StorageClass || pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce {
			t.Errorf("claim spec = %+v", pvc.Spec)
		}
		// Values Kubernetes refuses as label values are found by their hash, reported exactly.
		list, err := d.ListVolumes(ctx, map[string]string{bay.LabelOwner: "Ann O'Neil"})
		if err != nil || len(list) != 1 || !maps.Equal(list[0].Labels, labels) {
			t.Fatalf("ListVolumes(owner) = %+v, %v; want the claim with its exact labels", list, err)
		}
		if list, _ := d.ListVolumes(ctx, map[string]string{bay.LabelOwner: "Ann"}); len(list) != 0 {
			t.Errorf("ListVolumes(other owner) = %+v", list)
		}
		if _, err := d.CreateVolume(ctx, bay.VolumeSpec{Name: "Bad_Name"}); err == nil {
			t.Error("a volume name Kubernetes refuses was accepted")
		}
		if _, err := d.CreateVolume(ctx, bay.VolumeSpec{Name: "bay-cargo-bad-size", SizeBytes: -1}); err == nil {
			t.Error("a negative size was accepted")
		}
	})

	t.Run("unschedulable start times out with its cause and rolls back", func(t *testing.T) {
		sp := spec("objects-unschedulable", "shipyard-drivertest:1")
		sp.Containers[0].Limits.MemoryBytes = 64 << 40 // a quarter of it requested: no node has that
		start := time.Now()
		_, err := d.CreateInstance(ctx, sp)
		if err == nil {
			t.Fatal("CreateInstance of an unschedulable Pod succeeded")
		}
		if !strings.Contains(err.Error(), "Unschedulable") || !strings.Contains(err.Error(), "did not start within 3s") {
			t.Errorf("error %q should say it did not start within the timeout and why (Unschedulable)", err)
		}
		if el := time.Since(start); el > 15*time.Second {
			t.Errorf("the 3 s startup timeout took %v", el)
		}
		list, err := d.ListInstances(ctx, map[string]string{bay.LabelSessionID: "s1"})
		if err != nil || len(list) != 0 {
			t.Errorf("ListInstances after the failed create = %+v, %v; want nothing left", list, err)
		}
		for _, kind := range []func() error{
			func() error { _, err := cs.CoreV1().Secrets(ns).Get(ctx, sp.Name, metav1.GetOptions{}); return err },
			func() error {
				_, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, sp.Name, metav1.GetOptions{})
				return err
			},
		} {
			if err := kind(); err == nil {
				t.Error("an object of the failed create is left")
			}
		}
	})

	t.Run("an interrupted create is listed and destroyed", func(t *testing.T) {
		// A bay killed after the Secret: only it exists.
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "objects-partial", Labels: map[string]string{
			"app.kubernetes.io/managed-by": "shipyard-bay", bay.LabelSessionID: "partial", bay.LabelInstance: "objects-partial",
		}}}
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		list, err := d.ListInstances(ctx, map[string]string{bay.LabelSessionID: "partial"})
		if err != nil || len(list) != 1 || list[0].Name != "objects-partial" || len(list[0].Containers) != 0 {
			t.Fatalf("ListInstances = %+v, %v; want the partial instance without containers", list, err)
		}
		if err := d.DestroyInstance(ctx, "objects-partial"); err != nil {
			t.Fatal(err)
		}
		if _, err := d.InspectInstance(ctx, "objects-partial"); !bay.IsNotFound(err) {
			t.Errorf("InspectInstance after destroy: %v, want not found", err)
		}
	})

	// The rendering of each mode is checked by pod_test.go; here the API server accepts it.
	t.Run("network policy per mode", func(t *testing.T) {
		d := newDriver(t, env, ns, func(c *k8s.Config) {
			c.BayCIDRs = []string{"192.0.2.2/32"}
			c.BlockedRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("203.0.113.128/25"), netip.MustParsePrefix("fc00::/7")}
		})
		for _, p := range []bay.NetworkPolicy{
			{Mode: bay.NetworkNone}, {Mode: bay.NetworkOpen}, {Mode: bay.NetworkIsolated},
			{Mode: bay.NetworkAllowlist, Allow: []string{"203.0.113.0/24:443", "198.51.100.7", "[2001:db8::/32]"}, Deny: []string{"203.0.113.64/26"}},
		} {
			sp := spec("objects-np", "shipyard-drivertest:1")
			sp.Network = p
			_, np, err := d.PodFor(sp)
			if err != nil {
				t.Fatalf("%+v: %v", p, err)
			}
			np.Namespace = ns
			got, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				t.Fatalf("the API server refuses the NetworkPolicy of %+v: %v", p, err)
			}
			if len(got.Spec.Egress) != len(np.Spec.Egress) || len(got.Spec.Ingress) != 1 {
				t.Errorf("%+v: the API server keeps egress %+v ingress %+v", p, got.Spec.Egress, got.Spec.Ingress)
			}
		}
		// A policy the driver cannot enforce is refused before anything is made.
		sp := spec("objects-np-names", "shipyard-drivertest:1")
		sp.Network = bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{"pypi.org"}}
		_, err := d.CreateInstance(ctx, sp)
		var be *bay.Error
		if !errors.As(err, &be) || be.Code != bay.CodeCapabilityNotSupported {
			t.Errorf("CreateInstance with a name allowlist: %v, want capability_not_supported", err)
		}
		if _, err := cs.CoreV1().Secrets(ns).Get(ctx, sp.Name, metav1.GetOptions{}); err == nil {
			t.Error("the refused create left its Secret")
		}
	})

	t.Run("one-shot and seccomp opt-in", func(t *testing.T) {
		d := newDriver(t, env, ns, func(c *k8s.Config) { c.NoNetworkRuntimeClass = rc.Name })
		sp := bay.InstanceSpec{Name: "objects-oneshot", Labels: map[string]string{"bay.exec_id": "e1"}, Network: bay.NetworkPolicy{Mode: bay.NetworkNone},
			Containers: []bay.ContainerSpec{{Name: "exec", RuntimeType: "exec", Image: "shipyard-drivertest:1", User: "1000:1000",
				Command: []string{"python3", "-c", "print(1)"}, WorkDir: "/work", Seccomp: bay.SeccompUserNamespaces,
				Mounts: []bay.Mount{{Source: "/srv/ws/in", Target: "/in", ReadOnly: true}, {Source: "/srv/ws/work", Target: "/work"}}}}}
		pod, np, err := d.PodFor(sp)
		if err != nil {
			t.Fatal(err)
		}
		pod.Namespace, np.Namespace = ns, ns
		got, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("the API server refuses the one-shot's Pod: %v", err)
		}
		if sc := got.Spec.Containers[0].SecurityContext.SeccompProfile; sc.Type != corev1.SeccompProfileTypeLocalhost {
			t.Errorf("the API server keeps seccomp %+v", sc)
		}
		if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("the API server refuses the one-shot's NetworkPolicy: %v", err)
		}
	})

	t.Run("config", func(t *testing.T) {
		bad := k8s.DefaultConfig()
		bad.Namespace, bad.DefaultStorageSize, bad.RequestRatio = "Not A Namespace", "lots", 3
		bad.RuntimeCaps = map[string][]string{"ship:latest": {"SYS_ADMIN"}}
		bad.BayCIDRs = []string{"10.0.0.1"}
		bad.SeccompUserNamespacesProfile = "/etc/passwd"
		bad.NoNetworkRuntimeClass = "No Class"
		err := bad.Validate()
		for _, want := range []string{"namespace", "default_storage_size", "request_ratio", "not an image repository", "SYS_ADMIN", "bay_cidrs",
			"seccomp_userns_profile", "no_network_runtime_class"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Validate() = %v, want it to name %s", err, want)
			}
		}
	})
}

// TestSkillMounts runs a Pod mounting a skill tree and an index file through ConfigMaps (the
// default host_mounts): the files are at their paths with their content and modes, read-only;
// a second Pod of the same content reuses the ConfigMaps; once both Pods are gone the
// collection removes them.
func TestSkillMounts(t *testing.T) {
	env := k8stest.Node(t)
	ns := env.Namespace(t, "skillmounts")
	d := newDriver(t, env, ns, nil)
	img := testImage(t, env)
	ctx := t.Context()
	cs := env.Clientset

	// A tree of nested folders, an executable script, and more than one ConfigMap's worth.
	tree := t.TempDir()
	big := strings.Repeat("0123456789abcdef", 25<<10) // 400 KiB
	files := map[string]string{
		"SKILL.md":             "# demo\n",
		"scripts/run.sh":       "#!/bin/sh\necho run\n",
		"reference/a/b/c.txt":  "deep file\n",
		"data/part1.bin":       big + "1",
		"data/part2.bin":       big + "2",
		"data/part3.bin":       big + "3",
		"reference/a/notes.md": "notes\n",
	}
	for p, content := range files {
		full := path.Join(tree, p)
		if err := os.MkdirAll(path.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, mode); err != nil {
			t.Fatal(err)
		}
	}
	index := path.Join(t.TempDir(), "0123.md")
	if err := os.WriteFile(index, []byte("# Skills\n| demo |\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mounts := []bay.Mount{{Source: tree, Target: "/skills/demo", ReadOnly: true, Snapshot: true},
		{Source: index, Target: bay.SkillsIndexFile, ReadOnly: true, Snapshot: true}}
	const deployment = "dep-skillmounts"
	create := func(name string) bay.Instance {
		t.Helper()
		sp := spec(name, img)
		sp.Labels[bay.LabelDeployment] = deployment
		sp.Containers[0].Mounts = mounts
		began := time.Now()
		inst, err := d.CreateInstance(ctx, sp)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		t.Logf("create %s with the skill mounts: %v", name, time.Since(began).Round(time.Millisecond))
		t.Cleanup(func() { _ = d.DestroyInstance(context.WithoutCancel(ctx), name) })
		return inst
	}
	listCMs := func() map[string]corev1.ConfigMap {
		t.Helper()
		list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=shipyard-bay"})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]corev1.ConfigMap{}
		for _, cm := range list.Items {
			out[cm.Name] = cm
		}
		return out
	}

	inst := create("skills-1")
	ep := inst.Containers[0].Endpoint
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	call := func(method, p string, body string) (int, string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			req, _ := http.NewRequestWithContext(ctx, method, ep+p, strings.NewReader(body))
			resp, err := hc.Do(req)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp.StatusCode, string(b)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s %s: %v", method, p, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for p, content := range files {
		if code, got := call(http.MethodGet, "/file?path=/skills/demo/"+p, ""); code != http.StatusOK || got != content {
			t.Errorf("/skills/demo/%s: %d, %d bytes; want its %d bytes", p, code, len(got), len(content))
		}
	}
	if code, got := call(http.MethodGet, "/file?path="+bay.SkillsIndexFile, ""); code != http.StatusOK || got != "# Skills\n| demo |\n" {
		t.Errorf("index: %d %q", code, got)
	}
	for p, want := range map[string]float64{"/skills/demo/SKILL.md": 0o444, "/skills/demo/scripts/run.sh": 0o555, "/skills/demo/reference/a/b/c.txt": 0o444, bay.SkillsIndexFile: 0o444} {
		code, body := call(http.MethodGet, "/stat?path="+p, "")
		var st struct {
			Mode float64 `json:"mode"`
		}
		if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil || st.Mode != want {
			t.Errorf("stat %s: %d %s, want mode %o", p, code, body, int(want))
		}
	}
	for _, p := range []string{"/skills/demo/new.txt", "/skills/demo/SKILL.md", "/skills/demo/reference/a/x", bay.SkillsIndexFile} {
		if code, body := call(http.MethodPut, "/file?path="+p, "overwritten"); code < 400 {
			t.Errorf("write %s: %d %s, want it refused (read-only)", p, code, body)
		}
	}
	if _, got := call(http.MethodGet, "/file?path=/skills/demo/SKILL.md", ""); got != files["SKILL.md"] {
		t.Errorf("SKILL.md after the refused writes: %q", got)
	}

	first := listCMs()
	if len(first) < 3 { // at least two for the tree (1.2 MiB), one for the index
		t.Fatalf("%d ConfigMaps, want the tree across several and the index", len(first))
	}
	t.Logf("%d ConfigMaps for a tree of %d files and the index", len(first), len(files))
	used := map[string]string{}
	for name, cm := range first {
		if cm.Immutable == nil || !*cm.Immutable || cm.Labels["bay.deployment"] != deployment || cm.Labels["bay.kind"] != "files" {
			t.Errorf("ConfigMap %s: immutable %v, labels %v", name, cm.Immutable, cm.Labels)
		}
		used[name] = cm.Annotations["shipyard.dev/last-used"]
	}

	create("skills-2")
	second := listCMs()
	if len(second) != len(first) {
		t.Errorf("the second Pod of the same content made ConfigMaps: %d, then %d", len(first), len(second))
	}
	for name, cm := range second {
		if cm.UID != first[name].UID {
			t.Errorf("ConfigMap %s was replaced", name)
		}
		if cm.Annotations["shipyard.dev/last-used"] <= used[name] {
			t.Errorf("ConfigMap %s: last use %s, then %s; want it marked again (a patch of an immutable ConfigMap's metadata)", name, used[name], cm.Annotations["shipyard.dev/last-used"])
		}
	}

	// While Pods mount them nothing is collected, however old the cut.
	if got, err := d.CollectSnapshots(ctx, deployment, time.Now().Add(time.Hour), false); err != nil || len(got) != 0 {
		t.Fatalf("collect while mounted: %v, %v", got, err)
	}
	for _, n := range []string{"skills-1", "skills-2"} {
		if err := d.DestroyInstance(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	// Used within the grace period: kept.
	if got, err := d.CollectSnapshots(ctx, deployment, time.Now().Add(-time.Hour), false); err != nil || len(got) != 0 {
		t.Fatalf("collect within the grace: %v, %v", got, err)
	}
	// Another deployment's collection leaves them.
	if got, err := d.CollectSnapshots(ctx, "another", time.Now().Add(time.Minute), false); err != nil || len(got) != 0 {
		t.Fatalf("collect of another deployment: %v, %v", got, err)
	}
	got, err := d.CollectSnapshots(ctx, deployment, time.Now().Add(time.Minute), false)
	if err != nil || len(got) != len(first) {
		t.Fatalf("collect after both Pods: %v, %v; want all %d", got, err, len(first))
	}
	if left := listCMs(); len(left) != 0 {
		t.Errorf("left after the collection: %d ConfigMaps", len(left))
	}
}
