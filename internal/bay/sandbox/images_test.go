package sandbox_test

import (
	"context"
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
