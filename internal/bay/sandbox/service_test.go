package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/idempotency"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox/sandboxtest"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
)

type env = sandboxtest.Env

// newEnv builds the services over the fake driver and the ship stub; mods adjust the
// lifecycle's configuration.
func newEnv(t *testing.T, mods ...func(*sandbox.Config)) *env {
	t.Helper()
	return sandboxtest.New(t, sandboxtest.Options{Config: func(c *sandbox.Config) {
		for _, m := range mods {
			m(c)
		}
	}})
}

var (
	code         = sandboxtest.Code
	testProfiles = sandboxtest.Profiles
)

// idemHook hands the idempotency record the service's view itself (httpapi renders it first).
func idemHook(h idempotency.Hook) bay.TxHook[*bay.SandboxView] {
	if h == nil {
		return nil
	}
	return func(ctx context.Context, tx bay.Tx, v *bay.SandboxView) error { return h(ctx, tx, v) }
}

func eager(c *sandbox.Config) { c.EagerVolume = true }

func TestCreateIsLazy(t *testing.T) {
	e := newEnv(t, eager)
	ttl := int64(3600)
	r := e.Create(t, "alice", sandbox.CreateParams{TTL: &ttl})
	if r.Status != "idle" || r.ProfileID != "python-default" || r.Containers != nil || r.IdleExpiresAt != nil {
		t.Fatalf("unexpected response %+v", r)
	}
	if r.ExpiresAt == nil || !r.ExpiresAt.Equal(e.Clock.Now().Add(time.Hour)) {
		t.Fatalf("expires_at = %v", r.ExpiresAt)
	}
	if n := e.Drv.CallCount(fake.MethodCreateInstance); n != 0 {
		t.Fatalf("create started %d containers, want lazy", n)
	}
	if vols := e.Drv.Volumes(); len(vols) != 1 || vols[0].Labels[bay.LabelOwner] != "alice" || vols[0].Labels[bay.LabelManaged] != "true" {
		t.Fatalf("volumes %+v", vols)
	}
	for _, ttl := range []int64{0, -5} {
		if r := e.Create(t, "alice", sandbox.CreateParams{TTL: &ttl}); r.ExpiresAt != nil {
			t.Fatalf("ttl %d gave expiry %v", ttl, r.ExpiresAt)
		}
	}
	if _, err := e.Svc.CreateSandbox(context.Background(), "alice", sandbox.CreateParams{ProfileID: "nope"}, nil); code(err) != bay.CodeValidation {
		t.Fatalf("invalid profile: %v", err)
	}
}

func TestCreateVolumeFailureLeavesNoRows(t *testing.T) {
	e := newEnv(t, eager)
	e.Drv.Fail(fake.MethodCreateVolume, errors.New("disk full"), 1)
	_, err := e.Svc.CreateSandbox(context.Background(), "alice", sandbox.CreateParams{}, nil)
	if code(err) != bay.CodeInternal {
		t.Fatalf("err = %v", err)
	}
	var be *bay.Error
	if !errors.As(err, &be) || be.Message == "" || contains(be.Message, "disk full") {
		t.Fatalf("message leaks the cause or is empty: %q", be.Message)
	}
	assertEmpty(t, e)
}

func TestCreateDatabaseFailureRemovesTheVolume(t *testing.T) {
	e := newEnv(t, eager)
	hookErr := errors.New("boom")
	_, err := e.Svc.CreateSandbox(context.Background(), "alice", sandbox.CreateParams{}, func(context.Context, bay.Tx, *bay.SandboxView) error { return hookErr })
	if !errors.Is(err, hookErr) {
		t.Fatalf("err = %v", err)
	}
	assertEmpty(t, e)
	if v := e.Drv.Volumes(); len(v) != 0 {
		t.Fatalf("volume left behind: %+v", v)
	}
}

func assertEmpty(t *testing.T, e *env) {
	t.Helper()
	sbs, _ := e.Store.ListSandboxes(context.Background(), bay.SandboxQuery{IncludeDeleted: true})
	cs, _ := e.Store.ListCargos(context.Background(), bay.CargoQuery{})
	if len(sbs) != 0 || len(cs) != 0 {
		t.Fatalf("rows left: %d sandboxes, %d cargos", len(sbs), len(cs))
	}
}

func contains(s, sub string) bool {
	return len(sub) > 0 && len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0)
}
func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestLazyVolume: by default a create makes no Docker call at all; the first start creates the
// managed volume (labelled) right before the container, and a failure there leaves no
// container and a failed session that the next call retries.
func TestLazyVolume(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := e.Create(t, "alice", sandbox.CreateParams{})
	if calls := e.Drv.Calls(); len(calls) != 0 {
		t.Fatalf("create made driver calls: %+v", calls)
	}
	e.Drv.Fail(fake.MethodCreateVolume, errors.New("disk full"), 1)
	if _, err := e.Svc.EnsureRunning(ctx, r.ID); code(err) != bay.CodeInternal {
		t.Fatalf("err = %v", err)
	}
	if len(e.Drv.Containers()) != 0 || len(e.Drv.Volumes()) != 0 {
		t.Fatal("left-overs after a failed volume create")
	}
	if _, err := e.Svc.EnsureRunning(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	vols := e.Drv.Volumes()
	if len(vols) != 1 || vols[0].Name != bay.VolumeName(r.CargoID) || vols[0].Labels[bay.LabelOwner] != "alice" || vols[0].Labels[bay.LabelCargoID] != r.CargoID {
		t.Fatalf("volumes %+v", vols)
	}
	c, _ := e.Store.GetCargo(ctx, r.CargoID)
	if c.DriverRef == "" || e.Drv.Containers()[0].VolumeRef != c.DriverRef {
		t.Fatalf("ref %q", c.DriverRef)
	}
	if err := e.Svc.DeleteSandbox(ctx, "alice", r.ID); err != nil {
		t.Fatal(err)
	}
	if len(e.Drv.Volumes()) != 0 {
		t.Fatal("volume kept after delete")
	}
}

func TestCreateOnCargo(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ext, err := e.Svc.Cargos().Create(ctx, "alice", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := e.Create(t, "alice", sandbox.CreateParams{CargoID: &ext.ID})
	if r.CargoID != ext.ID {
		t.Fatalf("cargo %s", r.CargoID)
	}
	// Another owner's cargo is invisible.
	if _, err := e.Svc.CreateSandbox(ctx, "bob", sandbox.CreateParams{CargoID: &ext.ID}, nil); code(err) != bay.CodeNotFound {
		t.Fatalf("bob: %v", err)
	}
	// A managed cargo (another sandbox's workspace) is refused: it belongs to that sandbox.
	other := e.Create(t, "alice", sandbox.CreateParams{})
	if _, err := e.Svc.CreateSandbox(ctx, "alice", sandbox.CreateParams{CargoID: &other.CargoID}, nil); code(err) != bay.CodeConflict {
		t.Fatalf("managed cargo: %v", err)
	}
	// Deleting the sandbox keeps the external cargo; the cargo is then deletable.
	if err := e.Svc.Cargos().Delete(ctx, "alice", ext.ID); code(err) != bay.CodeConflict {
		t.Fatalf("delete used cargo: %v", err)
	}
	if err := e.Svc.DeleteSandbox(ctx, "alice", r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Svc.Cargos().Get(ctx, "alice", ext.ID); err != nil {
		t.Fatalf("external cargo gone: %v", err)
	}
	if err := e.Svc.Cargos().Delete(ctx, "alice", other.CargoID); code(err) != bay.CodeConflict {
		t.Fatalf("delete managed cargo of a live sandbox: %v", err)
	}
	if err := e.Svc.Cargos().Delete(ctx, "alice", ext.ID); err != nil {
		t.Fatal(err)
	}
}

func TestEnsureRunningStartsOneContainerForConcurrentCalls(t *testing.T) {
	e := newEnv(t)
	e.Drv.SetLatency(fake.MethodCreateInstance, 50*time.Millisecond)
	r := e.Create(t, "alice", sandbox.CreateParams{})
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.Caps.ExecPython(context.Background(), "alice", r.ID, capability.PythonParams{Code: "1", Timeout: 30})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := e.Drv.CallCount(fake.MethodCreateInstance); n != 1 {
		t.Fatalf("CreateInstance called %d times", n)
	}
	c := e.Drv.Containers()
	if len(c) != 1 {
		t.Fatalf("containers: %d", len(c))
	}
	spec, labels := c[0].Spec, c[0].Labels
	if c[0].Instance != "bay-session-"+labels[bay.LabelSessionID] || labels[bay.LabelOwner] != "alice" ||
		labels[bay.LabelInstanceID] != "test" || labels[bay.LabelManaged] != "true" || labels[bay.LabelCreatedAt] == "" ||
		spec.User != "1000:1000" || c[0].MountPath != "/workspace" || spec.Env["FOO"] != "bar:baz" || spec.Env["PROFILE_VAR"] != "1" ||
		spec.Env["BAY_SANDBOX_ID"] != r.ID || spec.Env["BAY_WORKSPACE_PATH"] != "/workspace" || spec.Env[sandbox.EnvProfileEnvKeys] != "PROFILE_VAR" ||
		spec.Limits.NanoCPUs != 1e9 || spec.Limits.MemoryBytes != 1<<30 || spec.RuntimeType != bay.RuntimeShip || spec.Port != 8123 {
		t.Fatalf("container %+v", c[0])
	}
	got, err := e.Svc.GetSandbox(context.Background(), "alice", r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "ready" || got.IdleExpiresAt == nil || len(got.Containers) != 1 || got.Containers[0].Healthy == nil || !*got.Containers[0].Healthy ||
		got.Containers[0].Version == nil || *got.Containers[0].Version != "stub" {
		b, _ := json.Marshal(got)
		t.Fatalf("get: %s", b)
	}
}

func TestInstanceCreateFailureMarksFailedAndLeavesNothing(t *testing.T) {
	e := newEnv(t)
	r := e.Create(t, "alice", sandbox.CreateParams{})
	e.Drv.Fail(fake.MethodCreateInstance, errors.New("no such image"), 1)
	_, err := e.Caps.ExecShell(context.Background(), "alice", r.ID, capability.ShellParams{Command: "ls", Timeout: 30})
	if code(err) != bay.CodeInternal {
		t.Fatalf("err = %v", err)
	}
	if c := e.Drv.Containers(); len(c) != 0 {
		t.Fatalf("containers left: %d", len(c))
	}
	got, _ := e.Svc.GetSandbox(context.Background(), "alice", r.ID)
	if got.Status != "failed" {
		t.Fatalf("status %s", got.Status)
	}
	// The next call rebuilds.
	if _, err := e.Caps.ExecShell(context.Background(), "alice", r.ID, capability.ShellParams{Command: "ls", Timeout: 30}); err != nil {
		t.Fatal(err)
	}
}

// A create that failed after the instance was made (the answer lost) leaves nothing either:
// the service destroys the instance by its name.
func TestLateCreateFailureDestroysTheInstance(t *testing.T) {
	e := newEnv(t)
	r := e.Create(t, "alice", sandbox.CreateParams{})
	e.Drv.FailLate(fake.MethodCreateInstance, errors.New("answer lost"), 1)
	if _, err := e.Svc.EnsureRunning(context.Background(), r.ID); code(err) != bay.CodeInternal {
		t.Fatalf("err = %v", err)
	}
	if c := e.Drv.Containers(); len(c) != 0 {
		t.Fatalf("containers left: %d", len(c))
	}
}

func TestStopRemovesContainersAndResumeKeepsTheCargo(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := e.Create(t, "alice", sandbox.CreateParams{})
	s1, err := e.Svc.EnsureRunning(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := e.Svc.StopSandbox(ctx, "alice", r.ID); err != nil {
			t.Fatal(err)
		}
	}
	if c := e.Drv.Containers(); len(c) != 0 {
		t.Fatalf("stop left %d containers", len(c))
	}
	sess, _ := e.Store.ListSessions(ctx, bay.SessionQuery{SandboxID: r.ID})
	got, _ := e.Svc.GetSandbox(ctx, "alice", r.ID)
	if len(sess) != 0 || got.Status != "idle" || got.IdleExpiresAt != nil {
		t.Fatalf("after stop: %d sessions, %+v", len(sess), got)
	}
	s2, err := e.Svc.EnsureRunning(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s2.ID == s1.ID || e.Drv.Containers()[0].VolumeRef != bay.VolumeName(r.CargoID) {
		t.Fatalf("resume: %s vs %s, %+v", s1.ID, s2.ID, e.Drv.Containers()[0])
	}
}

func TestDeleteRemovesEverythingAndIsIdempotent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := e.Create(t, "alice", sandbox.CreateParams{})
	if _, err := e.Svc.EnsureRunning(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.Svc.DeleteSandbox(ctx, "bob", r.ID); code(err) != bay.CodeNotFound {
		t.Fatalf("other owner: %v", err)
	}
	for range 2 {
		if err := e.Svc.DeleteSandbox(ctx, "alice", r.ID); err != nil {
			t.Fatal(err)
		}
	}
	if len(e.Drv.Containers()) != 0 || len(e.Drv.Volumes()) != 0 {
		t.Fatalf("left: %d containers %d volumes", len(e.Drv.Containers()), len(e.Drv.Volumes()))
	}
	if _, err := e.Store.GetCargo(ctx, r.CargoID); !bay.IsNotFound(err) {
		t.Fatalf("cargo row: %v", err)
	}
	if _, err := e.Svc.GetSandbox(ctx, "alice", r.ID); code(err) != bay.CodeNotFound {
		t.Fatalf("get deleted: %v", err)
	}
	if err := e.Svc.DeleteSandbox(ctx, "alice", "sandbox-000000000000"); code(err) != bay.CodeNotFound {
		t.Fatalf("never existed: %v", err)
	}
}

func TestExpiredSandboxIsRefusedByCapabilities(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ttl := int64(60)
	r := e.Create(t, "alice", sandbox.CreateParams{TTL: &ttl})
	e.Clock.Advance(61 * time.Second)
	_, err := e.Caps.ExecPython(ctx, "alice", r.ID, capability.PythonParams{Code: "1", Timeout: 30})
	var be *bay.Error
	if !errors.As(err, &be) || be.Code != bay.CodeSandboxExpired || be.Details["sandbox_id"] != r.ID {
		t.Fatalf("err = %v", err)
	}
	if _, err := e.Svc.EnsureRunning(ctx, r.ID); code(err) != bay.CodeSandboxExpired {
		t.Fatalf("ensure: %v", err)
	}
	if _, err := e.Svc.ExtendTTL(ctx, "alice", r.ID, 10, nil); code(err) != bay.CodeSandboxExpired {
		t.Fatalf("extend: %v", err)
	}
	if e.Drv.CallCount(fake.MethodCreateInstance) != 0 {
		t.Fatal("expired sandbox got compute")
	}
	// After the expiry GC deleted it: gone for everything, but extend still says expired.
	if acted, err := e.Svc.ReclaimSandbox(ctx, bay.Pin{SandboxID: r.ID, Reason: bay.ReasonTTL}); err != nil || !acted {
		t.Fatalf("reclaim: %v %v", acted, err)
	}
	if _, err := e.Svc.GetSandbox(ctx, "alice", r.ID); code(err) != bay.CodeNotFound {
		t.Fatalf("get after GC: %v", err)
	}
	if _, err := e.Svc.ExtendTTL(ctx, "alice", r.ID, 10, nil); code(err) != bay.CodeSandboxExpired {
		t.Fatalf("extend after GC: %v", err)
	}
	if _, err := e.Svc.ExtendTTL(ctx, "bob", r.ID, 10, nil); code(err) != bay.CodeNotFound {
		t.Fatalf("extend by another owner after GC: %v", err)
	}
}

func TestExtendTTL(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	inf := e.Create(t, "alice", sandbox.CreateParams{})
	if _, err := e.Svc.ExtendTTL(ctx, "alice", inf.ID, 10, nil); code(err) != bay.CodeSandboxTTLInfinite {
		t.Fatalf("infinite: %v", err)
	}
	ttl := int64(100)
	r := e.Create(t, "alice", sandbox.CreateParams{TTL: &ttl})
	if _, err := e.Svc.ExtendTTL(ctx, "alice", r.ID, 0, nil); code(err) != bay.CodeValidation {
		t.Fatalf("zero: %v", err)
	}
	got, err := e.Svc.ExtendTTL(ctx, "alice", r.ID, 50, nil)
	if err != nil || !got.ExpiresAt.Equal(e.Clock.Now().Add(150*time.Second)) {
		t.Fatalf("extend: %v %v", got, err)
	}
	if _, err := e.Svc.ExtendTTL(ctx, "bob", r.ID, 50, nil); code(err) != bay.CodeNotFound {
		t.Fatalf("other owner: %v", err)
	}
}

func TestDeadContainerIsRebuiltAfterTheProbeCache(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := e.Create(t, "alice", sandbox.CreateParams{})
	s1, err := e.Svc.EnsureRunning(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.Drv.Kill(s1.Primary().ContainerID)
	// Within the probe cache the session is trusted (no inspect per call).
	inspects := e.Drv.CallCount(fake.MethodInspectInstance)
	if s, err := e.Svc.EnsureRunning(ctx, r.ID); err != nil || s.ID != s1.ID {
		t.Fatalf("cached: %v %v", s, err)
	}
	if e.Drv.CallCount(fake.MethodInspectInstance) != inspects {
		t.Fatal("probed although the cache is fresh")
	}
	e.Clock.Advance(3 * time.Second)
	s2, err := e.Svc.EnsureRunning(ctx, r.ID)
	if err != nil || s2.ID == s1.ID {
		t.Fatalf("rebuilt: %v %v", s2, err)
	}
	if len(e.Drv.Containers()) != 1 {
		t.Fatalf("containers: %d", len(e.Drv.Containers()))
	}
}

// startingSession stores a session left "starting" by instanceID and makes it current.
func startingSession(t *testing.T, e *env, sandboxID, instanceID string) *bay.Session {
	t.Helper()
	ctx := context.Background()
	now := e.Clock.Now()
	sess := &bay.Session{ID: bay.NewID(bay.PrefixSession), SandboxID: sandboxID, ProfileID: "python-default",
		DesiredState: bay.SessionRunning, ObservedState: bay.SessionStarting, InstanceID: instanceID, CreatedAt: now, StartedAt: &now}
	err := e.Store.Tx(ctx, func(tx bay.Tx) error {
		if err := tx.InsertSession(ctx, sess); err != nil {
			return err
		}
		sb, err := tx.GetSandbox(ctx, sandboxID)
		if err != nil {
			return err
		}
		sb.CurrentSessionID = sess.ID
		return tx.UpdateSandbox(ctx, sb)
	})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func TestStartingSessionOfAnotherInstance(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := e.Create(t, "alice", sandbox.CreateParams{})
	sess := startingSession(t, e, r.ID, "other/1234")
	_, err := e.Svc.EnsureRunning(ctx, r.ID)
	var be *bay.Error
	if !errors.As(err, &be) || be.Code != bay.CodeSessionNotReady || be.Details["retry_after_ms"] != 1000 {
		t.Fatalf("fresh start elsewhere: %v", err)
	}
	// A crash leftover (older than readiness bound + margin) is discarded and rebuilt.
	e.Clock.Advance(5*time.Second + 31*time.Second)
	s, err := e.Svc.EnsureRunning(ctx, r.ID)
	if err != nil || s.ID == sess.ID {
		t.Fatalf("stale: %v %v", s, err)
	}
}

// A session left starting by an earlier incarnation of this very instance (bay killed and
// restarted) is rebuilt at once: nobody is going to finish that start.
func TestStartingSessionOfADeadBoot(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := e.Create(t, "alice", sandbox.CreateParams{})
	sess := startingSession(t, e, r.ID, "test/deadbeef")
	s, err := e.Svc.EnsureRunning(ctx, r.ID)
	if err != nil || s.ID == sess.ID {
		t.Fatalf("a dead boot's start must be discarded and rebuilt: %v %v", s, err)
	}
	if n := len(e.Drv.Containers()); n != 1 {
		t.Fatalf("containers: %d, want 1", n)
	}
}

func TestIdempotentCreateRaceExecutesOnce(t *testing.T) {
	e := newEnv(t)
	idem := idempotency.New(e.Store, e.Clock, idempotency.Config{Enabled: true}, nil)
	const n = 16
	bodies := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := idem.Do(context.Background(), idempotency.Request{Owner: "alice", Key: "k-1", Method: "POST", Path: "/v1/sandboxes", Body: map[string]any{"profile": "python-default"}},
				201, func(ctx context.Context, hook idempotency.Hook) (any, error) {
					return e.Svc.CreateSandbox(ctx, "alice", sandbox.CreateParams{}, idemHook(hook))
				})
			if err != nil {
				t.Error(err)
				return
			}
			bodies[i] = res.Body
		}()
	}
	wg.Wait()
	for i := 1; i < n; i++ {
		if string(bodies[i]) != string(bodies[0]) {
			t.Fatalf("responses differ:\n%s\n%s", bodies[0], bodies[i])
		}
	}
	if sbs, _ := e.Store.ListSandboxes(context.Background(), bay.SandboxQuery{}); len(sbs) != 1 {
		t.Fatalf("%d sandboxes created", len(sbs))
	}
	// Same key, different body: 409 with details.
	_, err := idem.Do(context.Background(), idempotency.Request{Owner: "alice", Key: "k-1", Method: "POST", Path: "/v1/sandboxes", Body: map[string]any{"profile": "x"}},
		201, func(ctx context.Context, hook idempotency.Hook) (any, error) { t.Fatal("executed"); return nil, nil })
	var be *bay.Error
	if !errors.As(err, &be) || be.Code != bay.CodeConflict || be.Details["key"] != "k-1" {
		t.Fatalf("mismatch: %v", err)
	}
	// Another owner's identical key is independent; an invalid key is 400.
	if _, err := idem.Do(context.Background(), idempotency.Request{Owner: "alice", Key: "bad key!", Method: "POST", Path: "/v1/sandboxes"},
		201, func(context.Context, idempotency.Hook) (any, error) { return 1, nil }); code(err) != bay.CodeValidation {
		t.Fatalf("invalid key: %v", err)
	}
}

func TestIdempotencyDoesNotCacheErrors(t *testing.T) {
	e := newEnv(t)
	idem := idempotency.New(e.Store, e.Clock, idempotency.Config{Enabled: true}, nil)
	req := idempotency.Request{Owner: "alice", Key: "k", Method: "POST", Path: "/v1/sandboxes", Body: 1}
	calls := 0
	for i := range 2 {
		_, err := idem.Do(context.Background(), req, 201, func(ctx context.Context, hook idempotency.Hook) (any, error) {
			calls++
			if i == 0 {
				return nil, bay.Errorf(bay.CodeValidation, "nope")
			}
			return e.Svc.CreateSandbox(ctx, "alice", sandbox.CreateParams{}, idemHook(hook))
		})
		if (err != nil) != (i == 0) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if calls != 2 {
		t.Fatalf("calls %d", calls)
	}
	e.Clock.Advance(2 * time.Hour)
	if n, err := idem.Sweep(context.Background()); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
}

func TestListPagingNeverShortWithCursor(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ttl := int64(10)
	var ids []string
	for i := range 7 {
		p := sandbox.CreateParams{}
		if i%2 == 0 {
			p.TTL = &ttl
		}
		ids = append(ids, e.Create(t, "alice", p).ID)
	}
	e.Create(t, "bob", sandbox.CreateParams{})
	e.Clock.Advance(time.Minute) // the 4 with a TTL are expired now
	seen := 0
	cursor := ""
	for page := 0; ; page++ {
		out, err := e.Svc.ListSandboxes(ctx, "alice", sandbox.ListParams{Limit: 3, Cursor: cursor, Status: "idle"})
		if err != nil {
			t.Fatal(err)
		}
		seen += len(out.Items)
		if out.NextCursor == "" {
			break
		}
		if len(out.Items) != 3 {
			t.Fatalf("short page with cursor: %d", len(out.Items))
		}
		cursor = out.NextCursor
	}
	if seen != 3 {
		t.Fatalf("idle seen %d", seen)
	}
	out, _ := e.Svc.ListSandboxes(ctx, "alice", sandbox.ListParams{Limit: 4, Status: "expired"})
	if len(out.Items) != 4 || out.NextCursor != "" {
		t.Fatalf("expired: %d %v", len(out.Items), out.NextCursor)
	}
	if _, err := e.Svc.ListSandboxes(ctx, "alice", sandbox.ListParams{Status: "bogus"}); code(err) != bay.CodeValidation {
		t.Fatalf("bogus status: %v", err)
	}
	_ = ids
}

func TestReclaimComputeIsPinned(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := e.Create(t, "alice", sandbox.CreateParams{})
	s1, err := e.Svc.EnsureRunning(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(31 * time.Minute) // past the idle deadline
	if acted, err := e.Svc.ReclaimCompute(ctx, bay.Pin{SandboxID: r.ID, SessionID: "sess-other", Reason: bay.ReasonIdle}); err != nil || acted {
		t.Fatalf("changed session acted: %v %v", acted, err)
	}
	if len(e.Drv.Containers()) != 1 {
		t.Fatal("container removed by a stale decision")
	}
	if acted, err := e.Svc.ReclaimCompute(ctx, bay.Pin{SandboxID: r.ID, SessionID: s1.ID, Reason: bay.ReasonIdle}); err != nil || !acted {
		t.Fatalf("pinned: %v %v", acted, err)
	}
	if len(e.Drv.Containers()) != 0 {
		t.Fatal("container kept")
	}
	sb, _ := e.Store.GetSandbox(ctx, r.ID)
	pin := bay.Pin{SandboxID: r.ID, Reason: bay.ReasonTTL}
	if acted, err := e.Svc.ReclaimSandbox(ctx, pin); err != nil || acted {
		t.Fatalf("ttl on infinite sandbox acted: %v %v", acted, err)
	}
	_ = sb
	_ = fmt.Sprint()
}

// TestIdempotencyAcrossInstances: two bays (two managers, two services) share one database;
// concurrent requests with the same key through both execute the effect once: the loser's
// transaction fails on the record and is rolled back, and it replays the winner's response.
func TestIdempotencyAcrossInstances(t *testing.T) {
	e := newEnv(t, eager)
	other := sandbox.New(e.Store, e.Drv, shipclient.New(nil, nil), e.Clock, nil, sandbox.Config{Profiles: testProfiles(), InstanceID: "other", EagerVolume: true})
	svcs := []*sandbox.Service{e.Svc, other}
	mgrs := []*idempotency.Manager{
		idempotency.New(e.Store, e.Clock, idempotency.Config{Enabled: true}, nil),
		idempotency.New(e.Store, e.Clock, idempotency.Config{Enabled: true}, nil),
	}
	const n = 12
	bodies := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := mgrs[i%2].Do(context.Background(), idempotency.Request{Owner: "alice", Key: "cross", Method: "POST", Path: "/v1/sandboxes", Body: 1},
				201, func(ctx context.Context, hook idempotency.Hook) (any, error) {
					return svcs[i%2].CreateSandbox(ctx, "alice", sandbox.CreateParams{}, idemHook(hook))
				})
			if err != nil {
				t.Error(err)
				return
			}
			bodies[i] = res.Body
		}()
	}
	wg.Wait()
	for i := 1; i < n; i++ {
		if string(bodies[i]) != string(bodies[0]) {
			t.Fatalf("responses differ:\n%s\n%s", bodies[0], bodies[i])
		}
	}
	sbs, _ := e.Store.ListSandboxes(context.Background(), bay.SandboxQuery{})
	cs, _ := e.Store.ListCargos(context.Background(), bay.CargoQuery{})
	if len(sbs) != 1 || len(cs) != 1 || len(e.Drv.Volumes()) != 1 {
		t.Fatalf("%d sandboxes, %d cargos, %d volumes; calls %+v", len(sbs), len(cs), len(e.Drv.Volumes()), e.Drv.Calls())
	}
}

// TestStopDuringStart: stop does not wait for a start in progress; the starter finds its
// session gone, destroys what it created and reports session_not_ready; nothing is left.
func TestStopDuringStart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := e.Create(t, "alice", sandbox.CreateParams{})
	created := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	e.Drv.FailWhen(fake.MethodCreateInstance, func(fake.Call) error {
		once.Do(func() { close(created); <-release })
		return nil
	})
	done := make(chan error, 1)
	go func() { _, err := e.Svc.EnsureRunning(ctx, r.ID); done <- err }()
	<-created
	if err := e.Svc.StopSandbox(ctx, "alice", r.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	err := <-done
	var be *bay.Error
	if !errors.As(err, &be) || be.Code != bay.CodeSessionNotReady {
		t.Fatalf("starter: %v", err)
	}
	if c := e.Drv.Containers(); len(c) != 0 {
		t.Fatalf("containers left: %+v", c)
	}
	if sess, _ := e.Store.ListSessions(ctx, bay.SessionQuery{SandboxID: r.ID}); len(sess) != 0 {
		t.Fatalf("sessions left: %d", len(sess))
	}
	// The next call starts normally.
	if _, err := e.Svc.EnsureRunning(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
}

// Back-to-back calls on a ready sandbox refresh the idle deadline at most once per slack
// (1 s for a 30 min idle timeout): the rest cost no write.
func TestTouchCoalescesBackToBackCalls(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := e.Create(t, "alice", sandbox.CreateParams{})
	if _, err := e.Svc.EnsureRunning(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	first, err := e.Store.GetSandbox(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(300 * time.Millisecond)
	if _, err := e.Svc.EnsureRunning(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	second, _ := e.Store.GetSandbox(ctx, r.ID)
	if second.Version != first.Version || !second.LastActiveAt.Equal(first.LastActiveAt) {
		t.Fatalf("a call 300 ms after the last one wrote the row (version %d -> %d)", first.Version, second.Version)
	}
	e.Clock.Advance(800 * time.Millisecond)
	if _, err := e.Svc.EnsureRunning(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	third, _ := e.Store.GetSandbox(ctx, r.ID)
	now := e.Clock.Now()
	if !third.LastActiveAt.Equal(now) || third.IdleExpiresAt == nil || !third.IdleExpiresAt.Equal(now.Add(30*time.Minute)) {
		t.Fatalf("after the slack the call must refresh: last_active %v idle %v, now %v", third.LastActiveAt, third.IdleExpiresAt, now)
	}
}

// Every session gets its own runtime token, in its container's environment and its row.
func TestSessionRuntimeToken(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var tokens []string
	for range 2 {
		r := e.Create(t, "alice", sandbox.CreateParams{})
		sess, err := e.Svc.EnsureRunning(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := e.Store.GetSession(ctx, sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(stored.RuntimeToken) != 64 {
			t.Fatalf("runtime token %q, want 64 hex digits", stored.RuntimeToken)
		}
		c, ok := e.Drv.Container(stored.Primary().ContainerID)
		if !ok || c.Spec.Env[shipapi.EnvAuthToken] != stored.RuntimeToken {
			t.Fatalf("the container's %s is not the session's token", shipapi.EnvAuthToken)
		}
		if u := stored.AuthorizedURL(stored.Primary().Endpoint); !strings.Contains(u, ":"+stored.RuntimeToken+"@") {
			t.Fatalf("authorized URL %q lacks the token", u)
		}
		tokens = append(tokens, stored.RuntimeToken)
	}
	if tokens[0] == tokens[1] {
		t.Fatal("two sessions share a runtime token")
	}
}

// A stop (or any reclaim of the sandbox's compute: restart recovery of a session left starting
// by a dead bay does the same) that ends this process's start while the start is still
// discarding the sandbox's old session answers the waiting call 503 session_not_ready
// (retryable), as a stop during the container start does, not 504 timeout.
func TestStopWhileTheStartDiscardsTheOldSession(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	r := e.Create(t, "alice", sandbox.CreateParams{})
	s1, err := e.Svc.EnsureRunning(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.Drv.SetState(s1.Primary().ContainerID, bay.ContainerExited)
	e.Clock.Advance(3 * time.Second) // past the liveness probe's cache
	destroying := make(chan struct{})
	release := make(chan struct{})
	var first atomic.Bool
	e.Drv.FailWhen(fake.MethodDestroyInstance, func(fake.Call) error {
		if first.CompareAndSwap(false, true) {
			close(destroying)
			<-release
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { _, err := e.Svc.EnsureRunning(ctx, r.ID); done <- err }()
	<-destroying // the start found the session dead and is destroying its container
	if err := e.Svc.StopSandbox(ctx, "alice", r.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; code(err) != bay.CodeSessionNotReady {
		t.Fatalf("the call whose start a stop ended: %v, want %s", err, bay.CodeSessionNotReady)
	}
	if _, err := e.Svc.EnsureRunning(ctx, r.ID); err != nil {
		t.Fatalf("the next call: %v", err)
	}
}
