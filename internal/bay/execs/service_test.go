package execs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

// gate is a fake one-shot script: every exec blocks until released, and the order in which
// they started is kept.
type gate struct {
	mu      sync.Mutex
	started []string // the exec's last arg
	release chan struct{}
}

func (g *gate) run(ctx context.Context, c bay.ContainerSpec) (fake.OneShotResult, error) {
	g.mu.Lock()
	g.started = append(g.started, c.Command[len(c.Command)-1])
	g.mu.Unlock()
	select {
	case <-g.release:
		return fake.OneShotResult{Stdout: "ok\n"}, nil
	case <-ctx.Done():
		return fake.OneShotResult{}, ctx.Err()
	}
}

func (g *gate) order() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.started)
}

func newService(t *testing.T, maxConc, queue int, run func(context.Context, bay.ContainerSpec) (fake.OneShotResult, error)) (*Service, *fake.Driver, string) {
	t.Helper()
	store, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), "bay.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	var opts []fake.Option
	if run != nil {
		opts = append(opts, fake.WithOneShot(run))
	}
	drv := fake.New(opts...)
	root := filepath.Join(t.TempDir(), "ws")
	svc := New(store, drv, nil, nil, Config{
		Workspace: Workspace{Paths: WorkspacePaths{Native: root, Mount: root}}, Image: "img",
		MaxConcurrent: maxConc, QueueSize: queue, InstanceID: "bay-test",
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		svc.Stop(ctx)
	})
	return svc, drv, root
}

func shell(project, tag string) Request {
	return Request{ProjectID: project, Kind: "shell", Args: []string{"-lc", tag}}
}

// TestQueueFairBetweenOwners: with one slot, owner a's queued execs do not starve owner b's:
// they start a0, a1, b1, a2, a3 (b1 queued last but served before a's third); the queue's
// bound answers quota_exceeded with retry_after_ms.
func TestQueueFairBetweenOwners(t *testing.T) {
	g := &gate{release: make(chan struct{})}
	svc, _, _ := newService(t, 1, 4, g.run)
	ctx := t.Context()
	var ids []string
	for _, c := range []struct{ owner, tag string }{{"a", "a0"}, {"a", "a1"}, {"a", "a2"}, {"a", "a3"}, {"b", "b1"}} {
		rec, err := svc.Create(ctx, c.owner, shell("p", c.tag))
		if err != nil {
			t.Fatalf("create %s: %v", c.tag, err)
		}
		ids = append(ids, rec.ID)
	}
	_, err := svc.Create(ctx, "c", shell("p", "c1"))
	var e *bay.Error
	if !errors.As(err, &e) || e.Code != bay.CodeQuotaExceeded || e.Details["retry_after_ms"].(int) <= 0 {
		t.Fatalf("the sixth exec: %v, want quota_exceeded with retry_after_ms", err)
	}
	for range 5 {
		g.release <- struct{}{}
	}
	waitFinal(t, svc, "a", ids[3])
	waitFinal(t, svc, "b", ids[4])
	// a0 took the slot at once; a1, a2, a3 and b1 queued; the ring then serves a1, b1, a2, a3.
	if got, want := g.order(), []string{"a0", "a1", "b1", "a2", "a3"}; !slices.Equal(got, want) {
		t.Fatalf("start order %v, want %v", got, want)
	}
}

func waitFinal(t *testing.T, svc *Service, owner, id string) *bay.ExecRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := svc.Get(t.Context(), owner, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status.Final() {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("exec %s still %s", id, rec.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestOwnerScoped: another owner gets not_found for get, cancel, artifacts and downloads, and
// an empty list.
func TestOwnerScoped(t *testing.T) {
	svc, _, _ := newService(t, 2, 4, nil)
	ctx := t.Context()
	req := shell("p", "x")
	req.Wait = true
	rec, err := svc.Create(ctx, "alice", req)
	if err != nil || rec.Status != bay.ExecSucceeded {
		t.Fatalf("create: %+v, %v", rec, err)
	}
	if _, err := svc.Get(ctx, "bob", rec.ID); !bay.IsNotFound(err) {
		t.Errorf("get: %v", err)
	}
	if _, err := svc.Cancel(ctx, "bob", rec.ID); !bay.IsNotFound(err) {
		t.Errorf("cancel: %v", err)
	}
	if _, _, err := svc.Artifacts(ctx, "bob", rec.ID); !bay.IsNotFound(err) {
		t.Errorf("artifacts: %v", err)
	}
	if _, err := svc.OpenArtifact(ctx, "bob", rec.ID, StdoutFile); !bay.IsNotFound(err) {
		t.Errorf("download: %v", err)
	}
	if list, total, err := svc.List(ctx, "bob", bay.ExecQuery{}); err != nil || total != 0 || len(list) != 0 {
		t.Errorf("list: %v %d %v", list, total, err)
	}
	f, err := svc.OpenArtifact(ctx, "alice", rec.ID, StdoutFile)
	if err != nil {
		t.Fatalf("owner's download: %v", err)
	}
	f.File.Close()
}

// TestRefusalsWriteNothing: policy, path, size and shape refusals leave no record, no
// directory and no container.
func TestRefusalsWriteNothing(t *testing.T) {
	svc, drv, root := newService(t, 2, 4, nil)
	big := int64(10)
	cases := map[string]Request{
		"escalation":  {ProjectID: "p", Kind: "shell", Overrides: bay.PolicyOverrides{Pids: ptr(int64(100000))}},
		"traversal":   {ProjectID: "p", Kind: "shell", Inputs: []RawInput{{Path: "../../etc/x"}}},
		"nul":         {ProjectID: "p", Kind: "shell", Inputs: []RawInput{{Path: "a\x00"}}},
		"too big":     {ProjectID: "p", Kind: "shell", Overrides: bay.PolicyOverrides{MaxInputBytes: &big}, Inputs: []RawInput{{Path: "a", Content: make([]byte, 11)}}},
		"file as dir": {ProjectID: "p", Kind: "shell", Inputs: []RawInput{{Path: "a/b"}, {Path: "a"}}},
		"duplicate":   {ProjectID: "p", Kind: "shell", Inputs: []RawInput{{Path: "a"}, {Path: "./a"}}},
		"project":     {ProjectID: "..", Kind: "shell"},
		"kind":        {ProjectID: "p", Kind: "python", Command: "bash"},
		"cwd":         {ProjectID: "p", Kind: "shell", Cwd: "/workspace/work/../../etc"},
		"network":     {ProjectID: "p", Kind: "shell", Overrides: bay.PolicyOverrides{NetMode: ptr(bay.NetOpen)}},
	}
	for name, req := range cases {
		if _, err := svc.Create(t.Context(), "alice", req); err == nil || bay.ErrorCode(err) == bay.CodeInternal {
			t.Errorf("%s: %v, want a classified refusal", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "projects")); !os.IsNotExist(err) {
		t.Errorf("a refusal wrote the workspace: %v", err)
	}
	if _, total, _ := svc.List(t.Context(), "alice", bay.ExecQuery{}); total != 0 {
		t.Errorf("%d records after refusals", total)
	}
	if n := drv.CallCount(fake.MethodCreateInstance); n != 0 {
		t.Errorf("%d containers created after refusals", n)
	}
}

func ptr[T any](v T) *T { return &v }

// TestCappedWriter: the first max bytes are kept, whatever the write sizes; truncated is set
// only past the cap; the writer never fails the process's output.
func TestCappedWriter(t *testing.T) {
	for _, c := range []struct {
		writes []string
		max    int64
		want   string
		trunc  bool
	}{
		{[]string{"abc"}, 3, "abc", false},
		{[]string{"ab", "c"}, 3, "abc", false},
		{[]string{"abcd"}, 3, "abc", true},
		{[]string{"ab", "cd", "ef"}, 3, "abc", true},
		{[]string{"", "a"}, 0, "", true},
	} {
		var b strings.Builder
		w := &cappedWriter{w: &b, max: c.max}
		for _, s := range c.writes {
			if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", s, n, err)
			}
		}
		if b.String() != c.want || w.truncated != c.trunc {
			t.Errorf("%v cap %d: kept %q truncated %v, want %q %v", c.writes, c.max, b.String(), w.truncated, c.want, c.trunc)
		}
	}
}

// TestCleanInputPath: attacks refused, harmless forms normalised.
func TestCleanInputPath(t *testing.T) {
	ok := map[string]string{"a.txt": "a.txt", "d/e.txt": "d/e.txt", "./d//e.txt": "d/e.txt", "d/./e": "d/e"}
	for in, want := range ok {
		if got, err := CleanInputPath(in); err != nil || got != want {
			t.Errorf("CleanInputPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", ".", "..", "../a", "a/../b", "a/..", "/etc/passwd", "C:\\x", "c:/x", "a\\b", "a\x00b", strings.Repeat("x", 513), strings.Repeat("d/", 33) + "f"} {
		if got, err := CleanInputPath(bad); err == nil {
			t.Errorf("CleanInputPath(%q) = %q, want an error", bad, got)
		}
	}
}

// TestReconcile: after a restart, a queued record is queued again and runs (several in the
// order they were admitted), a queued one naming env variables ends lost (their values are
// never stored), a queued one whose container exists after all is waited for; a running one
// whose container is gone ends lost, one whose container is still there is waited for and
// succeeds; another bay's record is left alone; a container whose exec is over is removed.
func TestReconcile(t *testing.T) {
	g := &gate{release: make(chan struct{})}
	svc, drv, _ := newService(t, 1, 0, g.run)
	ctx := t.Context()
	admitted := time.Now().UTC()
	mk := func(id string, status bay.ExecStatus, bayInstance string, envKeys ...string) *bay.ExecRecord {
		admitted = admitted.Add(time.Second)
		rec := &bay.ExecRecord{ID: id, Owner: "alice", ProjectID: "p", Image: "img", Kind: "shell", Cmd: "bash",
			Args: []string{id}, EnvKeys: append([]string{}, envKeys...), Policy: bay.DefaultExecPolicy(), Status: status,
			ArtifactsPath: ArtifactsDir("alice", "p", id), Instance: bay.ExecInstancePrefix + id, BayInstance: bayInstance, CreatedAt: admitted}
		if status != bay.ExecQueued {
			started := admitted
			rec.StartedAt = &started
		}
		if err := svc.cfg.Workspace.Prepare("alice", "p", id, InputsDir("alice", "p", id, false), nil); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	insert := func(recs ...*bay.ExecRecord) {
		for _, rec := range recs {
			if err := svc.store.Tx(ctx, func(tx bay.Tx) error { return tx.InsertExecRecord(ctx, rec) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	alive := mk("e-alive", bay.ExecRunning, "bay-test")
	created := mk("e-created", bay.ExecQueued, "bay-test") // bay died between create and record
	queued1 := mk("e-queued1", bay.ExecQueued, "bay-test")
	withEnv := mk("e-env", bay.ExecQueued, "bay-test", "TOKEN")
	queued2 := mk("e-queued2", bay.ExecQueued, "bay-test")
	vanished := mk("e-vanished", bay.ExecRunning, "bay-test")
	other := mk("e-other", bay.ExecRunning, "another-bay")
	over := mk("e-over", bay.ExecSucceeded, "bay-test")
	// Inserted newest first: the queue order must come from the admission times.
	insert(over, other, vanished, queued2, withEnv, queued1, created, alive)
	for _, rec := range []*bay.ExecRecord{alive, created, over} {
		if _, err := drv.CreateInstance(ctx, svc.instanceSpec(rec, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := waitFinal(t, svc, "alice", withEnv.ID); got.Status != bay.ExecLost || got.StartedAt != nil {
		t.Errorf("queued exec with env: %s (started %v), want lost, never started", got.Status, got.StartedAt)
	}
	go func() { // every run may end, the re-attached ones' included
		for {
			select {
			case g.release <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	for id, want := range map[string]bay.ExecStatus{queued1.ID: bay.ExecSucceeded, queued2.ID: bay.ExecSucceeded,
		vanished.ID: bay.ExecLost, alive.ID: bay.ExecSucceeded, created.ID: bay.ExecSucceeded} {
		if got := waitFinal(t, svc, "alice", id); got.Status != want || got.EndedAt == nil {
			t.Errorf("%s: %s (ended %v, %s), want %s", id, got.Status, got.EndedAt, got.ErrorReason, want)
		}
	}
	// The queued ones ran once each, in admission order; the re-attached ones were not created again.
	runs := slices.DeleteFunc(g.order(), func(id string) bool { return id == alive.ID || id == created.ID || id == over.ID })
	if got, want := runs, []string{queued1.ID, queued2.ID}; !slices.Equal(got, want) {
		t.Errorf("runs after the restart %v, want %v", got, want)
	}
	if n := drv.CallCount(fake.MethodCreateInstance); n != 5 {
		t.Errorf("%d containers created, want the 3 made before the restart and one per queued exec", n)
	}
	if got, _ := svc.Get(ctx, "alice", other.ID); got.Status != bay.ExecRunning {
		t.Errorf("another bay's exec was touched: %s", got.Status)
	}
	if slices.Contains(drv.Instances(), over.Instance) {
		t.Errorf("the container of a finished exec was left: %v", drv.Instances())
	}
}

// failingStore refuses every write transaction.
type failingStore struct{ bay.Store }

func (failingStore) Tx(context.Context, func(bay.Tx) error) error {
	return errors.New("disk full")
}

// TestAdmissionRollsBack: when the audit record cannot be written, Create fails, the exec's
// directories are removed, no container is made and the queue place is given back.
func TestAdmissionRollsBack(t *testing.T) {
	svc, drv, root := newService(t, 1, 1, nil)
	svc.store = failingStore{svc.store}
	for range 3 { // more than the one slot and one queue place: each failure gives its place back
		if _, err := svc.Create(t.Context(), "alice", shell("p", "x")); err == nil || bay.ErrorCode(err) == bay.CodeQuotaExceeded {
			t.Fatalf("Create with a failing store: %v, want the store's error", err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(root, ProjectDir("alice", "p"), "artifacts"))
	if err != nil || len(entries) != 0 {
		t.Fatalf("artifact directories left: %v, %v", entries, err)
	}
	if n := drv.CallCount(fake.MethodCreateInstance); n != 0 {
		t.Fatalf("%d containers created", n)
	}
}
