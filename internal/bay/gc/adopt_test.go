package gc_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/gc"
	"github.com/shipyard-dev/shipyard/internal/bay/postgres"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// bothStores runs fn on a fresh SQLite store and on a fresh database of the test PostgreSQL.
func bothStores(t *testing.T, fn func(t *testing.T, st bay.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), "bay.db"), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(t.Context(), postgres.Options{URL: pgtest.NewDatabase(t), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}

// A bay instance of this deployment whose heartbeat lapsed left instances and a volume: a GC
// pass on a live bay removes those no live session row refers to, and nothing of a live bay,
// of a bay whose heartbeat is recent, of another deployment, of an unlabelled or unknown bay,
// or younger than the grace period. Heartbeat rows of bays gone for a week that label nothing
// are forgotten.
func TestAdoptOrphansOfGoneInstances(t *testing.T) {
	bothStores(t, func(t *testing.T, st bay.Store) {
		e := newEnvOn(t, st)
		ctx := e.ctx
		grace := 5 * time.Minute
		now := time.Now().UTC().Truncate(time.Microsecond)
		deployment, err := st.DeploymentID(ctx)
		if err != nil || len(deployment) != 32 {
			t.Fatalf("deployment id %q: %v", deployment, err)
		}
		if again, _ := st.DeploymentID(ctx); again != deployment {
			t.Fatalf("deployment id changed: %q then %q", deployment, again)
		}
		beat := func(id string, at time.Time) {
			t.Helper()
			if err := st.Tx(ctx, func(tx bay.Tx) error { return tx.HeartbeatBayInstance(ctx, id, id+"/boot", at) }); err != nil {
				t.Fatal(err)
			}
		}
		beat(instance, now)                             // this bay
		beat("bay-live", now.Add(-3*time.Second))       // another bay, alive
		beat("bay-gone", now.Add(-10*time.Minute))      // killed ten minutes ago
		beat("bay-recent", now.Add(-grace+time.Second)) // silent for just under the grace period
		beat("bay-ancient", now.Add(-8*24*time.Hour))   // gone for a week, nothing left

		old := now.Add(-10 * time.Minute).Format(time.RFC3339Nano)
		mk := func(bayID, dep, created string) (string, string) {
			sess := bay.NewID(bay.PrefixSession)
			labels := map[string]string{bay.LabelSessionID: sess, bay.LabelSandboxID: "sandbox-x", bay.LabelCargoID: "ws-x",
				bay.LabelInstanceID: bayID, bay.LabelManaged: "true", bay.LabelCreatedAt: created}
			if dep != "" {
				labels[bay.LabelDeployment] = dep
			}
			return sess, e.instance(bay.InstanceName(sess), "", labels)
		}
		_, goneOrphan := mk("bay-gone", deployment, old)
		goneFailedSess, goneFailed := mk("bay-gone", deployment, old)
		goneRunningSess, goneRunning := mk("bay-gone", deployment, old)
		_, goneYoung := mk("bay-gone", deployment, now.Add(-time.Minute).Format(time.RFC3339Nano))
		_, liveOrphan := mk("bay-live", deployment, old)
		_, recentOrphan := mk("bay-recent", deployment, old)
		_, otherDeployment := mk("bay-gone", "0123456789abcdef0123456789abcdef", old)
		_, unlabelled := mk("bay-gone", "", old)
		_, unknownBay := mk("bay-never-heard-of", deployment, old)
		host := e.seed(sandboxOpts{}) // the sandbox of the gone bay's session rows
		for sess, state := range map[string]bay.SessionState{goneFailedSess: bay.SessionFailed, goneRunningSess: bay.SessionRunning} {
			err := st.Tx(ctx, func(tx bay.Tx) error {
				return tx.InsertSession(ctx, &bay.Session{ID: sess, SandboxID: host.sb.ID, ProfileID: "python-default",
					DesiredState: bay.SessionRunning, ObservedState: state, InstanceID: "bay-gone/boot", CreatedAt: now.Add(-10 * time.Minute)})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		vol := func(bayID, cargoID string) string {
			t.Helper()
			ref, err := e.drv.CreateVolume(ctx, bay.VolumeSpec{Name: bay.VolumeName(cargoID), Labels: map[string]string{
				bay.LabelManaged: "true", bay.LabelCargoID: cargoID, bay.LabelInstanceID: bayID, bay.LabelDeployment: deployment,
				bay.LabelCreatedAt: old}})
			if err != nil {
				t.Fatal(err)
			}
			return ref
		}
		goneVolume, liveVolume := vol("bay-gone", "ws-gone"), vol("bay-live", "ws-live")

		s := gc.New(st, e.drv, e.lc, fixedClock{now}, nil, func() gc.Config {
			c := gc.DefaultConfig()
			c.InstanceID, c.Deployment, c.OrphanGrace = instance, deployment, grace
			c.Tasks[gc.TaskOrphanContainer] = true
			return c
		}())
		dry := runOnce(t, s, gc.RunOptions{Tasks: []string{gc.TaskOrphanContainer}, DryRun: true})
		if r := result(dry, gc.TaskOrphanContainer); r.CleanedCount != 0 || len(r.WouldClean) != 2 || !e.hasContainer(goneOrphan) {
			t.Fatalf("dry run %+v", r)
		}
		res := runOnce(t, s, gc.RunOptions{Tasks: []string{gc.TaskOrphanContainer, gc.TaskOrphanCargo}})
		if r := result(res, gc.TaskOrphanContainer); r.CleanedCount != 2 {
			t.Fatalf("orphan_container %+v", r)
		}
		if r := result(res, gc.TaskOrphanCargo); r.CleanedCount != 1 {
			t.Fatalf("orphan_cargo %+v", r)
		}
		for name, id := range map[string]string{"unreferenced": goneOrphan, "failed session": goneFailed} {
			if e.hasContainer(id) {
				t.Errorf("gone bay's %s instance not adopted", name)
			}
		}
		if e.hasVolume(goneVolume) {
			t.Error("gone bay's volume without a cargo row not adopted")
		}
		for name, id := range map[string]string{"gone bay's running session": goneRunning, "gone bay's young instance": goneYoung,
			"live bay's orphan": liveOrphan, "recently heard bay's orphan": recentOrphan, "another deployment's": otherDeployment,
			"unlabelled": unlabelled, "unknown bay's": unknownBay} {
			if !e.hasContainer(id) {
				t.Errorf("%s instance removed", name)
			}
		}
		if !e.hasVolume(liveVolume) {
			t.Error("live bay's volume removed")
		}
		rows, err := st.ListBayInstances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		if want := []string{instance, "bay-gone", "bay-live", "bay-recent"}; !slices.Equal(ids, slices.Sorted(slices.Values(want))) {
			t.Fatalf("heartbeat rows after the pass: %v, want %v (bay-ancient forgotten)", ids, want)
		}
	})
}
