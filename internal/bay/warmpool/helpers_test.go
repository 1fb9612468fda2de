package warmpool_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
	"github.com/shipyard-dev/shipyard/internal/bay/warmpool"
)

const (
	instance = "bay-a"
	profile  = "python-default"
)

type env struct {
	t     *testing.T
	ctx   context.Context
	store *sqlite.Store
	drv   *fake.Driver
	lc    *testLifecycle
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), "bay.db"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	drv := fake.New()
	return &env{t: t, ctx: t.Context(), store: st, drv: drv,
		lc: &testLifecycle{store: st, drv: drv, idle: 30 * time.Minute}}
}

func (e *env) pool(mut func(*warmpool.Config)) *warmpool.Pool {
	cfg := warmpool.Config{
		Enabled: true, InstanceID: instance, Interval: time.Minute, RunOnStartup: true, Workers: 2,
		Profiles: []warmpool.ProfileConfig{{ProfileID: profile, Size: 2, RotateTTL: time.Hour, IdleTimeout: 30 * time.Minute}},
	}
	if mut != nil {
		mut(&cfg)
	}
	log := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return warmpool.New(e.store, e.drv, e.lc, nil, log, cfg)
}

// start runs p until the test ends (or stop is called) and returns stop.
func (e *env) start(p *warmpool.Pool) (stop func()) {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.Run(ctx); err != nil {
			e.t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return stop
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// warm lists the non-deleted warm sandboxes by state.
func (e *env) warm() map[string][]*bay.Sandbox {
	e.t.Helper()
	w := true
	list, err := e.store.ListSandboxes(e.ctx, bay.SandboxQuery{Warm: &w})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]*bay.Sandbox{}
	for _, sb := range list {
		out[sb.WarmState] = append(out[sb.WarmState], sb)
	}
	return out
}

func (e *env) running() int {
	n := 0
	for _, c := range e.drv.Containers() {
		if c.State == bay.ContainerRunning {
			n++
		}
	}
	return n
}

// testLifecycle plays the lifecycle service: warm sandboxes with managed cargos, sessions as
// fake containers, pinned deletion.
type testLifecycle struct {
	store bay.Store
	drv   *fake.Driver
	idle  time.Duration

	mu      sync.Mutex
	fail    func(sandboxID string) error // EnsureRunning failure script
	ensures map[string][]time.Time       // sandbox id -> times EnsureRunning was called
	created int
}

func (l *testLifecycle) CreateWarmSandbox(ctx context.Context, profileID, instanceID string) (*bay.Sandbox, error) {
	n := now()
	sb := &bay.Sandbox{ID: bay.NewID(bay.PrefixSandbox), Owner: bay.OwnerWarmPool, ProfileID: profileID,
		CreatedAt: n, LastActiveAt: n, IsWarm: true, WarmState: bay.WarmPending, WarmInstanceID: instanceID}
	c := &bay.Cargo{ID: bay.NewID(bay.PrefixCargo), Owner: bay.OwnerWarmPool, Backend: bay.BackendDockerVolume,
		Managed: true, ManagedBySandboxID: sb.ID, CreatedAt: n, LastAccessedAt: n}
	ref, err := l.drv.CreateVolume(ctx, bay.VolumeSpec{Name: bay.VolumeName(c.ID), Labels: map[string]string{bay.LabelCargoID: c.ID, bay.LabelManaged: "true"}})
	if err != nil {
		return nil, err
	}
	c.DriverRef = ref
	sb.CargoID = c.ID
	err = l.store.Tx(ctx, func(tx bay.Tx) error {
		if err := tx.InsertCargo(ctx, c); err != nil {
			return err
		}
		return tx.InsertSandbox(ctx, sb)
	})
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.created++
	l.mu.Unlock()
	return l.store.GetSandbox(ctx, sb.ID)
}

func (l *testLifecycle) calls(id string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.ensures[id]...)
}

func (l *testLifecycle) EnsureRunning(ctx context.Context, id string) (*bay.Session, error) {
	l.mu.Lock()
	if l.ensures == nil {
		l.ensures = map[string][]time.Time{}
	}
	l.ensures[id] = append(l.ensures[id], now())
	fail := l.fail
	l.mu.Unlock()
	if fail != nil {
		if err := fail(id); err != nil {
			return nil, err
		}
	}
	sb, err := l.store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if sb.CurrentSessionID != "" {
		if s, err := l.store.GetSession(ctx, sb.CurrentSessionID); err == nil {
			if c, ok := l.drv.Container(s.Primary().ContainerID); ok && c.State == bay.ContainerRunning {
				return s, l.touch(ctx, id, s.ID)
			}
		}
	}
	n := now()
	sess := &bay.Session{ID: bay.NewID(bay.PrefixSession), SandboxID: id, ProfileID: sb.ProfileID,
		DesiredState: bay.SessionRunning, ObservedState: bay.SessionRunning, CreatedAt: n, StartedAt: &n}
	cargo, err := l.store.GetCargo(ctx, sb.CargoID)
	if err != nil {
		return nil, err
	}
	inst, err := l.drv.CreateInstance(ctx, bay.InstanceSpec{Name: bay.InstanceName(sess.ID),
		VolumeRef: cargo.DriverRef, MountPath: "/workspace",
		Labels:     map[string]string{bay.LabelSessionID: sess.ID, bay.LabelSandboxID: id},
		Containers: []bay.ContainerSpec{{Name: "ship", RuntimeType: bay.RuntimeShip, Image: "ship:latest", Port: 8123}}})
	if err != nil {
		return nil, err
	}
	c := inst.Containers[0]
	sess.Containers = []bay.SessionContainer{{Name: c.Name, ContainerID: c.ID, Endpoint: c.Endpoint, Status: "running", RuntimeType: c.RuntimeType}}
	err = l.store.Tx(ctx, func(tx bay.Tx) error {
		if sb.CurrentSessionID != "" {
			if err := tx.DeleteSession(ctx, sb.CurrentSessionID); err != nil {
				return err
			}
		}
		return tx.InsertSession(ctx, sess)
	})
	if err != nil {
		return nil, err
	}
	return sess, l.touch(ctx, id, sess.ID)
}

func (l *testLifecycle) touch(ctx context.Context, id, sessID string) error {
	return l.store.Tx(ctx, func(tx bay.Tx) error {
		sb, err := tx.GetSandbox(ctx, id)
		if err != nil {
			return err
		}
		t := now().Add(l.idle)
		sb.CurrentSessionID, sb.IdleExpiresAt, sb.LastActiveAt = sessID, &t, now()
		return tx.UpdateSandbox(ctx, sb)
	})
}

func (l *testLifecycle) ReclaimSandbox(ctx context.Context, pin bay.Pin) (bool, error) {
	var sessions []*bay.Session
	var sb *bay.Sandbox
	err := l.store.Tx(ctx, func(tx bay.Tx) error {
		cur, err := tx.GetSandbox(ctx, pin.SandboxID)
		if err != nil {
			return err
		}
		if !pin.Holds(cur, now()) {
			return nil
		}
		if sessions, err = tx.ListSessions(ctx, bay.SessionQuery{SandboxID: cur.ID}); err != nil {
			return err
		}
		for _, s := range sessions {
			if err := tx.DeleteSession(ctx, s.ID); err != nil {
				return err
			}
		}
		n := now()
		cur.DeletedAt, cur.CurrentSessionID = &n, ""
		sb = cur
		return tx.UpdateSandbox(ctx, cur)
	})
	if err != nil || sb == nil {
		return false, err
	}
	var errs []error
	for _, s := range sessions {
		errs = append(errs, l.drv.DestroyInstance(ctx, bay.InstanceName(s.ID)))
	}
	if c, err := l.store.GetCargo(ctx, sb.CargoID); err == nil {
		errs = append(errs, l.drv.DeleteVolume(ctx, c.DriverRef))
		errs = append(errs, l.store.Tx(ctx, func(tx bay.Tx) error { return tx.DeleteCargo(ctx, c.ID) }))
	}
	return true, errors.Join(errs...)
}

// count is how many warm sandboxes were created.
func (l *testLifecycle) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.created
}

// claim hands an available warm sandbox of profileID to owner the way the lifecycle service's
// create does (one transaction, a fresh idle deadline, the caller's TTL) and tells the pool;
// ok is false when none is available or the profile has no pool.
func (e *env) claim(p *warmpool.Pool, profileID, owner string, ttl *time.Duration) (*bay.Sandbox, bool, error) {
	if !p.WarmPoolEnabled(profileID) {
		return nil, false, nil
	}
	n := now()
	idle := n.Add(30 * time.Minute)
	c := bay.WarmClaim{ProfileID: profileID, Owner: owner, Now: n, IdleExpiresAt: &idle}
	if ttl != nil && *ttl > 0 {
		exp := n.Add(*ttl)
		c.ExpiresAt = &exp
	}
	var sb *bay.Sandbox
	err := e.store.Tx(e.ctx, func(tx bay.Tx) error {
		var err error
		sb, err = tx.ClaimWarmSandbox(e.ctx, c)
		return err
	})
	if bay.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	p.Claimed(e.ctx, sb)
	return sb, true, nil
}
