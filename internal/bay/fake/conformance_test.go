package fake_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/drivertest"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
)

// TestConformance runs the driver conformance suite against the fake, with an httptest server
// standing in for every container's ship.
func TestConformance(t *testing.T) {
	ship := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"status":"healthy"}`))
	}))
	t.Cleanup(ship.Close)

	const image = "shipyard-drivertest:fake"
	d := fake.New(
		fake.WithImages(image),
		fake.WithEndpointFunc(func(bay.ContainerSpec) string { return ship.URL }),
	)
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
				User:        c.Spec.User,
				CapDrop:     c.CapDrop,
				SecurityOpt: c.SecurityOpt,
				Privileged:  c.Privileged,
				PidsLimit:   c.PidsLimit,
				Memory:      c.Spec.MemoryBytes,
				MemorySwap:  c.MemorySwap,
				NanoCPUs:    c.Spec.NanoCPUs,
			}
		},
	})
}
