package gc_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/gc"
)

// filesDriver is the fake engine with files kept beside instances (as the Docker driver's name
// files under gVisor): stale lists those written before the cutoff it is asked for.
type filesDriver struct {
	*fake.Driver
	written map[string]time.Time
	asked   time.Time
}

func (d *filesDriver) StaleInstanceFiles(_ context.Context, olderThan time.Time) ([]string, error) {
	d.asked = olderThan
	var out []string
	for n, at := range d.written {
		if at.Before(olderThan) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (d *filesDriver) RemoveInstanceFiles(_ context.Context, instance string) error {
	delete(d.written, instance)
	return nil
}

var _ bay.InstanceFileSweeper = (*filesDriver)(nil)

// TestOrphanInstanceFiles: the orphan task asks the driver for the files older than the grace
// period, reports them in a dry run and removes them otherwise.
func TestOrphanInstanceFiles(t *testing.T) {
	e := newEnv(t)
	drv := &filesDriver{Driver: e.drv, written: map[string]time.Time{
		"gone": time.Now().Add(-time.Hour), "young": time.Now(),
	}}
	newSched := func(dry bool) *gc.Scheduler {
		cfg := gc.DefaultConfig()
		cfg.InstanceID = instance
		cfg.Tasks[gc.TaskOrphanContainer] = true
		cfg.OrphanGrace = 5 * time.Minute
		cfg.OrphanContainerDryRun = dry
		return gc.New(e.store, drv, e.lc, nil, nil, cfg)
	}
	r := result(runOnce(t, newSched(true), gc.RunOptions{Tasks: []string{gc.TaskOrphanContainer}}), gc.TaskOrphanContainer)
	if r.CleanedCount != 0 || !slices.Equal(r.WouldClean, []string{"instance-files/gone"}) || len(drv.written) != 2 {
		t.Fatalf("dry run: %+v, files %v", r, drv.written)
	}
	if age := time.Since(drv.asked); age < 5*time.Minute || age > 6*time.Minute {
		t.Errorf("asked for files older than %v ago, want the grace period", age)
	}
	r = result(runOnce(t, newSched(false), gc.RunOptions{Tasks: []string{gc.TaskOrphanContainer}}), gc.TaskOrphanContainer)
	if r.CleanedCount != 1 || len(drv.written) != 1 || drv.written["young"].IsZero() {
		t.Fatalf("run: %+v, files left %v", r, drv.written)
	}
}
