package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay/gc"
	"github.com/shipyard-dev/shipyard/internal/testenv"
	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
)

// A bay that never comes back, with execs open: bays A and B share one PostgreSQL and one exec
// workspace; A runs two execs and has two queued (one naming env variables) when it is
// SIGKILLed, and its instance id is not used again. One of its running execs' container is
// removed behind its back. While A's heartbeat is fresh B adopts nothing; once it lapsed
// (gc.DeadInstanceFloor with a one-second grace), B's adoption pass (every second here) takes
// every open exec of A: the running one is waited for and succeeds with its output and
// artifact, the one whose container vanished ends lost naming A, the queued one runs on B and
// the one with env ends lost. No exec record stays open and no exec container is left.
func TestMultiBayAdoptsExecsOfGoneBay(t *testing.T) {
	cli, err := testenv.EngineClient(context.Background(), execImage)
	if err != nil {
		t.Fatalf("the exec tests need the Docker engine and %s: %v", execImage, err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	ws := filepath.Join(t.TempDir(), "ws")
	id := func(s string) string { return fmt.Sprintf("e2e-execadopt-%d-%s", os.Getpid(), s) }
	opts := func(name string) bayOptions {
		return bayOptions{databaseURL: dbURL, instanceID: id(name),
			env:         []string{"BAY_GC__ORPHAN_CONTAINER__GRACE_SECONDS=1", "BAY_EXECS__ADOPT_INTERVAL_SECONDS=1"},
			extraConfig: fmt.Sprintf("execs:\n  workspace_root: %q\n  image: %q\n  max_concurrent_execs: 2\n  queue_size: 4\n", ws, execImage)}
	}
	a := startBay(t, opts("a"))
	b := startBay(t, opts("b"))
	t.Cleanup(func() { execLeftovers(t, cli) })
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	byBay := func(exec string) string {
		t.Helper()
		var raw string
		if err := db.QueryRow(ctx, `SELECT record::text FROM sandbox_execs WHERE id = $1`, exec).Scan(&raw); err != nil {
			t.Fatalf("read exec %s: %v", exec, err)
		}
		var rec struct {
			BayInstance string `json:"bay_instance"`
		}
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			t.Fatalf("decode exec %s: %v", exec, err)
		}
		return rec.BayInstance
	}

	nowait := map[string]any{"wait": false}
	// Long enough to outlive A's heartbeat by far: B re-attaches to it while it runs.
	keep := expect(t, a.do("POST", "/v1/sandbox/execs", shellExec("adopt", "sleep 30; echo finished; echo art > /workspace/artifacts/x", nowait), nil), 202, "kept").Str("exec_id")
	vanish := expect(t, a.do("POST", "/v1/sandbox/execs", shellExec("adopt", "sleep 300", nowait), nil), 202, "vanishing").Str("exec_id")
	for _, e := range []string{keep, vanish} {
		a.waitExec(e, 30*time.Second, "running")
		waitContainerRunning(t, cli, "bay-exec-"+e)
	}
	queued := expect(t, a.do("POST", "/v1/sandbox/execs", shellExec("adopt", "echo again", nowait), nil), 202, "queued")
	withEnv := shellExec("adopt", "echo $TOKEN", nowait)
	withEnv["exec"].(map[string]any)["env"] = map[string]string{"TOKEN": "secret"}
	env := expect(t, a.do("POST", "/v1/sandbox/execs", withEnv, nil), 202, "queued with env")
	if queued.Str("status") != "queued" || env.Str("status") != "queued" {
		t.Fatalf("execs behind two running ones: %s; %s", queued, env)
	}

	a.kill()
	killed := time.Now()
	name := "bay-exec-" + vanish
	if _, err := cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatalf("remove %s behind bay's back: %v", name, err)
	}
	// A's heartbeat is fresh: B leaves its execs alone.
	time.Sleep(3 * time.Second)
	for _, e := range []string{keep, vanish, queued.Str("exec_id"), env.Str("exec_id")} {
		if got := byBay(e); got != a.InstanceID {
			t.Fatalf("exec %s was adopted by %s %v after A's kill, before its heartbeat lapsed", e, got, time.Since(killed))
		}
	}
	if r := b.do("GET", "/v1/sandbox/execs/"+keep, nil, nil); r.Str("status") != "running" {
		t.Fatalf("A's running exec through B before the adoption: %s", r)
	}

	deadline := time.Now().Add(gc.DeadInstanceFloor + 60*time.Second)
	for byBay(keep) != b.InstanceID {
		if time.Now().After(deadline) {
			t.Fatalf("B did not adopt A's running exec within %v of the kill", time.Since(killed))
		}
		time.Sleep(100 * time.Millisecond)
	}
	adopted := time.Since(killed)
	ins, err := cli.ContainerInspect(ctx, "bay-exec-"+keep, client.ContainerInspectOptions{})
	running := err == nil && ins.Container.State != nil && ins.Container.State.Running
	r := b.waitExec(keep, 60*time.Second, "succeeded", "failed", "lost", "timed_out")
	finished := time.Since(killed)
	out, _ := os.ReadFile(filepath.Join(ws, r.Str("stdout_path")))
	if r.Str("status") != "succeeded" || string(out) != "finished\n" {
		t.Fatalf("A's running exec adopted by B: %s (stdout %q)", r, out)
	}
	m := expect(t, b.do("GET", "/v1/sandbox/execs/"+keep+"/artifacts", nil, nil), 200, "artifacts")
	if fs, _ := m.Get("files").([]any); len(fs) != 1 {
		t.Fatalf("adopted exec's artifacts: %s", m)
	}
	if g := b.waitExec(vanish, 30*time.Second, "lost"); !strings.Contains(g.Str("error_reason"), "bay instance "+a.InstanceID+" went away") || g.Get("ended_at") == nil {
		t.Fatalf("exec whose container vanished: %s", g)
	}
	q := b.waitExec(queued.Str("exec_id"), 60*time.Second, "succeeded", "failed", "lost", "timed_out")
	out, _ = os.ReadFile(filepath.Join(ws, q.Str("stdout_path")))
	if q.Str("status") != "succeeded" || string(out) != "again\n" || q.Get("started_at") == nil {
		t.Fatalf("A's queued exec run by B: %s (stdout %q)", q, out)
	}
	if e := b.waitExec(env.Str("exec_id"), 30*time.Second, "lost"); !strings.Contains(e.Str("error_reason"), "env") || e.Get("started_at") != nil {
		t.Fatalf("A's queued exec with env: %s", e)
	}
	for _, e := range []string{keep, vanish, queued.Str("exec_id"), env.Str("exec_id")} {
		if got := byBay(e); got != b.InstanceID {
			t.Errorf("exec %s names %s, want B (%s)", e, got, b.InstanceID)
		}
	}
	for _, status := range []string{"queued", "running"} {
		if l := expect(t, b.do("GET", "/v1/sandbox/execs?status="+status, nil, nil), 200, "list"); l.Get("total") != float64(0) {
			t.Fatalf("records still %s: %s", status, l)
		}
	}
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "bay.instance_id="+a.InstanceID)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 0 {
		t.Fatalf("%d containers of A left", len(res.Items))
	}
	b.waitLog(t, "adopting the open execs of a gone bay", 1, time.Second)
	t.Logf("A killed; B adopted its running exec %v later (its container running then: %v), which finished %v after the kill",
		adopted.Round(time.Millisecond), running, finished.Round(time.Millisecond))
}
