package warmpool_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/warmpool"
)

// The pool fills to its size with started, available warm sandboxes owned by warm-pool.
func TestFillsPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		p := e.pool(nil)
		e.start(p)
		synctest.Wait()
		w := e.warm()
		if len(w[bay.WarmAvailable]) != 2 || len(w) != 1 {
			t.Fatalf("warm sandboxes %v, want 2 available", w)
		}
		for _, sb := range w[bay.WarmAvailable] {
			if sb.Owner != bay.OwnerWarmPool || sb.ExpiresAt != nil || sb.WarmInstanceID != instance ||
				sb.WarmReadyAt == nil || sb.WarmRotateAt == nil || sb.WarmRotateAt.Sub(*sb.WarmReadyAt) != time.Hour {
				t.Errorf("warm sandbox %+v", sb)
			}
		}
		if e.running() != 2 {
			t.Fatalf("%d running containers, want 2", e.running())
		}
		// A second pass changes nothing.
		p.Maintain(e.ctx)
		synctest.Wait()
		if e.lc.count() != 2 || e.running() != 2 {
			t.Fatalf("second pass: created %d, running %d", e.lc.count(), e.running())
		}
		if !p.WarmPoolEnabled(profile) || p.WarmPoolEnabled("python-data") {
			t.Fatal("WarmPoolEnabled")
		}
	})
}

// A claim gets a fresh idle deadline (not the warm-up's) and the caller's TTL; the pool refills.
func TestClaimFreshIdleDeadlineAndRefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		p := e.pool(nil)
		e.start(p)
		synctest.Wait()

		time.Sleep(25 * time.Minute) // long after the warm-up, close to the warm-up's idle deadline
		ttl := 10 * time.Minute
		at := now()
		sb, ok, err := e.claim(p, profile, "alice", &ttl)
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if sb.IsWarm || sb.Owner != "alice" || sb.IdleExpiresAt == nil || !sb.IdleExpiresAt.Equal(at.Add(30*time.Minute)) ||
			sb.ExpiresAt == nil || !sb.ExpiresAt.Equal(at.Add(ttl)) {
			t.Fatalf("claimed %+v", sb)
		}
		if c, _ := e.store.GetCargo(e.ctx, sb.CargoID); c == nil || c.Owner != "alice" {
			t.Fatalf("cargo not handed over: %+v", c)
		}
		synctest.Wait() // the claim triggered a refill
		if n := len(e.warm()[bay.WarmAvailable]); n != 2 {
			t.Fatalf("after refill: %d available, want 2", n)
		}
		if _, ok, _ := e.claim(p, "python-data", "alice", nil); ok {
			t.Fatal("claimed from a profile without a pool")
		}
	})
}

// Concurrent claims never get the same warm sandbox.
func TestConcurrentClaimsAreExclusive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		p := e.pool(func(c *warmpool.Config) { c.Profiles[0].Size = 3 })
		stop := e.start(p)
		synctest.Wait()
		stop() // no refill during the race

		var mu sync.Mutex
		got := map[string]int{}
		misses := 0
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				sb, ok, err := e.claim(p, profile, "bob", nil)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("claim: %v", err)
				case ok:
					got[sb.ID]++
				default:
					misses++
				}
			})
		}
		wg.Wait()
		if len(got) != 3 || misses != 5 {
			t.Fatalf("claims %v misses %d, want 3 distinct and 5 misses", got, misses)
		}
		for id, n := range got {
			if n != 1 {
				t.Errorf("%s claimed %d times", id, n)
			}
		}
	})
}

// Available warm sandboxes older than the rotate TTL are replaced.
func TestRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		p := e.pool(func(c *warmpool.Config) { c.Profiles[0].RotateTTL = 10 * time.Minute })
		e.start(p)
		synctest.Wait()
		first := e.warm()[bay.WarmAvailable]

		time.Sleep(9 * time.Minute) // nine passes, none rotates
		synctest.Wait()
		if e.lc.count() != 2 {
			t.Fatalf("rotated early: created %d", e.lc.count())
		}
		time.Sleep(time.Minute) // the tenth pass rotates both
		synctest.Wait()
		for _, sb := range first {
			got, _ := e.store.GetSandbox(e.ctx, sb.ID)
			if got.DeletedAt == nil {
				t.Errorf("%s not rotated out", sb.ID)
			}
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(e.warm()[bay.WarmAvailable]); n != 2 || e.lc.count() != 4 || e.running() != 2 {
			t.Fatalf("after rotation: available %d, created %d, running %d", n, e.lc.count(), e.running())
		}
	})
}

// Failed warm-ups are retried with exponential backoff; after MaxAttempts the sandbox is
// deleted and replaced, so it never holds a slot.
func TestBackoffThenReplace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		var broken string
		var mu sync.Mutex
		e.lc.fail = func(id string) error {
			mu.Lock()
			defer mu.Unlock()
			if broken == "" {
				broken = id
			}
			if id == broken {
				return errors.New("image is broken")
			}
			return nil
		}
		p := e.pool(func(c *warmpool.Config) {
			c.Profiles[0].Size = 1
			c.Profiles[0].MaxAttempts = 4
			c.Profiles[0].BackoffBase = time.Second
			c.Profiles[0].BackoffMax = 3 * time.Second
		})
		e.start(p)
		synctest.Wait()
		t0 := e.lc.calls(broken)[0]
		time.Sleep(10 * time.Second)
		synctest.Wait()
		calls := e.lc.calls(broken)
		var gaps []time.Duration
		for i := 1; i < len(calls); i++ {
			gaps = append(gaps, calls[i].Sub(calls[i-1]))
		}
		want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} // capped at max
		if len(gaps) != len(want) {
			t.Fatalf("attempts at %v (gaps %v), want gaps %v", calls, gaps, want)
		}
		for i := range want {
			if gaps[i] != want[i] {
				t.Fatalf("gaps %v, want %v", gaps, want)
			}
		}
		sb, _ := e.store.GetSandbox(e.ctx, broken)
		if sb.DeletedAt == nil || sb.WarmAttempts != 4 {
			t.Fatalf("broken warm sandbox after %v: %+v", calls[len(calls)-1].Sub(t0), sb)
		}
		time.Sleep(time.Minute) // the next pass replaces it
		synctest.Wait()
		if w := e.warm(); len(w[bay.WarmAvailable]) != 1 || len(w) != 1 {
			t.Fatalf("after replacement: %v", w)
		}
	})
}

func TestBackoffSchedule(t *testing.T) {
	pc := warmpool.ProfileConfig{BackoffBase: 200 * time.Millisecond, BackoffMax: 5 * time.Second}
	want := []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	for n, w := range want {
		if got := pc.Backoff(n); got != w {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, w)
		}
	}
	if got := pc.Backoff(1000); got != 5*time.Second {
		t.Errorf("Backoff(1000) = %v", got)
	}
}

// A warm sandbox whose container died goes back to warming and is started again.
func TestReconcileDeadContainer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		p := e.pool(nil)
		e.start(p)
		synctest.Wait()
		victim := e.warm()[bay.WarmAvailable][0]
		sess, _ := e.store.GetSession(e.ctx, victim.CurrentSessionID)
		e.drv.Vanish(sess.Primary().ContainerID)

		time.Sleep(time.Minute)
		synctest.Wait()
		got, _ := e.store.GetSandbox(e.ctx, victim.ID)
		if got.DeletedAt != nil || got.WarmState != bay.WarmAvailable || got.CurrentSessionID == victim.CurrentSessionID {
			t.Fatalf("victim after reconcile: %+v", got)
		}
		if e.lc.count() != 2 || e.running() != 2 {
			t.Fatalf("created %d, running %d: the dead one is re-warmed, not replaced", e.lc.count(), e.running())
		}
	})
}

// Restart: a new pool on the same database reuses the warm sandboxes, re-warms the dead one,
// creates nothing and starts no duplicate container. Shutdown deleted nothing.
func TestRestartReusesWarmSandboxes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		stop := e.start(e.pool(nil))
		synctest.Wait()
		stop()
		w := e.warm()[bay.WarmAvailable]
		if len(w) != 2 {
			t.Fatalf("shutdown deleted warm sandboxes: %d left", len(w))
		}
		sess, _ := e.store.GetSession(e.ctx, w[0].CurrentSessionID)
		e.drv.Kill(sess.Primary().ContainerID) // died while bay was down

		e.start(e.pool(nil))
		synctest.Wait()
		if n := len(e.warm()[bay.WarmAvailable]); n != 2 || e.lc.count() != 2 {
			t.Fatalf("after restart: %d available, %d created in total", n, e.lc.count())
		}
		if e.running() != 2 {
			t.Fatalf("%d running containers, want 2", e.running())
		}
	})
}

// Cleanup on shutdown removes only this instance's warm sandboxes.
func TestCleanupOnShutdownOnlyOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		other, err := e.lc.CreateWarmSandbox(e.ctx, profile, "bay-b")
		if err != nil {
			t.Fatal(err)
		}
		stop := e.start(e.pool(func(c *warmpool.Config) { c.CleanupOnShutdown = true }))
		synctest.Wait()
		stop()
		w := e.warm()
		if len(w[bay.WarmAvailable]) != 0 || len(w[bay.WarmPending]) != 1 || w[bay.WarmPending][0].ID != other.ID {
			t.Fatalf("after shutdown cleanup: %v", w)
		}
	})
}

// Another bay holding the profile's lease fills the pool; this one does not.
func TestLeaseHeldElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		err := e.store.Tx(e.ctx, func(tx bay.Tx) error {
			_, err := tx.AcquireLease(e.ctx, "warm:"+profile, "bay-b", now(), 5*time.Minute)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		e.start(e.pool(nil))
		synctest.Wait()
		if e.lc.count() != 0 {
			t.Fatalf("created %d under another bay's lease", e.lc.count())
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if e.lc.count() != 2 {
			t.Fatalf("created %d after the lease expired, want 2", e.lc.count())
		}
	})
}

// A warming sandbox left by a dead bay is adopted after AdoptAfter and warmed; a recent one
// is left to its owner.
func TestAdoptsWarmingSandboxOfDeadBay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		orphan, err := e.lc.CreateWarmSandbox(e.ctx, profile, "bay-dead")
		if err != nil {
			t.Fatal(err)
		}
		e.start(e.pool(func(c *warmpool.Config) {
			c.Profiles[0].Size = 1
			c.AdoptAfter = 5 * time.Minute
		}))
		synctest.Wait()
		if got, _ := e.store.GetSandbox(e.ctx, orphan.ID); got.WarmState != bay.WarmPending || e.lc.count() != 1 {
			t.Fatalf("adopted too early: %+v, created %d", got, e.lc.count())
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		got, _ := e.store.GetSandbox(e.ctx, orphan.ID)
		if got.WarmState != bay.WarmAvailable || got.WarmInstanceID != instance || e.lc.count() != 1 {
			t.Fatalf("not adopted: %+v, created %d", got, e.lc.count())
		}
	})
}

// Enqueue drops duplicates and, when full, the newest or the oldest; a sandbox claimed before
// its warm-up ran is left alone.
func TestEnqueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		p := e.pool(func(c *warmpool.Config) { c.QueueSize = 2; c.Enabled = false })
		if !p.Enqueue("sandbox-a") || p.Enqueue("sandbox-a") || !p.Enqueue("sandbox-b") || p.Enqueue("sandbox-c") {
			t.Fatal("drop_newest: dedup or bound broken")
		}
		po := e.pool(func(c *warmpool.Config) { c.QueueSize = 2; c.DropPolicy = warmpool.DropOldest })
		if !po.Enqueue("a") || !po.Enqueue("b") || !po.Enqueue("c") || po.QueueLen() != 2 || !po.Enqueue("a") {
			t.Fatal("drop_oldest: the oldest must make room")
		}

		claimed, err := e.lc.CreateWarmSandbox(e.ctx, profile, instance)
		if err != nil {
			t.Fatal(err)
		}
		err = e.store.Tx(e.ctx, func(tx bay.Tx) error {
			sb, _ := tx.GetSandbox(e.ctx, claimed.ID)
			sb.IsWarm, sb.Owner = false, "alice"
			return tx.UpdateSandbox(e.ctx, sb)
		})
		if err != nil {
			t.Fatal(err)
		}
		p2 := e.pool(func(c *warmpool.Config) { c.Enabled = false })
		e.start(p2)
		p2.Enqueue(claimed.ID)
		synctest.Wait()
		if got, _ := e.store.GetSandbox(e.ctx, claimed.ID); got.CurrentSessionID != "" || len(e.lc.calls(claimed.ID)) != 0 {
			t.Fatalf("a claimed sandbox was started by the pool: %+v", got)
		}
	})
}

// Prime runs on every warm-up before the sandbox becomes available; its failure is a failed
// warm-up.
func TestPrime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		var mu sync.Mutex
		primed := map[string]int{}
		p := e.pool(func(c *warmpool.Config) {
			c.Profiles[0].Size = 1
			c.Prime = func(_ context.Context, sess *bay.Session) error {
				mu.Lock()
				defer mu.Unlock()
				primed[sess.SandboxID]++
				if primed[sess.SandboxID] == 1 {
					return errors.New("kernel not up yet")
				}
				return nil
			}
		})
		e.start(p)
		synctest.Wait()
		if len(e.warm()[bay.WarmAvailable]) != 0 {
			t.Fatal("available although priming failed")
		}
		time.Sleep(time.Second) // the first backoff
		synctest.Wait()
		w := e.warm()[bay.WarmAvailable]
		if len(w) != 1 || primed[w[0].ID] != 2 || w[0].WarmAttempts != 0 {
			t.Fatalf("after retry: %v primed %v", w, primed)
		}
	})
}

// TestStatus counts the pool's sandboxes by state for GET /v1/admin/warmpool.
func TestStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		p := e.pool(nil)
		if st, err := p.Status(e.ctx); err != nil || len(st) != 1 || st[0] != (warmpool.ProfileStatus{ProfileID: profile, Target: 2}) {
			t.Fatalf("empty pool: %+v %v", st, err)
		}
		e.start(p)
		synctest.Wait()
		st, err := p.Status(e.ctx)
		if err != nil || len(st) != 1 || st[0] != (warmpool.ProfileStatus{ProfileID: profile, Target: 2, Ready: 2}) {
			t.Fatalf("filled pool: %+v %v", st, err)
		}
		off := e.pool(func(c *warmpool.Config) { c.Enabled = false })
		if st, err := off.Status(e.ctx); err != nil || len(st) != 0 {
			t.Fatalf("disabled pool: %+v %v", st, err)
		}
	})
}
