//go:build k8s

package k8se2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/testenv/k8stest"
	"github.com/shipyard-dev/shipyard/sdk"
)

// BenchmarkGVisorColdPython measures cold create -> first python result (`1+1`) through bay on
// the test node, a profile under gVisor (runtime: runsc, the RuntimeClass gvisor) against the
// same profile under runc, interleaved in the same run (each iteration one of each, the order
// alternating). "create" is a lazy POST /v1/sandboxes then the first python call, which starts
// the Pod (claim, Secret, NetworkPolicy, Pod until ship answers, the kernel's start);
// "restart" is the first python call after a stop of that sandbox: the Pod and the kernel
// started again on the claim that exists, which leaves the claim's provisioning out. The stop
// and the delete after are not measured. Reported: p50, min and max per side in ms, and the
// ratio of the p50s.
//
//	scripts/k8s/test.sh -run '^$' -bench GVisorColdPython -benchtime 8x ./e2e/k8se2e
func BenchmarkGVisorColdPython(b *testing.B) {
	env := k8stest.Node(b)
	ns := env.Namespace(b, "shipyard-k8se2e-bench")
	env.ImportImage(b, image)
	c := startBay(b, env, ns, fmt.Sprintf(`  - id: runsc
    image: %q
    runtime: runsc
    resources: {cpus: 1.0, memory: "512m"}
    capabilities: [filesystem, shell, python]
    idle_timeout: 1800
  - id: runc
    image: %q
    runtime: runc
    resources: {cpus: 1.0, memory: "512m"}
    capabilities: [filesystem, shell, python]
    idle_timeout: 1800
`, image, image))
	ctx := context.Background()
	first := func(sb *sdk.Sandbox) time.Duration {
		start := time.Now()
		r, err := sb.Python(ctx, "1+1")
		if err != nil || !r.Success || strings.TrimSpace(r.Output) != "2" {
			b.Fatalf("first python of %s: %+v %v", sb.ID, r, err)
		}
		return time.Since(start)
	}
	// cold returns create -> first python result and restart -> first python result.
	cold := func(profile string) (time.Duration, time.Duration) {
		start := time.Now()
		sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{Profile: profile})
		if err != nil {
			b.Fatalf("create %s: %v", profile, err)
		}
		created := time.Since(start) + first(sb)
		b.StopTimer()
		if err := sb.Stop(ctx); err != nil {
			b.Fatalf("stop %s: %v", profile, err)
		}
		b.StartTimer()
		restarted := first(sb)
		b.StopTimer()
		if err := sb.Delete(ctx); err != nil {
			b.Fatalf("delete %s: %v", profile, err)
		}
		b.StartTimer()
		return created, restarted
	}
	// One unmeasured round of each: the first Pods of a fresh node pay for caches.
	cold("runsc")
	cold("runc")
	series := map[string][]time.Duration{}
	b.ResetTimer()
	for i := range b.N {
		order := []string{"runsc", "runc"}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, p := range order {
			created, restarted := cold(p)
			series[p+"-create"] = append(series[p+"-create"], created)
			series[p+"-restart"] = append(series[p+"-restart"], restarted)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p50 := map[string]float64{}
	for _, name := range slices.Sorted(maps.Keys(series)) {
		ds := series[name]
		slices.Sort(ds)
		p50[name] = ms(ds[len(ds)/2])
		b.ReportMetric(p50[name], name+"-p50-ms")
		b.ReportMetric(ms(ds[0]), name+"-min-ms")
		b.ReportMetric(ms(ds[len(ds)-1]), name+"-max-ms")
		b.Logf("%s: %v", name, ds)
	}
	b.ReportMetric(p50["runsc-create"]/p50["runc-create"], "create-runsc/runc")
	b.ReportMetric(p50["runsc-restart"]/p50["runc-restart"], "restart-runsc/runc")
}
