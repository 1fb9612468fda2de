package sandbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox/sandboxtest"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

// imageEngine is the fake driver with images that come and go, counting the image checks.
type imageEngine struct {
	*fake.Driver
	mu      sync.Mutex
	present map[string]bool
	checks  int
}

func (d *imageEngine) ImageExists(ctx context.Context, ref string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.checks++
	return d.present[ref], nil
}

func (d *imageEngine) set(ref string, present bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.present[ref] = present
}

func (d *imageEngine) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.checks
}

// A present image is trusted for a while so that a lazy create does not ask the engine each
// time; a missing one is asked again at every create, so that building it takes effect at once.
func TestCreateImageCheckRemembersPresentImagesOnly(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "bay.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	drv := &imageEngine{Driver: fake.New(), present: map[string]bool{}}
	clk := sandboxtest.NewClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	profiles := sandboxtest.Profiles()
	image := profiles[0].Containers[0].Image
	svc := sandbox.New(st, drv, nil, clk, nil, sandbox.Config{Profiles: profiles, InstanceID: "test"})
	create := func() error {
		_, err := svc.CreateSandbox(ctx, "alice", sandbox.CreateParams{ProfileID: profiles[0].ID}, nil)
		return err
	}

	for i := range 2 {
		if err := create(); code(err) != bay.CodeValidation {
			t.Fatalf("create %d with the image missing: %v", i, err)
		}
	}
	if n := drv.count(); n != 2 {
		t.Fatalf("a missing image was checked %d times in 2 creates, want every time", n)
	}

	drv.set(image, true)
	for i := range 3 {
		if err := create(); err != nil {
			t.Fatalf("create %d with the image built: %v", i, err)
		}
	}
	if n := drv.count(); n != 3 {
		t.Fatalf("%d checks after 3 creates with the image present, want 1 more than before", n)
	}

	// Once the remembered answer is old, the engine is asked again and a removal is seen.
	drv.set(image, false)
	clk.Advance(time.Minute)
	if err := create(); code(err) != bay.CodeValidation {
		t.Fatalf("create after the image was removed and the answer aged: %v", err)
	}
	if n := drv.count(); n != 4 {
		t.Fatalf("%d checks, want 4", n)
	}
}

// While bay builds a profile's image itself, a create is no client mistake: it starts on the
// image's stand-in when there is one, and is told to retry (503 with a hint) while there is
// none; once the build ends, sessions start on the image itself.
func TestCreateWhileBayBuildsTheImage(t *testing.T) {
	ctx := context.Background()
	builds := &bay.ImageBuilds{}
	e := sandboxtest.New(t, sandboxtest.Options{Images: []string{"ship:standin"},
		Config: func(c *sandbox.Config) { c.ImageBuilds = builds }})

	// Building, no stand-in yet: 503 unavailable, reason image_building, a retry hint.
	builds.Start("ship:test", "")
	_, err := e.Svc.CreateSandbox(ctx, "alice", sandbox.CreateParams{}, nil)
	var be *bay.Error
	if code(err) != bay.CodeUnavailable || !errors.As(err, &be) || be.Details["reason"] != "image_building" ||
		be.Details["image"] != "ship:test" || be.Details["retry_after_ms"] != 30000 {
		t.Fatalf("create while building without a stand-in: %v", err)
	}

	// With a present stand-in: created, and the session starts on the stand-in.
	builds.Start("ship:test", "ship:standin")
	r := e.Create(t, "alice", sandbox.CreateParams{})
	if _, err := e.Svc.EnsureRunning(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if cs := e.Drv.Containers(); len(cs) != 1 || cs[0].Spec.Image != "ship:standin" {
		t.Fatalf("containers while building: %+v", cs)
	}

	// The build failed: the image is missing like any other (400 with the hint).
	builds.Done("ship:test")
	if _, err := e.Svc.CreateSandbox(ctx, "alice", sandbox.CreateParams{}, nil); code(err) != bay.CodeValidation {
		t.Fatalf("create after a failed build: %v", err)
	}

	// Built: a new session starts on the image itself.
	e.Drv.AddImage("ship:test")
	if err := e.Svc.StopSandbox(ctx, "alice", r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Svc.EnsureRunning(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if cs := e.Drv.Containers(); len(cs) != 1 || cs[0].Spec.Image != "ship:test" {
		t.Fatalf("containers after the build: %+v", cs)
	}
}
