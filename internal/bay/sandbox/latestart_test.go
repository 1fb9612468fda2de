package sandbox_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/runtime"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
)

// withEarlySidecar adds a profile whose gull container (started first by the driver) serves
// shell, so that the shell stub stands in for a call to the early container, while python goes
// to ship, the primary, which the driver starts late.
func withEarlySidecar(c *sandbox.Config) {
	c.Profiles = append(c.Profiles, shipAndGull("early-sidecar", []string{"python", "filesystem"}, []string{"shell"}))
}

// holdLate makes the fake driver's late starts of ship wait for release (or their ctx), then
// return what fail holds. entered is closed once the first late start waits.
type holdLate struct {
	release chan struct{}
	entered chan struct{}
	once    sync.Once
	fail    atomic.Pointer[error]
}

func newHoldLate(e *env) *holdLate {
	h := &holdLate{release: make(chan struct{}), entered: make(chan struct{})}
	e.Drv.SetLateStart(func(ctx context.Context, _ string, c bay.ContainerSpec) error {
		if c.Name != "ship" {
			return errors.New("only ship starts late in this profile")
		}
		h.once.Do(func() { close(h.entered) })
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := h.fail.Load(); err != nil {
			return *err
		}
		return nil
	})
	return h
}

// startPython starts a python call (routed to ship) that starts the sandbox's session, and
// returns once the session's late start holds (the call then waits in that start).
func startPython(t *testing.T, e *env, h *holdLate, id string, check func(error) error) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := e.Caps.ExecPython(context.Background(), "alice", id, capability.PythonParams{Code: "1", Timeout: 30})
		done <- check(err)
	}()
	select {
	case <-h.entered:
	case err := <-done:
		t.Fatalf("python call returned before the late start: %v", err)
	}
	return done
}

func same(err error) error { return err }

// earlyServed starts a session of the early-sidecar profile with a python call (checked by
// check) whose late start of ship holds, and makes a call to the early container meanwhile.
func earlyServed(t *testing.T, check func(error) error) (*env, *holdLate, string, <-chan error) {
	t.Helper()
	e := newEnv(t, withEarlySidecar)
	h := newHoldLate(e)
	r := e.Create(t, "alice", sandbox.CreateParams{ProfileID: "early-sidecar"})
	pyDone := startPython(t, e, h, r.ID, check)
	if _, err := e.Caps.ExecShell(context.Background(), "alice", r.ID, capability.ShellParams{Command: "ls", Timeout: 30}); err != nil {
		t.Fatalf("call to the early container while the other starts: %v", err)
	}
	return e, h, r.ID, pyDone
}

// TestLateStartServesTheEarlyContainer: while ship's container still starts, a call routed to
// gull's is served and the sandbox shows starting; a call routed to ship waits for its start
// and readiness, after which the session is running with both containers.
func TestLateStartServesTheEarlyContainer(t *testing.T) {
	ctx := context.Background()
	var released atomic.Bool
	e, h, id, pyDone := earlyServed(t, func(err error) error {
		if err == nil && !released.Load() {
			return errors.New("the call to ship returned before ship's container was started")
		}
		return err
	})
	got, err := e.Svc.GetSandbox(ctx, "alice", id)
	if err != nil || got.Status != bay.StatusStarting || got.Containers != nil {
		t.Fatalf("sandbox while ship starts = %+v, %v; want starting, no containers listed", got, err)
	}
	for _, c := range e.Drv.Containers() {
		if want := map[string]bay.ContainerState{"ship": bay.ContainerCreated, "browser": bay.ContainerRunning}[c.Spec.Name]; c.State != want {
			t.Fatalf("container %s is %s, want %s", c.Spec.Name, c.State, want)
		}
	}
	if _, err := e.Caps.ExecShell(ctx, "alice", id, capability.ShellParams{Command: "ls", Timeout: 30}); err != nil {
		t.Fatalf("second call to the early container: %v", err)
	}
	released.Store(true)
	close(h.release)
	if err := <-pyDone; err != nil {
		t.Fatalf("call to the late container: %v", err)
	}
	sess, err := e.Svc.EnsureRunning(ctx, id)
	if err != nil || !sess.Ready() || len(sess.Containers) != 2 {
		t.Fatalf("session after the late start = %+v, %v", sess, err)
	}
	for _, c := range sess.Containers {
		if c.Status != "running" || c.Endpoint == "" || c.ContainerID == "" {
			t.Fatalf("container %+v after the late start, want running with an endpoint and id", c)
		}
	}
	if got, _ := e.Svc.GetSandbox(ctx, "alice", id); got.Status != bay.StatusReady || len(got.Containers) != 2 {
		t.Fatalf("sandbox after the late start = %+v", got)
	}
	if n := len(e.Drv.Instances()); n != 1 {
		t.Fatalf("%d instances, want 1 (one start)", n)
	}
}

// nothingLeft checks that the fake engine holds no container or instance and that the sandbox
// shows status.
func nothingLeft(t *testing.T, e *env, id, status string) {
	t.Helper()
	if cs, is := e.Drv.Containers(), e.Drv.Instances(); len(cs) != 0 || len(is) != 0 {
		t.Fatalf("left: %d containers, instances %v", len(cs), is)
	}
	if got, err := e.Svc.GetSandbox(context.Background(), "alice", id); err != nil || got.Status != status {
		t.Fatalf("sandbox = %+v, %v; want status %s", got, err, status)
	}
}

// TestLateStartFailureFailsTheSession: ship's container fails to start after gull's served a
// call; the caller waiting for ship gets the start's error, nothing of the instance is left and
// the sandbox shows failed; the next call starts a new session.
func TestLateStartFailureFailsTheSession(t *testing.T) {
	ctx := context.Background()
	e, h, id, pyDone := earlyServed(t, same)
	boom := errors.New("engine: cannot start ship")
	h.fail.Store(&boom)
	close(h.release)
	if err := <-pyDone; code(err) != bay.CodeInternal {
		t.Fatalf("call to the late container = %v, want internal_error (a failed start)", err)
	}
	nothingLeft(t, e, id, bay.StatusFailed)
	// A new start.
	e.Drv.SetLateStart(nil)
	if _, err := e.Caps.ExecPython(ctx, "alice", id, capability.PythonParams{Code: "1", Timeout: 30}); err != nil {
		t.Fatalf("call after the failed start: %v", err)
	}
}

// TestStopDuringLateStart: a stop while ship's container starts removes everything; the caller
// waiting for ship is told the sandbox was stopped and nothing is left behind.
func TestStopDuringLateStart(t *testing.T) {
	ctx := context.Background()
	e, _, id, pyDone := earlyServed(t, same)
	if err := e.Svc.StopSandbox(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	if err := <-pyDone; code(err) != bay.CodeSessionNotReady {
		t.Fatalf("call waiting for ship across a stop = %v, want session_not_ready", err)
	}
	nothingLeft(t, e, id, bay.StatusIdle)
}

// A single-container profile is unchanged: the driver is asked for a late start but has nothing
// to start late, and the session is running when the first call returns.
func TestSingleContainerHasNoLateStart(t *testing.T) {
	e := newEnv(t)
	e.Drv.SetLateStart(func(context.Context, string, bay.ContainerSpec) error {
		return errors.New("a single-container instance has no late container")
	})
	_, sess := e.Started(t)
	if !sess.Ready() || sess.Primary().Status != "running" {
		t.Fatalf("session %+v", sess)
	}
}

// gatedRuntime is a runtime client whose Health fails until open is set; ready is set once it
// has answered.
type gatedRuntime struct {
	runtime.Client
	open, ready atomic.Bool
}

func (g *gatedRuntime) Health(ctx context.Context, ep string) error {
	if !g.open.Load() {
		return errors.New("Chromium still launching")
	}
	if err := g.Client.Health(ctx, ep); err != nil {
		return err
	}
	g.ready.Store(true)
	return nil
}

// TestLateStartBeginsOnceTheEarlyRuntimeIsReady: ship's container is started only after gull's
// runtime answered (so that its start does not compete with Chromium's launch); a call to gull
// is served before ship's container starts, and the call to ship then succeeds.
func TestLateStartBeginsOnceTheEarlyRuntimeIsReady(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, withEarlySidecar)
	gull := &gatedRuntime{Client: shipclient.New(nil, nil)}
	e.Svc.SetRuntime(bay.RuntimeGull, gull)
	var early atomic.Bool // the late start began before gull answered
	release := make(chan struct{})
	e.Drv.SetLateStart(func(ctx context.Context, _ string, c bay.ContainerSpec) error {
		if !gull.ready.Load() {
			early.Store(true)
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	r := e.Create(t, "alice", sandbox.CreateParams{ProfileID: "early-sidecar"})
	pyDone := make(chan error, 1)
	go func() {
		_, err := e.Caps.ExecPython(ctx, "alice", r.ID, capability.PythonParams{Code: "1", Timeout: 30})
		pyDone <- err
	}()
	// Wait for the instance: gull's container runs, ship's is created but not started.
	for deadline := time.Now().Add(10 * time.Second); len(e.Drv.Instances()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no instance created")
		}
	}
	gull.open.Store(true)
	if _, err := e.Caps.ExecShell(ctx, "alice", r.ID, capability.ShellParams{Command: "ls", Timeout: 30}); err != nil {
		t.Fatalf("call to gull while ship's start is held: %v", err)
	}
	for _, c := range e.Drv.Containers() {
		if c.Spec.Name == "ship" && c.State != bay.ContainerCreated {
			t.Fatalf("ship's container is %s after the call to gull, want created (not started)", c.State)
		}
	}
	close(release)
	if err := <-pyDone; err != nil {
		t.Fatalf("call to ship: %v", err)
	}
	if early.Load() {
		t.Fatal("ship's container started before gull's runtime was ready")
	}
}
