package sandbox_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/gc"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

// TestSlowContainerRemovalNeverLeaksTheVolume deletes a started sandbox while the engine takes
// long to remove containers (as 50 concurrent deletes made it: more than 5 s). A removal that
// ends within the budget is waited for and the managed cargo (volume and row) goes with it; one
// that does not leaves the cargo row, which the orphan_cargo GC deletes once the engine has
// caught up. Never a volume without a row.
func TestSlowContainerRemovalNeverLeaksTheVolume(t *testing.T) {
	for _, tc := range []struct {
		name        string
		latency     time.Duration
		wantRemoved bool // the delete itself removed the cargo
		wantTook    time.Duration
	}{
		{"slow engine within the budget", 20 * time.Second, true, 20 * time.Second},
		{"engine slower than the budget", 5 * time.Minute, false, 60 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(dir, "bay.db"), Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				drv := fake.New()
				svc := sandbox.New(st, drv, shipclient.New(nil, nil), nil, nil, sandbox.Config{
					Profiles: testProfiles(), InstanceID: "test",
				})
				svc.SetHealthCheck(func(context.Context, string) error { return nil })
				r, err := svc.CreateSandbox(ctx, "alice", sandbox.CreateParams{}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := svc.EnsureRunning(ctx, r.ID); err != nil {
					t.Fatal(err)
				}
				if len(drv.Containers()) != 1 || len(drv.Volumes()) != 1 {
					t.Fatalf("before: %d containers, %d volumes", len(drv.Containers()), len(drv.Volumes()))
				}

				drv.SetLatency(fake.MethodDestroyInstance, tc.latency)
				start := time.Now()
				if err := svc.DeleteSandbox(ctx, "alice", r.ID); err != nil {
					t.Fatal(err)
				}
				if took := time.Since(start); took != tc.wantTook {
					t.Fatalf("delete took %v, want %v", took, tc.wantTook)
				}
				_, rowErr := st.GetCargo(ctx, r.CargoID)
				if tc.wantRemoved {
					if len(drv.Containers()) != 0 || len(drv.Volumes()) != 0 || !bay.IsNotFound(rowErr) {
						t.Fatalf("after: %d containers, %d volumes, cargo row: %v", len(drv.Containers()), len(drv.Volumes()), rowErr)
					}
					return
				}
				// Given up on: the volume is still in use, so it and its row are kept.
				if len(drv.Volumes()) != 1 || rowErr != nil {
					t.Fatalf("after: %d volumes, cargo row: %v", len(drv.Volumes()), rowErr)
				}
				// The engine finishes the removal later; the orphan_cargo GC then finds the row.
				for _, c := range drv.Containers() {
					drv.Vanish(c.ID)
				}
				drv.SetLatency(fake.MethodDestroyInstance, 0)
				sched := gc.New(st, drv, svc, nil, slog.New(slog.DiscardHandler), gc.Config{InstanceID: "test"})
				res, err := sched.RunOnce(ctx, gc.RunOptions{Tasks: []string{gc.TaskOrphanCargo}})
				if err != nil || res.TotalErrors != 0 {
					t.Fatalf("gc: %+v %v", res, err)
				}
				if _, err := st.GetCargo(ctx, r.CargoID); !bay.IsNotFound(err) || len(drv.Volumes()) != 0 {
					t.Fatalf("after gc: %d volumes, cargo row: %v", len(drv.Volumes()), err)
				}
			})
		})
	}
}
