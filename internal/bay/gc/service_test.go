package gc_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/gc"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
)

// racingService is the real lifecycle service with a hook that plays a concurrent request
// between GC's decision and its action.
type racingService struct {
	*sandbox.Service
	before func(pin bay.Pin)
}

func (r *racingService) ReclaimCompute(ctx context.Context, pin bay.Pin) (bool, error) {
	if r.before != nil {
		r.before(pin)
	}
	return r.Service.ReclaimCompute(ctx, pin)
}

var _ gc.Lifecycle = (*sandbox.Service)(nil)

func newService(e *env) *sandbox.Service {
	prof := bay.Profile{ID: "python-default", IdleTimeout: 10 * time.Minute,
		Containers: []bay.ContainerProfile{{Name: "primary", Image: "ship:latest", RuntimeType: bay.RuntimeShip,
			RuntimePort: 8123, Capabilities: bay.DefaultCapabilities, PrimaryFor: bay.DefaultCapabilities}}}
	svc := sandbox.New(e.store, e.drv, nil, nil, nil, sandbox.Config{Profiles: []bay.Profile{prof}, InstanceID: instance})
	svc.SetHealthCheck(func(context.Context, string) error { return nil })
	return svc
}

// Against the real lifecycle service: a keepalive between GC's decision and its action saves
// the sandbox; once idle again it is reclaimed, and the next call rebuilds a session on the
// same cargo. An expired sandbox is deleted with its cargo and stays gone.
func TestWithLifecycleService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		svc := newService(e)
		rs := &racingService{Service: svc}
		s := gc.New(e.store, e.drv, rs, nil, nil, gc.Config{InstanceID: instance, BootID: svc.BootID(),
			Tasks: map[string]bool{gc.TaskIdleSession: true, gc.TaskExpiredSandbox: true, gc.TaskOrphanCargo: true, gc.TaskOrphanContainer: true}})

		resp, err := svc.CreateSandbox(e.ctx, "alice", sandbox.CreateParams{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		first, err := svc.EnsureRunning(e.ctx, resp.ID)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(11 * time.Minute)

		rs.before = func(pin bay.Pin) {
			if err := svc.Keepalive(e.ctx, "alice", pin.SandboxID); err != nil {
				t.Errorf("keepalive: %v", err)
			}
		}
		r := result(runOnce(t, s, gc.RunOptions{}), gc.TaskIdleSession)
		if r.CleanedCount != 0 || r.SkippedCount != 1 || !e.hasContainer(first.Primary().ContainerID) {
			t.Fatalf("keepalive during GC: %+v", r)
		}
		rs.before = nil

		time.Sleep(11 * time.Minute)
		r = result(runOnce(t, s, gc.RunOptions{}), gc.TaskIdleSession)
		if r.CleanedCount != 1 || e.hasContainer(first.Primary().ContainerID) {
			t.Fatalf("idle GC: %+v", r)
		}
		sb := e.sandbox(resp.ID)
		if sb.CurrentSessionID != "" || sb.IdleExpiresAt != nil || sb.DeletedAt != nil {
			t.Fatalf("after idle GC: %+v", sb)
		}
		again, err := svc.EnsureRunning(e.ctx, resp.ID)
		if err != nil || again.ID == first.ID || !e.hasVolume(bay.VolumeName(sb.CargoID)) {
			t.Fatalf("auto-resume: %v %+v", err, again)
		}

		ttl := int64(60)
		exp, err := svc.CreateSandbox(e.ctx, "alice", sandbox.CreateParams{TTL: &ttl}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.EnsureRunning(e.ctx, exp.ID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(61 * time.Second)
		r = result(runOnce(t, s, gc.RunOptions{Tasks: []string{gc.TaskExpiredSandbox}}), gc.TaskExpiredSandbox)
		if r.CleanedCount != 1 {
			t.Fatalf("expired GC: %+v", r)
		}
		if _, err := svc.GetSandbox(e.ctx, "alice", exp.ID); !bay.IsNotFound(err) {
			t.Fatalf("expired sandbox still visible: %v", err)
		}
		if e.hasCargo(exp.CargoID) || e.hasVolume(bay.VolumeName(exp.CargoID)) {
			t.Fatal("expired sandbox's cargo left")
		}
		if _, err := svc.EnsureRunning(e.ctx, exp.ID); !bay.IsNotFound(err) {
			t.Fatalf("expired sandbox revived: %v", err)
		}
		// Nothing the service created is an orphan.
		time.Sleep(10 * time.Minute)
		res := runOnce(t, s, gc.RunOptions{Tasks: []string{gc.TaskOrphanCargo, gc.TaskOrphanContainer}})
		if res.TotalCleaned != 0 || !e.hasContainer(again.Primary().ContainerID) {
			t.Fatalf("orphan GC removed live resources: %+v", res)
		}
	})
}
