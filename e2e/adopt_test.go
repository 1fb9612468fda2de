package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay/gc"
	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
)

// A replaced replica: bay A (instance id A) starts sessions and is SIGKILLed, never to come
// back under that id; bay C starts with a new instance id on the same PostgreSQL, beside bay B,
// which stays up. Two of A's sessions lost their rows before the kill (what a bay killed
// between a reclaim's transaction and its container removal leaves), so their instances are
// orphans only A's own GC would have collected; one of B's did too. Once A's heartbeat lapsed,
// one orphan_container pass on C removes exactly A's two orphans: A's instance that a session
// row still refers to keeps running (and answers through C), and nothing of B is touched, its
// own orphan included, which B's own pass then removes.
func TestMultiBayAdoptsOrphansOfGoneBay(t *testing.T) {
	cli := docker(t)
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	id := func(s string) string { return fmt.Sprintf("e2e-adopt-%d-%s", os.Getpid(), s) }
	// A one-second grace: another bay then counts as gone after gc.DeadInstanceFloor.
	grace := []string{"BAY_GC__ORPHAN_CONTAINER__GRACE_SECONDS=1"}
	a := startBay(t, bayOptions{databaseURL: dbURL, instanceID: id("a"), env: grace})
	b := startBay(t, bayOptions{databaseURL: dbURL, instanceID: id("b"), env: grace})
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	var deployment string
	if err := db.QueryRow(ctx, `SELECT id FROM deployment`).Scan(&deployment); err != nil {
		t.Fatal(err)
	}

	started := func(bb *Bay, n int) []string {
		var ids []string
		for range n {
			sb := bb.create(map[string]any{}, nil).Str("id")
			bb.shellOK(sb, "echo ready > marker")
			ids = append(ids, sb)
		}
		return ids
	}
	aSandboxes, bSandboxes := started(a, 3), started(b, 2)
	// The session rows of A's first two sandboxes and of B's first go, their instances stay.
	orphan := func(sandbox string) string {
		t.Helper()
		var sess string
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `SELECT current_session_id FROM sandboxes WHERE id = $1`, sandbox).Scan(&sess); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE sandboxes SET current_session_id = NULL, version = version + 1 WHERE id = $1`, sandbox); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DELETE FROM sessions WHERE id = $1`, sess)
			return err
		})
		if err != nil {
			t.Fatalf("orphan the session of %s: %v", sandbox, err)
		}
		return "bay-session-" + sess
	}
	aOrphans := []string{orphan(aSandboxes[0]), orphan(aSandboxes[1])}
	bOrphan := orphan(bSandboxes[0])

	a.kill()
	killed := time.Now()
	c := startBay(t, bayOptions{databaseURL: dbURL, instanceID: id("c"), env: grace})
	// A's sandboxes are deleted through C at cleanup (A is dead).
	a.mu.Lock()
	c.mu.Lock()
	c.created, a.created = append(c.created, a.created...), nil
	c.mu.Unlock()
	a.mu.Unlock()

	before := adoptInstances(t, cli, deployment)
	for _, name := range append(aOrphans, bOrphan) {
		if before[name] == "" {
			t.Fatalf("instance %s is not on the engine with the deployment label (have %v)", name, before)
		}
	}
	// Before A's heartbeat lapsed, C adopts nothing.
	if res := c.gcRun(t, "orphan_container"); res["cleaned_count"] != float64(0) {
		t.Fatalf("C's pass before A's heartbeat lapsed: %v", res)
	}
	var beat time.Time
	if err := db.QueryRow(ctx, `SELECT heartbeat_at FROM bay_instances WHERE id = $1`, a.InstanceID).Scan(&beat); err != nil {
		t.Fatal(err)
	}
	wait := time.Until(beat.Add(gc.DeadInstanceFloor + time.Second))
	t.Logf("A's last heartbeat %v before the kill; waiting %v for it to lapse", killed.Sub(beat).Round(time.Millisecond), wait.Round(time.Millisecond))
	time.Sleep(wait)

	res := c.gcRun(t, "orphan_container")
	if errs, _ := res["errors"].([]any); len(errs) > 0 || res["cleaned_count"] != float64(2) {
		t.Fatalf("C's pass after A's heartbeat lapsed: %v", res)
	}
	after := adoptInstances(t, cli, deployment)
	for _, name := range aOrphans {
		if after[name] != "" {
			t.Errorf("A's orphan %s is still there", name)
		}
	}
	for name, owner := range before {
		if owner == a.InstanceID && !strings.Contains(strings.Join(aOrphans, " "), name) && after[name] == "" {
			t.Errorf("A's instance %s, which a session row refers to, was removed", name)
		}
		if owner == b.InstanceID && after[name] == "" {
			t.Errorf("live B's instance %s was removed", name)
		}
	}
	if out := c.shellOK(aSandboxes[2], "cat marker"); strings.TrimSpace(out) != "ready" {
		t.Fatalf("A's running sandbox through C: %q", out)
	}
	for _, sb := range bSandboxes[1:] {
		if out := b.shellOK(sb, "cat marker"); strings.TrimSpace(out) != "ready" {
			t.Fatalf("B's sandbox %s: %q", sb, out)
		}
	}
	// B's own orphan is B's to collect.
	if res := b.gcRun(t, "orphan_container"); res["cleaned_count"] != float64(1) {
		t.Fatalf("B's own pass: %v", res)
	}
	if left := adoptInstances(t, cli, deployment); left[bOrphan] != "" {
		t.Fatalf("B's orphan %s survived B's pass", bOrphan)
	}
	t.Logf("instances before %d, after C's pass %d; A killed %v before C's pass",
		len(before), len(after), time.Since(killed).Round(time.Millisecond))
}

// adoptInstances maps the names of the engine's session containers of a deployment to their
// bay instance id.
func adoptInstances(t *testing.T, cli *client.Client, deployment string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "bay.managed=true").Add("label", "bay.deployment="+deployment)})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	out := map[string]string{}
	for _, c := range res.Items {
		out[strings.TrimPrefix(c.Names[0], "/")] = c.Labels["bay.instance_id"]
	}
	return out
}
