package drivertest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// testUsage checks bay.UsageReporter, for drivers that implement it: the limits of the spec
// come back, a live container reports its own use, a missing instance is not_found.
func (s *suite) testUsage(t *testing.T) {
	ur, ok := s.h.Driver.(bay.UsageReporter)
	if !ok {
		t.Logf("%T does not report usage (optional port)", s.h.Driver)
		return
	}
	ctx := t.Context()
	if _, err := ur.InstanceUsage(ctx, s.name("absent")); !bay.IsNotFound(err) {
		t.Fatalf("InstanceUsage of a missing instance: %v, want not_found", err)
	}
	spec := s.spec()
	spec.VolumeRef = s.volume(t, s.labels())
	spec.Containers[0].Limits = bay.Limits{MemoryBytes: 64 << 20, NanoCPUs: 500_000_000, PidsLimit: 100}
	inst := s.create(t, spec)
	if s.h.Live {
		// Something on the volume for the measurement to see.
		if _, err := s.do(ctx, http.MethodPut, inst.Containers[0].Endpoint+"/file?path=/workspace/blob", strings.NewReader(strings.Repeat("x", 300_000))); err != nil {
			t.Fatalf("write into the cargo volume: %v", err)
		}
	}
	u, err := ur.InstanceUsage(ctx, spec.Name)
	if err != nil {
		t.Fatalf("InstanceUsage: %v", err)
	}
	if len(u.Containers) != 1 || u.Containers[0].Name != "ship" {
		t.Fatalf("InstanceUsage = %+v, want the one container ship", u)
	}
	c := u.Containers[0]
	if c.NanoCPUs != 500_000_000 || c.MemoryLimitBytes != 64<<20 || c.PidsLimit != 100 {
		t.Errorf("limits = cpu %d mem %d pids %d, want the spec's 500000000 / %d / 100", c.NanoCPUs, c.MemoryLimitBytes, c.PidsLimit, 64<<20)
	}
	if s.h.Live {
		if c.Pids < 1 || c.MemoryBytes <= 0 || c.CPUSeconds <= 0 {
			t.Errorf("a running server reports pids %d, memory %d, cpu %.6f s; want all > 0", c.Pids, c.MemoryBytes, c.CPUSeconds)
		}
		// The test image may lack du (a one-binary image): then the volume is unmeasured (-1),
		// never a wrong number.
		if u.VolumeUsedBytes != -1 && u.VolumeUsedBytes < 300_000 {
			t.Errorf("VolumeUsedBytes = %d, want >= the 300000 bytes written (or -1)", u.VolumeUsedBytes)
		}
	}
}
