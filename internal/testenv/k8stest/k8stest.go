// Package k8stest gives tests the project's real single-node Kubernetes (scripts/k8s, started
// by `make k8s-up`; `make test` starts it before the tests and stops it after): the admin
// kubeconfig, a namespace of the test's own, and the node's containerd for the checks a test
// makes behind the API's back. A missing cluster fails the test with how to start it; it never
// skips.
//
// Two tiers: Cluster needs only the API server (etcd, kube-apiserver, controller manager and
// scheduler: object logic, validation, RBAC); Node also needs the node Ready (containerd, CNI
// bridge, kubelet: Pods that run).
package k8stest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Environment variables that override scripts/k8s/env.sh's defaults.
const (
	EnvKubeconfig = "SHIPYARD_K8S_KUBECONFIG" // default /var/lib/shipyard-k8s/admin.kubeconfig
	EnvContainerd = "SHIPYARD_K8S_CONTAINERD" // default /run/shipyard-k8s/containerd.sock
)

// The names scripts/k8s/env.sh gives the test cluster's parts.
const (
	NodeName     = "shipyard-node"
	StorageClass = "shipyard-local"
	// LoopbackRuntimeClass gives a Pod loopback only (the node's containerd handler
	// "loopback").
	LoopbackRuntimeClass = "shipyard-loopback"
	// GVisorRuntimeClass runs a Pod under gVisor (the node's containerd handler "runsc",
	// gVisor's containerd shim; driver.k8s.runsc_runtime_class's default).
	GVisorRuntimeClass = "gvisor"
)

// Env is the cluster as a test sees it.
type Env struct {
	Kubeconfig string
	Clientset  kubernetes.Interface
	// Containerd is the node's containerd socket (Node only).
	Containerd string
}

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Cluster returns the running cluster's API server, or fails the test.
func Cluster(t testing.TB) *Env {
	t.Helper()
	kc := getenv(EnvKubeconfig, "/var/lib/shipyard-k8s/admin.kubeconfig")
	if _, err := os.Stat(kc); err != nil {
		t.Fatalf("no test cluster (kubeconfig %s: %v): start it with `make k8s-up` (or `make k8s-up-tier1` for the API server alone)", kc, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", kc, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if b, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil || string(b) != "ok" {
		t.Fatalf("the test cluster's API server is not ready (%s, %v): `make k8s-down k8s-up`", b, err)
	}
	return &Env{Kubeconfig: kc, Clientset: cs}
}

// Node returns the cluster with its node Ready, or fails the test.
func Node(t testing.TB) *Env {
	t.Helper()
	e := Cluster(t)
	n, err := e.Clientset.CoreV1().Nodes().Get(t.Context(), NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the test cluster has no node %s (%v): start the full cluster with `make k8s-up`", NodeName, err)
	}
	ready := false
	for _, c := range n.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	if !ready {
		t.Fatalf("node %s is not Ready: %+v", NodeName, n.Status.Conditions)
	}
	e.Containerd = getenv(EnvContainerd, "/run/shipyard-k8s/containerd.sock")
	return e
}

// Namespace creates a namespace for the test, waits for its default service account (Pods
// are refused until the controller manager made it) and deletes it at the end.
func (e *Env) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ctx := t.Context()
	ns, err := e.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		if err := e.Clientset.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	// The controller manager makes it within milliseconds; when it is slow (a loaded machine)
	// the test makes it, as the controller would.
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, err := e.Clientset.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return ns.Name
		}
		if time.Now().After(deadline) {
			_, err := e.Clientset.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{
				ObjectMeta: metav1.ObjectMeta{Name: "default"},
			}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("namespace %s: default service account: %v", ns.Name, err)
			}
			return ns.Name
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Ctr runs the node's ctr (namespace k8s.io) and returns its output.
func (e *Env) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"-a", e.Containerd, "-n", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// ImportImage copies an image of the Docker engine into the node's containerd (there is no
// registry): `docker save | ctr images import`.
func (e *Env) ImportImage(t testing.TB, ref string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if out, err := e.Ctr(ctx, "images", "ls", "-q", "name=="+normalize(ref)); err == nil && strings.TrimSpace(string(out)) != "" {
		return
	}
	save := exec.CommandContext(ctx, "docker", "save", ref)
	imp := exec.CommandContext(ctx, "ctr", "-a", e.Containerd, "-n", "k8s.io", "images", "import", "-")
	pipe, err := save.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	imp.Stdin = pipe
	var serr, ierr strings.Builder
	save.Stderr, imp.Stderr = &serr, &ierr
	if err := save.Start(); err != nil {
		t.Fatalf("docker save %s: %v", ref, err)
	}
	if err := imp.Run(); err != nil {
		_ = save.Wait()
		t.Fatalf("import %s into the node's containerd: %v: %s %s", ref, err, ierr.String(), serr.String())
	}
	if err := save.Wait(); err != nil {
		t.Fatalf("docker save %s: %v: %s", ref, err, serr.String())
	}
}

// ContainerRuntime is the containerd runtime a Pod's container (id as the Pod's status gives
// it) runs with: io.containerd.runc.v2, or io.containerd.runsc.v1 under GVisorRuntimeClass.
func (e *Env) ContainerRuntime(t testing.TB, id string) string {
	t.Helper()
	out, err := e.Ctr(t.Context(), "containers", "info", ContainerdID(id))
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ Runtime struct{ Name string } }
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("containers info %s: %v: %s", id, err, out)
	}
	return info.Runtime.Name
}

// ContainerdID strips the runtime prefix of a Pod's container id ("containerd://abc" -> "abc").
func ContainerdID(id string) string {
	_, after, ok := strings.Cut(id, "://")
	if !ok {
		return id
	}
	return after
}

// normalize is containerd's full name of a Docker image reference ("ship:1" ->
// "docker.io/library/ship:1").
func normalize(ref string) string {
	first, _, found := strings.Cut(ref, "/")
	switch {
	case !found:
		return "docker.io/library/" + ref
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		return "docker.io/" + ref
	}
	return ref
}
