package sandbox_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/runtime"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
)

func withMulti(c *sandbox.Config) {
	c.Profiles = append(c.Profiles, shipAndGull("browser-python", []string{"python", "shell", "filesystem"}, []string{"browser", "filesystem"}))
}

// shipAndGull is a profile of a ship container (the primary, and primary for filesystem) and
// a gull container named browser, with the given capabilities.
func shipAndGull(id string, shipCaps, gullCaps []string) bay.Profile {
	return bay.Profile{
		ID: id, IdleTimeout: 30 * time.Minute,
		Containers: []bay.ContainerProfile{
			{Name: "ship", Image: "ship:test", RuntimeType: "ship", RuntimePort: 8123, Capabilities: shipCaps, PrimaryFor: []string{"filesystem"}},
			{Name: "browser", Image: "gull:test", RuntimeType: "gull", RuntimePort: 8115, Capabilities: gullCaps},
		},
	}
}

// TestMultiContainerSession: a two-container profile gets one instance with both containers
// (the primary first); capabilities route to their container; a dead sidecar rebuilds the
// whole session; stop destroys the instance; a failed create leaves nothing.
func TestMultiContainerSession(t *testing.T) {
	e := newEnv(t, withMulti)
	ctx := context.Background()
	r := e.Create(t, "alice", sandbox.CreateParams{ProfileID: "browser-python"})
	if _, err := e.Caps.ExecShell(ctx, "alice", r.ID, capability.ShellParams{Command: "ls", Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	cs := e.Drv.Containers()
	if len(cs) != 2 || len(e.Drv.Instances()) != 1 {
		t.Fatalf("containers %d instances %v", len(cs), e.Drv.Instances())
	}
	sess, err := e.Svc.EnsureRunning(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Drv.Instances()[0] != bay.InstanceName(sess.ID) {
		t.Fatalf("instance %v", e.Drv.Instances())
	}
	for _, c := range cs {
		if c.Spec.Env["BAY_CONTAINER_NAME"] != c.Spec.Name || c.VolumeRef != bay.VolumeName(r.CargoID) {
			t.Fatalf("container %+v", c)
		}
	}
	if len(sess.Containers) != 2 || sess.Primary().Name != "ship" || sess.Primary().Endpoint == "" ||
		sess.Containers[1].RuntimeType != bay.RuntimeGull || !slices.Equal(sess.Containers[1].Capabilities, []string{"browser", "filesystem"}) {
		t.Fatalf("session %+v", sess)
	}
	got, _ := e.Svc.GetSandbox(ctx, "alice", r.ID)
	if len(got.Containers) != 2 || got.Containers[1].Name != "browser" || got.Containers[1].RuntimeType != "gull" {
		t.Fatalf("get: %+v", got.Containers)
	}

	// A dead sidecar: after the probe cache, the whole session is rebuilt.
	e.Drv.Kill(sess.Containers[1].ContainerID)
	e.Clock.Advance(3 * time.Second)
	s2, err := e.Svc.EnsureRunning(ctx, r.ID)
	if err != nil || s2.ID == sess.ID {
		t.Fatalf("rebuild: %v %v", s2, err)
	}
	if len(e.Drv.Containers()) != 2 || len(e.Drv.Instances()) != 1 {
		t.Fatalf("after rebuild: %d containers, instances %v", len(e.Drv.Containers()), e.Drv.Instances())
	}

	if err := e.Svc.StopSandbox(ctx, "alice", r.ID); err != nil {
		t.Fatal(err)
	}
	if len(e.Drv.Containers()) != 0 || len(e.Drv.Instances()) != 0 {
		t.Fatalf("after stop: %d containers, instances %v", len(e.Drv.Containers()), e.Drv.Instances())
	}

	// The instance cannot be created: nothing is left, the sandbox shows failed.
	e.Drv.Fail(fake.MethodCreateInstance, errors.New("boom"), 1)
	if _, err := e.Svc.EnsureRunning(ctx, r.ID); code(err) != bay.CodeInternal {
		t.Fatalf("start failure: %v", err)
	}
	if len(e.Drv.Containers()) != 0 || len(e.Drv.Instances()) != 0 {
		t.Fatalf("after failure: %d containers, instances %v", len(e.Drv.Containers()), e.Drv.Instances())
	}
	if got, _ := e.Svc.GetSandbox(ctx, "alice", r.ID); got.Status != "failed" {
		t.Fatalf("status %s", got.Status)
	}
}

// A sidecar that never becomes ready fails the start with its name, and leaves nothing.
func TestMultiContainerReadinessNamesTheContainer(t *testing.T) {
	e := newEnv(t, withMulti, func(c *sandbox.Config) { c.ReadinessTimeout = 300 * time.Millisecond })
	ctx := context.Background()
	e.Svc.SetRuntime(bay.RuntimeGull, neverReady{})
	r := e.Create(t, "alice", sandbox.CreateParams{ProfileID: "browser-python"})
	_, err := e.Svc.EnsureRunning(ctx, r.ID)
	var be *bay.Error
	if !errors.As(err, &be) || be.Code != bay.CodeSessionNotReady || be.Message != "Containers not ready: [browser]" {
		t.Fatalf("err = %v", err)
	}
	if len(e.Drv.Containers()) != 0 {
		t.Fatalf("containers left: %d", len(e.Drv.Containers()))
	}
}

// neverReady is a runtime that never answers.
type neverReady struct{}

func (neverReady) Health(context.Context, string) error { return errors.New("not yet") }
func (neverReady) Describe(context.Context, string) (runtime.Meta, error) {
	return runtime.Meta{}, errors.New("not yet")
}
func (neverReady) ForgetEndpoint(string) {}
