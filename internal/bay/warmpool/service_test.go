package warmpool_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/warmpool"
)

var (
	_ warmpool.Lifecycle  = (*sandbox.Service)(nil)
	_ sandbox.WarmClaimer = (*warmpool.Pool)(nil)
)

// Against the real lifecycle service: the pool fills, a create without cargo claims a warm
// sandbox with a fresh idle deadline and the caller's TTL, the pool refills, and the claimed
// sandbox's first call reuses the running container.
func TestWithLifecycleService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		prof := bay.Profile{ID: profile, IdleTimeout: 30 * time.Minute, WarmPoolSize: 2, WarmRotateTTL: time.Hour,
			Containers: []bay.ContainerProfile{{Name: "primary", Image: "ship:latest", RuntimeType: bay.RuntimeShip,
				RuntimePort: 8123, Capabilities: bay.DefaultCapabilities, PrimaryFor: bay.DefaultCapabilities}}}
		svc := sandbox.New(e.store, e.drv, nil, nil, nil, sandbox.Config{Profiles: []bay.Profile{prof}, InstanceID: instance})
		svc.SetHealthCheck(func(context.Context, string) error { return nil })
		p := warmpool.New(e.store, e.drv, svc, nil, nil, warmpool.Config{Enabled: true, InstanceID: instance,
			RunOnStartup: true, Profiles: []warmpool.ProfileConfig{{ProfileID: profile, Size: 2, RotateTTL: time.Hour, IdleTimeout: 30 * time.Minute}}})
		svc.SetWarmClaimer(p)
		e.start(p)
		synctest.Wait()
		if n := len(e.warm()[bay.WarmAvailable]); n != 2 || e.running() != 2 {
			t.Fatalf("%d available, %d running", n, e.running())
		}

		time.Sleep(20 * time.Minute)
		at := now()
		ttl := int64(600)
		resp, err := svc.CreateSandbox(e.ctx, "alice", sandbox.CreateParams{TTL: &ttl}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sb, _ := e.store.GetSandbox(e.ctx, resp.ID)
		if sb.IsWarm || sb.Owner != "alice" || !sb.IdleExpiresAt.Equal(at.Add(30*time.Minute)) || !sb.ExpiresAt.Equal(at.Add(10*time.Minute)) {
			t.Fatalf("claimed sandbox %+v", sb)
		}
		sess, err := svc.EnsureRunning(e.ctx, resp.ID)
		if err != nil || sess.ID != sb.CurrentSessionID {
			t.Fatalf("first call did not reuse the warm session: %v", err)
		}
		synctest.Wait()
		if n := len(e.warm()[bay.WarmAvailable]); n != 2 || e.running() != 3 {
			t.Fatalf("after refill: %d available, %d running", n, e.running())
		}
	})
}
