package k8s

import (
	"errors"
	"slices"
	"testing"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// TestRuntimeClassOfAProfileRuntime renders the Pod of each runtime: runsc gets
// RunscRuntimeClass (over the configured default and the one-shots' loopback class), runc the
// cluster's default handler, none the configured default; an unknown runtime is refused.
func TestRuntimeClassOfAProfileRuntime(t *testing.T) {
	d := testDriver(t, func(c *Config) {
		c.RuntimeClassName = "default-class"
		c.NoNetworkRuntimeClass = "loopback-only"
		c.RunscRuntimeClass = "sandboxed"
	})
	class := func(sp bay.InstanceSpec) string {
		t.Helper()
		if err := validateInstance(sp); err != nil {
			t.Fatal(err)
		}
		pod, err := d.instancePod(sp, metav1.ObjectMeta{Name: sp.Name, Annotations: map[string]string{}})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.RuntimeClassName == nil {
			return ""
		}
		return *pod.Spec.RuntimeClassName
	}
	for rt, want := range map[string]string{"": "default-class", "runc": "", "runsc": "sandboxed"} {
		sp := runtimeSpec(bay.NetworkPolicy{Mode: bay.NetworkOpen})
		sp.Runtime = rt
		if got := class(sp); got != want {
			t.Errorf("runtime %q: class %q, want %q", rt, got, want)
		}
	}
	sp := oneShot()
	sp.Containers[0].Seccomp = bay.SeccompDefault
	if got := class(sp); got != "loopback-only" {
		t.Errorf("one-shot in mode none: class %q", got)
	}
	sp.Runtime = bay.ContainerRuntimeRunsc
	if got := class(sp); got != "sandboxed" {
		t.Errorf("one-shot under runsc: class %q", got)
	}
	sp.Runtime = "kata"
	if err := validateInstance(sp); err == nil {
		t.Error("an unknown runtime passed validation")
	}
	bad := DefaultConfig()
	bad.RunscRuntimeClass = "Not A Class"
	if err := bad.Validate(); err == nil {
		t.Error("an invalid runsc_runtime_class passed validation")
	}
}

// TestCheckRuntime asks an API server (client-go's fake) for RunscRuntimeClass: missing, it is
// runtime_missing naming the classes there are; once created, runsc passes. runc and the
// default never need a class.
func TestCheckRuntime(t *testing.T) {
	d := testDriver(t, nil)
	cs := fake.NewClientset(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata"})
	d.cs = cs
	ctx := t.Context()
	for _, rt := range []string{"", "runc"} {
		if err := d.CheckRuntime(ctx, rt); err != nil {
			t.Errorf("runtime %q: %v", rt, err)
		}
	}
	err := d.CheckRuntime(ctx, "runsc")
	var e *bay.Error
	if !bay.IsRuntimeMissing(err) || !errors.As(err, &e) || e.Details["runtime"] != "runsc" ||
		!slices.Equal(e.Details["available"].([]string), []string{"kata"}) {
		t.Fatalf("runsc without its class: %v", err)
	}
	if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: DefaultRunscRuntimeClass}, Handler: "runsc"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := d.CheckRuntime(ctx, "runsc"); err != nil {
		t.Errorf("runsc with its class: %v", err)
	}
}
