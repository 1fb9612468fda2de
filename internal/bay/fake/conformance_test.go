package fake_test

import (
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay/drivertest"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
)

// TestConformance runs the driver conformance suite against the fake. Its endpoints serve
// nothing (Live false): the suite's checks of the runtimes' behaviour run against the real
// engine only, every check of the driver's own answers runs here too.
func TestConformance(t *testing.T) {
	const image = "shipyard-drivertest:fake"
	d := fake.New(fake.WithImages(image))
	drivertest.Run(t, drivertest.Harness{
		Driver: d,
		Image:  image,
		Kill: func(t *testing.T, id string) {
			if !d.Kill(id) {
				t.Fatalf("kill %s: no such container", id)
			}
		},
		Effective: func(t *testing.T, id string) drivertest.Effective {
			c, ok := d.Container(id)
			if !ok {
				t.Fatalf("effective %s: no such container", id)
			}
			return drivertest.Effective{
				User:           c.User,
				CapDrop:        c.CapDrop,
				CapAdd:         c.CapAdd,
				SecurityOpt:    c.SecurityOpt,
				Privileged:     c.Privileged,
				PidsLimit:      c.PidsLimit,
				Memory:         c.Spec.Limits.MemoryBytes,
				MemorySwap:     c.MemorySwap,
				NanoCPUs:       c.Spec.Limits.NanoCPUs,
				ReadonlyRootfs: c.ReadonlyRootfs,
				TmpfsBytes:     map[string]int64{"/tmp": c.TmpBytes, "/var/tmp": c.TmpBytes},
			}
		},
	})
}
