package gc_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

const instance = "bay-test"

// env is one test's world: a real SQLite file, the fake engine, and a Lifecycle that does what
// the lifecycle service does (re-check the pin in the acting transaction, then remove
// containers).
type env struct {
	t     *testing.T
	ctx   context.Context
	store bay.Store
	drv   *fake.Driver
	lc    *storeLifecycle
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "bay.db"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return newEnvOn(t, st)
}

// newEnvOn is newEnv on the store st.
func newEnvOn(t *testing.T, st bay.Store) *env {
	ctx := t.Context()
	drv := fake.New()
	return &env{t: t, ctx: ctx, store: st, drv: drv, lc: &storeLifecycle{store: st, drv: drv}}
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func ptr[T any](v T) *T { return &v }

// sandboxOpts describe a seeded sandbox.
type sandboxOpts struct {
	idleIn   *time.Duration // idle deadline relative to now (nil = none)
	ttl      *time.Duration // TTL relative to now (nil = none)
	session  bool           // with a running session and container
	warm     bool
	instance string // container instance label (default instance)
}

type seeded struct {
	sb    *bay.Sandbox
	cargo *bay.Cargo
	sess  *bay.Session
	cid   string
}

// seed creates a managed cargo (with its volume), a sandbox and optionally a running session
// with its container, the way the lifecycle service does.
func (e *env) seed(o sandboxOpts) seeded {
	e.t.Helper()
	n := now()
	sbID := bay.NewID(bay.PrefixSandbox)
	cargoID := bay.NewID(bay.PrefixCargo)
	inst := o.instance
	if inst == "" {
		inst = instance
	}
	ref, err := e.drv.CreateVolume(e.ctx, bay.VolumeSpec{Name: bay.VolumeName(cargoID), Labels: map[string]string{
		bay.LabelManaged: "true", bay.LabelCargoID: cargoID, bay.LabelInstanceID: inst,
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	c := &bay.Cargo{ID: cargoID, Owner: "alice", Backend: bay.BackendDockerVolume, DriverRef: ref, Managed: true,
		ManagedBySandboxID: sbID, SizeLimitMB: 1024, CreatedAt: n, LastAccessedAt: n}
	sb := &bay.Sandbox{ID: sbID, Owner: "alice", ProfileID: "python-default", CargoID: cargoID,
		CreatedAt: n, LastActiveAt: n, Version: 1, IsWarm: o.warm}
	if o.warm {
		sb.Owner = bay.OwnerWarmPool
		sb.WarmState = bay.WarmAvailable
	}
	if o.idleIn != nil {
		sb.IdleExpiresAt = ptr(n.Add(*o.idleIn))
	}
	if o.ttl != nil {
		sb.ExpiresAt = ptr(n.Add(*o.ttl))
	}
	var sess *bay.Session
	var cid string
	if o.session {
		sess = &bay.Session{ID: bay.NewID(bay.PrefixSession), SandboxID: sbID, ProfileID: sb.ProfileID,
			DesiredState: bay.SessionRunning, ObservedState: bay.SessionRunning,
			InstanceID: inst + "/boot1", CreatedAt: n, StartedAt: &n}
		cid = e.container(sess.ID, sbID, cargoID, inst, ref)
		sess.Containers = []bay.SessionContainer{{Name: "ship", ContainerID: cid, Status: "running", RuntimeType: bay.RuntimeShip,
			Endpoint: "http://" + bay.InstanceName(sess.ID) + ":8123"}}
		sb.CurrentSessionID = sess.ID
	}
	err = e.store.Tx(e.ctx, func(tx bay.Tx) error {
		if err := tx.InsertCargo(e.ctx, c); err != nil {
			return err
		}
		if err := tx.InsertSandbox(e.ctx, sb); err != nil {
			return err
		}
		if sess != nil {
			return tx.InsertSession(e.ctx, sess)
		}
		return nil
	})
	if err != nil {
		e.t.Fatalf("seed: %v", err)
	}
	sb, _ = e.store.GetSandbox(e.ctx, sbID)
	return seeded{sb: sb, cargo: c, sess: sess, cid: cid}
}

// container creates a session's instance labelled like the lifecycle service labels them and
// returns its container's id.
func (e *env) container(sessionID, sandboxID, cargoID, inst, volume string) string {
	e.t.Helper()
	return e.instance(bay.InstanceName(sessionID), volume, map[string]string{
		bay.LabelSessionID: sessionID, bay.LabelSandboxID: sandboxID, bay.LabelCargoID: cargoID,
		bay.LabelInstanceID: inst, bay.LabelManaged: "true", bay.LabelCreatedAt: now().Format(time.RFC3339Nano),
	})
}

// instance creates a one-container instance and returns its container's id.
func (e *env) instance(name, volume string, labels map[string]string) string {
	e.t.Helper()
	mount := ""
	if volume != "" {
		mount = "/workspace"
	}
	inst, err := e.drv.CreateInstance(e.ctx, bay.InstanceSpec{Name: name, Labels: labels, VolumeRef: volume, MountPath: mount,
		Containers: []bay.ContainerSpec{{Name: "ship", RuntimeType: bay.RuntimeShip, Image: "ship:latest", Port: 8123}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return inst.Containers[0].ID
}

func (e *env) sandbox(id string) *bay.Sandbox {
	e.t.Helper()
	sb, err := e.store.GetSandbox(e.ctx, id)
	if err != nil {
		e.t.Fatalf("get sandbox %s: %v", id, err)
	}
	return sb
}

func (e *env) hasContainer(id string) bool {
	_, ok := e.drv.Container(id)
	return ok
}

func (e *env) hasVolume(name string) bool {
	_, err := e.drv.InspectVolume(e.ctx, name)
	return err == nil
}

func (e *env) hasCargo(id string) bool {
	_, err := e.store.GetCargo(e.ctx, id)
	return err == nil
}

// storeLifecycle implements gc.Lifecycle the way the lifecycle service must: the pin is
// re-checked in the transaction that writes; containers are removed after the rows.
type storeLifecycle struct {
	store bay.Store
	drv   bay.Driver

	mu sync.Mutex
	// before runs before the acting transaction (to play a concurrent request in the race).
	before func(pin bay.Pin)
	// block, when set, is waited on before acting (to hold a cycle in flight).
	block chan struct{}
	calls []bay.Pin
}

func (l *storeLifecycle) hook(pin bay.Pin) {
	l.mu.Lock()
	l.calls = append(l.calls, pin)
	before, block := l.before, l.block
	l.mu.Unlock()
	if block != nil {
		<-block
	}
	if before != nil {
		before(pin)
	}
}

func (l *storeLifecycle) pins() []bay.Pin {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bay.Pin(nil), l.calls...)
}

func (l *storeLifecycle) ReclaimCompute(ctx context.Context, pin bay.Pin) (bool, error) {
	l.hook(pin)
	var sessions []*bay.Session
	err := l.store.Tx(ctx, func(tx bay.Tx) error {
		sb, err := tx.GetSandbox(ctx, pin.SandboxID)
		if bay.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if !pin.Holds(sb, now()) {
			return nil
		}
		if pin.Reason == bay.ReasonStaleStart {
			s, err := tx.GetSession(ctx, pin.SessionID)
			if err != nil || s.ObservedState != bay.SessionStarting {
				return nil
			}
		}
		sessions, err = tx.ListSessions(ctx, bay.SessionQuery{SandboxID: sb.ID})
		if err != nil {
			return err
		}
		for _, s := range sessions {
			if err := tx.DeleteSession(ctx, s.ID); err != nil {
				return err
			}
		}
		sb.CurrentSessionID = ""
		sb.IdleExpiresAt = nil
		if err := tx.UpdateSandbox(ctx, sb); err != nil {
			return err
		}
		if sessions == nil {
			sessions = []*bay.Session{}
		}
		return nil
	})
	if err != nil || sessions == nil {
		return false, err
	}
	for _, s := range sessions {
		if err := l.drv.DestroyInstance(ctx, bay.InstanceName(s.ID)); err != nil {
			return true, err
		}
	}
	return true, nil
}

func (l *storeLifecycle) ReclaimSandbox(ctx context.Context, pin bay.Pin) (bool, error) {
	l.hook(pin)
	var sessions []*bay.Session
	var cargo *bay.Cargo
	acted := false
	err := l.store.Tx(ctx, func(tx bay.Tx) error {
		sb, err := tx.GetSandbox(ctx, pin.SandboxID)
		if bay.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if !pin.Holds(sb, now()) {
			return nil
		}
		if sessions, err = tx.ListSessions(ctx, bay.SessionQuery{SandboxID: sb.ID}); err != nil {
			return err
		}
		for _, s := range sessions {
			if err := tx.DeleteSession(ctx, s.ID); err != nil {
				return err
			}
		}
		n := now()
		sb.DeletedAt = &n
		sb.CurrentSessionID = ""
		if err := tx.UpdateSandbox(ctx, sb); err != nil {
			return err
		}
		if c, err := tx.GetCargo(ctx, sb.CargoID); err == nil && c.Managed {
			cargo = c
		}
		acted = true
		return nil
	})
	if err != nil || !acted {
		return false, err
	}
	var errs []error
	for _, s := range sessions {
		errs = append(errs, l.drv.DestroyInstance(ctx, bay.InstanceName(s.ID)))
	}
	if cargo != nil {
		if err := l.drv.DeleteVolume(ctx, cargo.DriverRef); err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, l.store.Tx(ctx, func(tx bay.Tx) error { return tx.DeleteCargo(ctx, cargo.ID) }))
		}
	}
	return true, errors.Join(errs...)
}
