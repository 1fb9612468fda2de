package fake_test

import (
	"cmp"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/drivertest"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
)

// TestConformance runs the driver conformance suite against the fake. Its endpoints serve
// nothing (Live false): the suite's checks of the runtimes' behaviour run against the real
// engine only, every check of the driver's own answers runs here too.
func TestConformance(t *testing.T) {
	const image = "shipyard-drivertest:fake"
	d := fake.New(fake.WithImages(image), fake.WithOneShot(testImageOneShot))
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

// testImageOneShot plays the drivertest image's oneshot mode ("/server oneshot OUT ERR CODE"):
// a one-shot without network has loopback only.
func testImageOneShot(ctx context.Context, c bay.ContainerSpec) (fake.OneShotResult, error) {
	if (len(c.Command) != 5 && len(c.Command) != 6) || c.Command[1] != "oneshot" {
		return fake.OneShotResult{Stderr: "usage: server oneshot OUT ERR CODE [SLEEP_MS]", Exit: bay.Exit{Code: 2}}, nil
	}
	code, _ := strconv.Atoi(c.Command[4])
	uid, _, _ := strings.Cut(cmp.Or(c.User, "1000:1000"), ":")
	res := fake.OneShotResult{
		Stdout: "uid=" + uid + " ifaces=lo\n" + c.Command[2], Stderr: c.Command[3], Exit: bay.Exit{Code: code},
	}
	if len(c.Command) == 6 {
		ms, _ := strconv.Atoi(c.Command[5])
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-ctx.Done():
			return res, ctx.Err() // killed: what it printed so far is kept
		}
	}
	return res, nil
}
