//go:build k8s

package k8s_test

import (
	"context"
	"testing"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s"
	"github.com/shipyard-dev/shipyard/internal/testenv/k8stest"
)

// TestCheckRuntimeAgainstTheAPIServer asks the test cluster's API server for the runsc
// RuntimeClass (tier 1): missing, runsc is runtime_missing; once it exists, runsc passes; runc
// never needs one. The class is the test's own, named after its namespace: the cluster is
// shared.
func TestCheckRuntimeAgainstTheAPIServer(t *testing.T) {
	env := k8stest.Cluster(t)
	ns := env.Namespace(t, "k8sruntime")
	class := ns + "-runsc"
	d := newDriver(t, env, ns, func(c *k8s.Config) { c.RunscRuntimeClass = class })
	ctx := t.Context()
	if err := d.CheckRuntime(ctx, bay.ContainerRuntimeRunsc); !bay.IsRuntimeMissing(err) {
		t.Fatalf("runsc without its RuntimeClass: %v", err)
	}
	if err := d.CheckRuntime(ctx, bay.ContainerRuntimeRunc); err != nil {
		t.Fatalf("runc: %v", err)
	}
	if _, err := env.Clientset.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: class}, Handler: "runsc",
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Clientset.NodeV1().RuntimeClasses().Delete(context.WithoutCancel(ctx), class, metav1.DeleteOptions{})
	})
	if err := d.CheckRuntime(ctx, bay.ContainerRuntimeRunsc); err != nil {
		t.Fatalf("runsc with its RuntimeClass: %v", err)
	}
}
