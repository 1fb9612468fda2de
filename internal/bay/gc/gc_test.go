package gc_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/gc"
)

func newScheduler(e *env, mut func(*gc.Config)) *gc.Scheduler {
	cfg := gc.DefaultConfig()
	cfg.InstanceID = instance
	cfg.Tasks[gc.TaskOrphanContainer] = true
	cfg.OrphanGrace = 5 * time.Minute
	if mut != nil {
		mut(&cfg)
	}
	return gc.New(e.store, e.drv, e.lc, nil, nil, cfg)
}

func runOnce(t *testing.T, s *gc.Scheduler, opts gc.RunOptions) gc.RunResult {
	t.Helper()
	res, err := s.RunOnce(t.Context(), opts)
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	if res.TotalErrors != 0 {
		t.Fatalf("RunOnce errors: %+v", res.Results)
	}
	return res
}

func result(res gc.RunResult, task string) gc.TaskResult {
	for _, r := range res.Results {
		if r.TaskName == task {
			return r
		}
	}
	return gc.TaskResult{TaskName: "<missing " + task + ">"}
}

// The idle deadline passes: idle GC destroys the compute (container and session row) and keeps
// the sandbox, its TTL and its files.
func TestIdleDeadlinePassesComputeReclaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		s := newScheduler(e, nil)
		sd := e.seed(sandboxOpts{idleIn: ptr(10 * time.Minute), ttl: ptr(time.Hour), session: true})

		res := runOnce(t, s, gc.RunOptions{})
		if got := result(res, gc.TaskIdleSession).CleanedCount; got != 0 {
			t.Fatalf("before the deadline: cleaned %d, want 0", got)
		}
		if !e.hasContainer(sd.cid) {
			t.Fatal("container removed before the idle deadline")
		}

		time.Sleep(10*time.Minute + time.Second)
		res = runOnce(t, s, gc.RunOptions{})
		if got := result(res, gc.TaskIdleSession).CleanedCount; got != 1 {
			t.Fatalf("after the deadline: cleaned %d, want 1 (%+v)", got, res)
		}
		sb := e.sandbox(sd.sb.ID)
		if sb.DeletedAt != nil || sb.CurrentSessionID != "" || sb.IdleExpiresAt != nil || sb.ExpiresAt == nil {
			t.Fatalf("sandbox after idle GC: %+v", sb)
		}
		if e.hasContainer(sd.cid) {
			t.Fatal("container still there")
		}
		if _, err := e.store.GetSession(e.ctx, sd.sess.ID); !bay.IsNotFound(err) {
			t.Fatalf("session row: %v, want not found", err)
		}
		if !e.hasCargo(sd.cargo.ID) || !e.hasVolume(sd.cargo.DriverRef) {
			t.Fatal("idle GC must keep the cargo")
		}
		if p := e.lc.pins(); len(p) != 1 || p[0].Reason != bay.ReasonIdle || p[0].SessionID != sd.sess.ID || p[0].Version != sd.sb.Version {
			t.Fatalf("pins: %+v", p)
		}
	})
}

// The TTL passes: expired GC deletes the sandbox with its managed cargo; it is never revived.
func TestTTLPassesSandboxDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		s := newScheduler(e, nil)
		sd := e.seed(sandboxOpts{ttl: ptr(2 * time.Minute), idleIn: ptr(time.Hour), session: true})
		keep := e.seed(sandboxOpts{ttl: ptr(time.Hour), session: true})
		warm := e.seed(sandboxOpts{ttl: ptr(time.Second), idleIn: ptr(time.Second), warm: true})

		time.Sleep(2*time.Minute + time.Second)
		res := runOnce(t, s, gc.RunOptions{})
		if got := result(res, gc.TaskExpiredSandbox).CleanedCount; got != 1 {
			t.Fatalf("expired cleaned %d, want 1 (%+v)", got, res)
		}
		if sb := e.sandbox(sd.sb.ID); sb.DeletedAt == nil {
			t.Fatal("expired sandbox not deleted")
		}
		if e.hasContainer(sd.cid) || e.hasVolume(sd.cargo.DriverRef) || e.hasCargo(sd.cargo.ID) {
			t.Fatal("expired sandbox left its container, volume or cargo row")
		}
		if sb := e.sandbox(keep.sb.ID); sb.DeletedAt != nil || !e.hasContainer(keep.cid) {
			t.Fatal("unexpired sandbox touched")
		}
		if sb := e.sandbox(warm.sb.ID); sb.DeletedAt != nil {
			t.Fatal("warm sandbox collected by expiry GC")
		}
		if p := e.lc.pins(); len(p) != 1 || p[0].SandboxID != sd.sb.ID {
			t.Fatalf("lifecycle calls %+v: only the expired non-warm sandbox", p)
		}
	})
}

// A sandbox revived between GC's decision and its action (keepalive, or a new session) is
// not destroyed: the action is pinned to what it was decided on.
func TestIdleRaceRevivedSandboxIsNotDestroyed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		revive func(e *env, sb *bay.Sandbox)
	}{
		{"keepalive", func(e *env, sb *bay.Sandbox) {
			sb.IdleExpiresAt = ptr(now().Add(30 * time.Minute))
			sb.LastActiveAt = now()
		}},
		{"new session", func(e *env, sb *bay.Sandbox) {
			// The old session was stopped meanwhile and a call started a new one.
			sb.CurrentSessionID = bay.NewID(bay.PrefixSession)
			sb.IdleExpiresAt = ptr(now().Add(30 * time.Minute))
		}},
		{"same deadline, other session", func(e *env, sb *bay.Sandbox) {
			sb.CurrentSessionID = ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				s := newScheduler(e, nil)
				sd := e.seed(sandboxOpts{idleIn: ptr(time.Minute), session: true})
				time.Sleep(2 * time.Minute)
				e.lc.before = func(pin bay.Pin) {
					err := e.store.Tx(e.ctx, func(tx bay.Tx) error {
						sb, err := tx.GetSandbox(e.ctx, pin.SandboxID)
						if err != nil {
							return err
						}
						tc.revive(e, sb)
						return tx.UpdateSandbox(e.ctx, sb)
					})
					if err != nil {
						t.Errorf("revive: %v", err)
					}
				}
				res := runOnce(t, s, gc.RunOptions{Tasks: []string{gc.TaskIdleSession}})
				r := result(res, gc.TaskIdleSession)
				if r.CleanedCount != 0 || r.SkippedCount != 1 {
					t.Fatalf("result %+v, want 0 cleaned 1 skipped", r)
				}
				if !e.hasContainer(sd.cid) {
					t.Fatal("revived sandbox's container destroyed")
				}
				if _, err := e.store.GetSession(e.ctx, sd.sess.ID); err != nil {
					t.Fatalf("revived sandbox's session row: %v", err)
				}
			})
		})
	}
}

// The tasks list selects what runs, not just what is reported.
func TestTasksSelectWhatRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		s := newScheduler(e, nil)
		idle := e.seed(sandboxOpts{idleIn: ptr(time.Minute), session: true})
		exp := e.seed(sandboxOpts{ttl: ptr(time.Minute)})
		time.Sleep(2 * time.Minute)

		res := runOnce(t, s, gc.RunOptions{Tasks: []string{gc.TaskExpiredSandbox}})
		if len(res.Results) != 1 || res.Results[0].TaskName != gc.TaskExpiredSandbox || res.TotalCleaned != 1 {
			t.Fatalf("result %+v", res)
		}
		if !e.hasContainer(idle.cid) {
			t.Fatal("idle_session ran although only expired_sandbox was asked for")
		}
		if e.sandbox(exp.sb.ID).DeletedAt == nil {
			t.Fatal("expired_sandbox did not run")
		}

		// A disabled task runs when asked for by name; a null list runs the enabled ones.
		s2 := newScheduler(e, func(c *gc.Config) { c.Tasks[gc.TaskIdleSession] = false })
		res = runOnce(t, s2, gc.RunOptions{})
		if slices.ContainsFunc(res.Results, func(r gc.TaskResult) bool { return r.TaskName == gc.TaskIdleSession }) {
			t.Fatalf("disabled task ran in a default cycle: %+v", res)
		}
		res = runOnce(t, s2, gc.RunOptions{Tasks: []string{gc.TaskIdleSession}})
		if result(res, gc.TaskIdleSession).CleanedCount != 1 || e.hasContainer(idle.cid) {
			t.Fatalf("explicit idle_session run: %+v", res)
		}

		_, err := s.RunOnce(t.Context(), gc.RunOptions{Tasks: []string{"idle_sessions"}})
		if bay.ErrorCode(err) != bay.CodeValidation {
			t.Fatalf("unknown task: %v, want validation_error", err)
		}
	})
}

// A cycle in flight makes RunOnce fail with gc_running (423), and Status says so.
func TestRunOnceWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		s := newScheduler(e, nil)
		e.seed(sandboxOpts{idleIn: ptr(time.Minute), session: true})
		time.Sleep(2 * time.Minute)
		block := make(chan struct{})
		e.lc.block = block

		done := make(chan gc.RunResult)
		go func() {
			res, _ := s.RunOnce(context.Background(), gc.RunOptions{})
			done <- res
		}()
		synctest.Wait() // the cycle is now blocked inside the lifecycle call
		if !s.Status().IsRunning {
			t.Fatal("status: not running during a cycle")
		}
		_, err := s.RunOnce(t.Context(), gc.RunOptions{})
		if !errors.Is(err, gc.ErrRunning) || bayapi.StatusOf(bay.ErrorCode(err)) != 423 {
			t.Fatalf("second RunOnce: %v, want gc_running/423", err)
		}
		close(block)
		res := <-done
		if res.TotalCleaned != 1 {
			t.Fatalf("first cycle: %+v", res)
		}
		st := s.Status()
		if st.IsRunning || st.LastRunAt == nil || st.InstanceID != instance || !st.Tasks[gc.TaskOrphanContainer].Enabled {
			t.Fatalf("status after: %+v", st)
		}
	})
}

// A task whose lease another bay holds is skipped and reported; the others run.
func TestLeaseHeldElsewhereSkipsTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		s := newScheduler(e, nil)
		sd := e.seed(sandboxOpts{idleIn: ptr(time.Minute), session: true})
		exp := e.seed(sandboxOpts{ttl: ptr(time.Minute)})
		time.Sleep(2 * time.Minute)
		err := e.store.Tx(e.ctx, func(tx bay.Tx) error {
			ok, err := tx.AcquireLease(e.ctx, "gc:"+gc.TaskIdleSession, "other-bay", now(), time.Minute)
			if err == nil && !ok {
				err = errors.New("lease not acquired")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		res := runOnce(t, s, gc.RunOptions{})
		if r := result(res, gc.TaskIdleSession); r.Note != gc.NoteLeaseHeld || r.CleanedCount != 0 {
			t.Fatalf("idle task %+v, want skipped for the lease", r)
		}
		if !e.hasContainer(sd.cid) {
			t.Fatal("idle task ran despite the lease")
		}
		if e.sandbox(exp.sb.ID).DeletedAt == nil {
			t.Fatal("expired task did not run")
		}
		// Our own leases are released after each task.
		err = e.store.Tx(e.ctx, func(tx bay.Tx) error {
			ok, err := tx.AcquireLease(e.ctx, "gc:"+gc.TaskExpiredSandbox, "other-bay", now(), time.Minute)
			if err == nil && !ok {
				err = errors.New("gc:expired_sandbox still held after the cycle")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		// Once the other bay's lease expires, the task runs again.
		time.Sleep(time.Minute)
		res = runOnce(t, s, gc.RunOptions{Tasks: []string{gc.TaskIdleSession}})
		if r := result(res, gc.TaskIdleSession); r.Note != "" || r.CleanedCount != 1 {
			t.Fatalf("after lease expiry %+v", r)
		}
	})
}

// Strict orphan container GC: only instances whose name and labels prove they are this bay's,
// older than the grace period, whose session the database does not know.
func TestOrphanContainersStrict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		live := e.seed(sandboxOpts{session: true})
		vol := live.cargo.DriverRef

		orphan := e.container(bay.NewID(bay.PrefixSession), "sandbox-x", "ws-x", instance, vol)
		otherInstance := e.container(bay.NewID(bay.PrefixSession), "sandbox-x", "ws-x", "bay-other", vol)
		mk := func(name string, labels map[string]string) string { return e.instance(name, "", labels) }
		full := func() map[string]string {
			return map[string]string{bay.LabelSessionID: bay.NewID(bay.PrefixSession), bay.LabelSandboxID: "sandbox-y",
				bay.LabelCargoID: "ws-y", bay.LabelInstanceID: instance, bay.LabelManaged: "true"}
		}
		noPrefix := mk("user-container", full())
		missing := full()
		delete(missing, bay.LabelCargoID)
		missingLabel := mk("bay-session-missing", missing)

		time.Sleep(4 * time.Minute)
		young := e.container(bay.NewID(bay.PrefixSession), "sandbox-x", "ws-x", instance, vol)
		time.Sleep(2 * time.Minute)

		// Dry run reports and removes nothing.
		s := newScheduler(e, nil)
		res := runOnce(t, s, gc.RunOptions{Tasks: []string{gc.TaskOrphanContainer}, DryRun: true})
		r := result(res, gc.TaskOrphanContainer)
		if r.CleanedCount != 0 || len(r.WouldClean) != 1 || !strings.HasPrefix(r.WouldClean[0], "instance/bay-session-") {
			t.Fatalf("dry run %+v", r)
		}
		if !e.hasContainer(orphan) {
			t.Fatal("dry run removed a container")
		}
		// So does the configured dry-run mode.
		sDry := newScheduler(e, func(c *gc.Config) { c.OrphanContainerDryRun = true })
		if r := result(runOnce(t, sDry, gc.RunOptions{}), gc.TaskOrphanContainer); r.CleanedCount != 0 || len(r.WouldClean) != 1 {
			t.Fatalf("configured dry run %+v", r)
		}

		res = runOnce(t, s, gc.RunOptions{Tasks: []string{gc.TaskOrphanContainer}})
		if r := result(res, gc.TaskOrphanContainer); r.CleanedCount != 1 {
			t.Fatalf("orphan container run %+v", r)
		}
		if e.hasContainer(orphan) {
			t.Fatal("trusted orphan not removed")
		}
		for name, id := range map[string]string{"live session": live.cid, "other instance": otherInstance,
			"no bay- prefix": noPrefix, "missing label": missingLabel, "younger than grace": young} {
			if !e.hasContainer(id) {
				t.Errorf("%s: container removed", name)
			}
		}
	})
}

// Sessions left "starting" by a dead bay: this instance's previous boot ones are destroyed
// at startup; other instances' ones once older than the readiness bound.
func TestStaleStartingSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		setStarting := func(sd seeded, instanceID string) {
			err := e.store.Tx(e.ctx, func(tx bay.Tx) error {
				sess, err := tx.GetSession(e.ctx, sd.sess.ID)
				if err != nil {
					return err
				}
				sess.ObservedState = bay.SessionStarting
				sess.Containers = nil
				sess.InstanceID = instanceID
				return tx.UpdateSession(e.ctx, sess)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		mineDead := e.seed(sandboxOpts{session: true})
		setStarting(mineDead, instance+"/oldboot")
		mineLive := e.seed(sandboxOpts{session: true})
		setStarting(mineLive, instance+"/newboot")
		other := e.seed(sandboxOpts{session: true})
		setStarting(other, "bay-other/boot")

		s := newScheduler(e, func(c *gc.Config) {
			c.BootID = instance + "/newboot"
			c.StaleStartAfter = 90 * time.Second
			c.Enabled = false
		})
		n, err := s.RecoverStaleStarts(t.Context())
		if err != nil || n != 1 {
			t.Fatalf("RecoverStaleStarts = %d, %v; want 1", n, err)
		}
		if e.hasContainer(mineDead.cid) || e.sandbox(mineDead.sb.ID).CurrentSessionID != "" {
			t.Fatal("dead boot's starting session not destroyed")
		}
		if !e.hasContainer(mineLive.cid) || !e.hasContainer(other.cid) {
			t.Fatal("live sessions destroyed at startup")
		}
		if p := e.lc.pins(); len(p) != 1 || p[0].Reason != bay.ReasonStaleStart || p[0].SessionID != mineDead.sess.ID {
			t.Fatalf("pins %+v", p)
		}

		time.Sleep(2 * time.Minute) // past the readiness bound: every starting session is stale
		res := runOnce(t, s, gc.RunOptions{Tasks: []string{gc.TaskIdleSession}})
		if r := result(res, gc.TaskIdleSession); r.CleanedCount != 2 {
			t.Fatalf("stale sweep %+v, want 2", r)
		}
		if e.hasContainer(mineLive.cid) || e.hasContainer(other.cid) {
			t.Fatal("stale sessions left")
		}
	})
}

func TestHTTPHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		s := newScheduler(e, nil)
		e.seed(sandboxOpts{ttl: ptr(-time.Second)})

		do := func(method, body string) *httptest.ResponseRecorder {
			req := httptest.NewRequest(method, "/", strings.NewReader(body))
			req.Header.Set(bayapi.HeaderRequestID, "req-1")
			w := httptest.NewRecorder()
			if method == http.MethodGet {
				s.HandleStatus(w, req)
			} else {
				s.HandleRun(w, req)
			}
			return w
		}
		w := do(http.MethodPost, `{"tasks":["expired_sandbox"]}`)
		var run bayapi.GCRunResponse
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &run) != nil || len(run.Results) != 1 || run.TotalCleaned != 1 {
			t.Fatalf("run: %d %s", w.Code, w.Body)
		}
		if w := do(http.MethodPost, ""); w.Code != 200 {
			t.Fatalf("empty body: %d %s", w.Code, w.Body)
		}
		for body, status := range map[string]int{`{"tasks":["nope"]}`: 400, `{"tasks":"x"}`: 422, `{`: 422} {
			w := do(http.MethodPost, body)
			var env bayapi.ErrorEnvelope
			if w.Code != status || json.Unmarshal(w.Body.Bytes(), &env) != nil || env.Error.Code != bay.CodeValidation || env.Error.RequestID != "req-1" {
				t.Errorf("%s: %d %s", body, w.Code, w.Body)
			}
		}
		w = do(http.MethodGet, "")
		var st bayapi.GCStatusResponse
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &st) != nil || st.InstanceID != instance || len(st.Tasks) != 4 || st.IntervalSeconds != 300 {
			t.Fatalf("status: %d %s", w.Code, w.Body)
		}
	})
}

// snapshotDriver is the fake driver with copies of read-only mounts to collect (as the
// Kubernetes driver's skill ConfigMaps), behind a decorator as bay wires it.
type snapshotDriver struct {
	bay.Driver
	deployment string
	usedBefore time.Time
	dryRun     bool
	calls      int
}

func (d *snapshotDriver) CollectSnapshots(_ context.Context, deployment string, usedBefore time.Time, dryRun bool) ([]string, error) {
	d.deployment, d.usedBefore, d.dryRun = deployment, usedBefore, dryRun
	d.calls++
	return []string{"bay-files-0123-0"}, errors.New("delete configmap bay-files-4567-0: refused")
}

type decorated struct{ bay.Driver }

func (d decorated) Unwrap() bay.Driver { return d.Driver }

// TestOrphanCargoCollectsSnapshots: orphan_cargo asks a driver that keeps snapshot copies to
// remove those of the deployment unused for the grace period, and reports what it removed and
// what failed.
func TestOrphanCargoCollectsSnapshots(t *testing.T) {
	e := newEnv(t)
	sd := &snapshotDriver{Driver: e.drv}
	s := gc.New(e.store, decorated{sd}, e.lc, nil, nil, gc.Config{InstanceID: instance, Deployment: "dep-1", OrphanGrace: 7 * time.Minute,
		Tasks: map[string]bool{gc.TaskOrphanCargo: true}})
	before := time.Now()
	res, err := s.RunOnce(t.Context(), gc.RunOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	r := result(res, gc.TaskOrphanCargo)
	if sd.calls != 1 || !sd.dryRun || sd.deployment != "dep-1" || !slices.Equal(r.WouldClean, []string{"snapshot/bay-files-0123-0"}) {
		t.Fatalf("dry run: %d calls (dry %v, deployment %q), result %+v", sd.calls, sd.dryRun, sd.deployment, r)
	}
	if cut := before.Add(-7 * time.Minute); sd.usedBefore.Before(cut.Add(-time.Minute)) || sd.usedBefore.After(cut.Add(time.Minute)) {
		t.Errorf("used before %v, want the grace period before now (%v)", sd.usedBefore, cut)
	}
	res, err = s.RunOnce(t.Context(), gc.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r = result(res, gc.TaskOrphanCargo)
	if sd.dryRun || r.CleanedCount != 1 || len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "bay-files-4567-0") {
		t.Errorf("collect: %+v", r)
	}
}
