package k8s

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
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
		pod, err := d.instancePod(sp, kube.ObjectMeta{Name: sp.Name, Annotations: map[string]string{}}, nil)
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

// TestCheckRuntime asks an API server for RunscRuntimeClass: missing, it is runtime_missing
// naming the classes there are; once present, runsc passes. runc and the default never need a
// class. The server here answers as the API server does (TestCheckRuntimeAgainstTheAPIServer,
// build tag k8s, asks the real one).
func TestCheckRuntime(t *testing.T) {
	var present atomic.Bool
	d := apiDriver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/node.k8s.io/v1/runtimeclasses":
			fmt.Fprint(w, `{"kind":"RuntimeClassList","apiVersion":"node.k8s.io/v1","metadata":{},"items":[{"metadata":{"name":"kata"},"handler":"kata"}]}`)
		case "/apis/node.k8s.io/v1/runtimeclasses/" + DefaultRunscRuntimeClass:
			if present.Load() {
				fmt.Fprintf(w, `{"kind":"RuntimeClass","apiVersion":"node.k8s.io/v1","metadata":{"name":%q},"handler":"runsc"}`, DefaultRunscRuntimeClass)
				return
			}
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"runtimeclasses.node.k8s.io %q not found","reason":"NotFound","code":404}`, DefaultRunscRuntimeClass)
		default:
			http.NotFound(w, r)
		}
	}))
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
	present.Store(true)
	if err := d.CheckRuntime(ctx, "runsc"); err != nil {
		t.Errorf("runsc with its class: %v", err)
	}
}
