package docker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/docker"
	"github.com/shipyard-dev/shipyard/internal/bay/drivertest"
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
				pollHealth(inst.Containers[0].Endpoint)
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

// BenchmarkColdStartCargo measures what a sandbox's first start costs with its cargo: the
// cargo volume created (a bounded one is an ext4 file, formatted here or taken from the spares,
// and loop-mounted: quota.go, spares.go; an unbounded one is a plain local volume), the
// instance created and started on it, and its first /health answered. Iterations are about a
// second apart, like starts that are not a burst, so the spares are refilled between them. The
// cleanup (destroy, volume delete) is not timed.
//
//	go test -run '^$' -bench ColdStartCargo -benchtime 10x ./internal/bay/docker/
func BenchmarkColdStartCargo(b *testing.B) {
	for _, quota := range []docker.CargoQuotaMode{docker.CargoQuotaOff, docker.CargoQuotaLoop} {
		b.Run(string(quota), func(b *testing.B) {
			_, image := requireEngine(b)
			cfg := modeConfig(docker.ConnectAuto)
			cfg.CargoQuota, cfg.CargoDir = quota, b.TempDir()
			d, err := docker.New(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			ctx := context.Background()
			var volume, instance, ready time.Duration
			b.ResetTimer()
			for i := range b.N {
				f := &fixture{image: image, run: fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i)}
				spec := f.spec("c")
				t0 := time.Now()
				ref, err := d.CreateVolume(ctx, bay.VolumeSpec{Name: spec.Name + "-cargo", SizeBytes: 1 << 30,
					Labels: map[string]string{drivertest.LabelTestRun: f.run}})
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				spec.VolumeRef = ref
				inst, err := d.CreateInstance(ctx, spec)
				if err != nil {
					d.DeleteVolume(ctx, ref)
					b.Fatal(err)
				}
				t2 := time.Now()
				pollHealth(inst.Containers[0].Endpoint)
				t3 := time.Now()
				volume, instance, ready = volume+t1.Sub(t0), instance+t2.Sub(t1), ready+t3.Sub(t2)
				b.StopTimer()
				if err := d.DestroyInstance(ctx, spec.Name); err != nil {
					b.Fatal(err)
				}
				if err := d.DeleteVolume(ctx, ref); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
			b.ReportMetric(per(volume), "ms-volume/op")
			b.ReportMetric(per(instance), "ms-create-start/op")
			b.ReportMetric(per(ready), "ms-started-to-healthy/op")
		})
	}
}

// pollHealth returns once the runtime at endpoint answers /health, asking every 5 ms.
func pollHealth(endpoint string) {
	for {
		resp, err := httpc.Get(endpoint + "/health")
		if err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
