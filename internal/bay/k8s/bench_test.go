//go:build k8s

// The Kubernetes driver's tests need the test cluster: make test-k8s starts it and runs them.

package k8s_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay/k8s"
	"github.com/shipyard-dev/shipyard/internal/testenv/k8stest"
)

// BenchmarkCreateStartRemove measures one single-container instance's whole life on the test
// node, as the Docker driver's benchmark of the same name does: create (Secret, NetworkPolicy,
// Pod, watched until its container runs), first /health answered at the Pod IP, destroy (until
// the Pod is gone from the API; 3 s of grace at most).
//
//	make k8s-up && go test -run '^$' -bench CreateStartRemove -benchtime 10x ./internal/bay/k8s/
func BenchmarkCreateStartRemove(b *testing.B) {
	env := k8stest.Node(b)
	ns := env.Namespace(b, "bench")
	cfg := k8s.DefaultConfig()
	cfg.Namespace, cfg.Kubeconfig, cfg.ImagePullPolicy = ns, env.Kubeconfig, "Never"
	d, err := k8s.New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	img := benchImage(b, env)
	httpc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	ctx := context.Background()
	var remove, ready time.Duration
	b.ResetTimer()
	for i := range b.N {
		sp := spec(fmt.Sprintf("bench-%d", i), img)
		start := time.Now()
		inst, err := d.CreateInstance(ctx, sp)
		if err != nil {
			b.Fatal(err)
		}
		for {
			resp, err := httpc.Get(inst.Containers[0].Endpoint + "/health")
			if err == nil {
				resp.Body.Close()
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		ready += time.Since(start)
		t0 := time.Now()
		if err := d.DestroyInstance(ctx, sp.Name); err != nil {
			b.Fatal(err)
		}
		remove += time.Since(t0)
	}
	b.ReportMetric(float64(ready.Milliseconds())/float64(b.N), "ms-to-healthy/op")
	b.ReportMetric(float64(remove.Milliseconds())/float64(b.N), "ms-remove/op")
}
