package docker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay/docker"
)

// BenchmarkCreateStartRemove measures one single-container instance's whole life on the real
// engine: create and start (endpoint resolved), first /health answered, destroy. The destroy
// share is reported separately (well under a second on an idle engine).
//
//	go test -run '^$' -bench CreateStartRemove -benchtime 20x ./internal/bay/docker/
func BenchmarkCreateStartRemove(b *testing.B) {
	for _, mode := range []docker.ConnectMode{docker.ConnectContainerNetwork, docker.ConnectHostPort} {
		b.Run(string(mode), func(b *testing.B) {
			_, image := requireEngine(b)
			d, err := docker.New(modeConfig(mode), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			ctx := context.Background()
			var remove, ready time.Duration
			b.ResetTimer()
			for i := range b.N {
				f := &fixture{image: image, run: fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i)}
				spec := f.spec("b")
				start := time.Now()
				inst, err := d.CreateInstance(ctx, spec)
				if err != nil {
					b.Fatal(err)
				}
				endpoint := inst.Containers[0].Endpoint
				for {
					resp, err := httpc.Get(endpoint + "/health")
					if err == nil {
						resp.Body.Close()
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				ready += time.Since(start)
				t0 := time.Now()
				if err := d.DestroyInstance(ctx, spec.Name); err != nil {
					b.Fatal(err)
				}
				remove += time.Since(t0)
			}
			b.ReportMetric(float64(ready.Milliseconds())/float64(b.N), "ms-to-healthy/op")
			b.ReportMetric(float64(remove.Milliseconds())/float64(b.N), "ms-remove/op")
		})
	}
}
