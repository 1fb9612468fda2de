package execs

import (
	"context"
	"errors"
	"fmt"
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

// deployment is a database shared by bay instances: one SQLite store, one fake engine, one
// workspace root (bays sharing a database share execs.workspace_root).
type deployment struct {
	t     *testing.T
	store bay.Store
	drv   *fake.Driver
	root  string
	id    string // the database's deployment id
	g     *gate
	clock *shiftedClock // every bay's
	path  string        // the SQLite file
}

// openStore opens the SQLite file at path, closed at cleanup.
func openStore(t *testing.T, path string) bay.Store {
	t.Helper()
	store, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// shiftedClock is the real clock moved forward by advance, so that a bay's heartbeat ages
// without waiting (heartbeats never move back).
type shiftedClock struct {
	mu    sync.Mutex
	shift time.Duration
}

func (c *shiftedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().UTC().Add(c.shift)
}

func (c *shiftedClock) advance(d time.Duration) {
	c.mu.Lock()
	c.shift += d
	c.mu.Unlock()
}

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bay.db")
	store := openStore(t, path)
	id, err := store.DeploymentID(t.Context())
	if err != nil || id == "" {
		t.Fatalf("deployment id %q: %v", id, err)
	}
	g := &gate{release: make(chan struct{})}
	return &deployment{t: t, store: store, drv: fake.New(fake.WithOneShot(g.run)), root: filepath.Join(t.TempDir(), "ws"), id: id, g: g,
		clock: &shiftedClock{}, path: path}
}

// bay returns the exec service of bay instance id on the deployment (adopting after 30 s of
// silence), stopped at cleanup.
func (d *deployment) bay(id string) *Service { return d.bayOn(d.store, id) }

// bayOn is bay on store, a store of the deployment's database.
func (d *deployment) bayOn(store bay.Store, id string) *Service {
	svc := New(store, d.drv, d.clock, nil, Config{
		Workspace: Workspace{Paths: WorkspacePaths{Native: d.root, Mount: d.root}}, Image: "img",
		MaxConcurrent: 4, QueueSize: 16, InstanceID: id, Deployment: d.id, GoneAfter: 30 * time.Second,
		AdoptInterval: 20 * time.Millisecond,
	})
	d.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		svc.Stop(ctx)
	})
	return svc
}

// beat writes the heartbeats of bay instances ids as of now.
func (d *deployment) beat(ids ...string) {
	d.t.Helper()
	ctx := d.t.Context()
	for _, id := range ids {
		if err := d.store.Tx(ctx, func(tx bay.Tx) error {
			return tx.HeartbeatBayInstance(ctx, id, id+"/boot", d.clock.Now())
		}); err != nil {
			d.t.Fatal(err)
		}
	}
}

// exec writes an open (or, with status, any) record of bay instance by, its workspace unless
// elsewhere (admitted by a bay whose workspace root is another directory), and, with running,
// its container as by made it.
func (d *deployment) exec(by *Service, id string, status bay.ExecStatus, container, elsewhere bool, envKeys ...string) *bay.ExecRecord {
	d.t.Helper()
	ctx := d.t.Context()
	now := d.clock.Now()
	rec := &bay.ExecRecord{ID: id, Owner: "alice", ProjectID: "p", Image: "img", Kind: "shell", Cmd: "bash",
		Args: []string{id}, EnvKeys: append([]string{}, envKeys...), Policy: bay.DefaultExecPolicy(), Status: status,
		ArtifactsPath: ArtifactsDir("alice", "p", id), Instance: bay.ExecInstancePrefix + id, BayInstance: by.cfg.InstanceID,
		CreatedAt: now}
	if status != bay.ExecQueued {
		rec.StartedAt = &now
	}
	if !elsewhere {
		if err := by.cfg.Workspace.Prepare("alice", "p", id, InputsDir("alice", "p", id, false), nil); err != nil {
			d.t.Fatal(err)
		}
	}
	if err := d.store.Tx(ctx, func(tx bay.Tx) error { return tx.InsertExecRecord(ctx, rec) }); err != nil {
		d.t.Fatal(err)
	}
	if container {
		if _, err := d.drv.CreateInstance(ctx, by.instanceSpec(rec, nil)); err != nil {
			d.t.Fatal(err)
		}
	}
	return rec
}

// releaseAll lets every run, present and future, end with exit 0.
func (d *deployment) releaseAll() {
	ctx := d.t.Context()
	go func() {
		for {
			select {
			case d.g.release <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
}

func (d *deployment) get(id string) *bay.ExecRecord {
	d.t.Helper()
	rec, err := d.store.GetExecRecord(d.t.Context(), id)
	if err != nil {
		d.t.Fatal(err)
	}
	return rec
}

// TestAdoptGoneBay: bay "gone" stopped renewing its heartbeat with execs open; bay "live" of
// the same database renews its own. Bay "adopter" adopts every open exec of gone and none of
// live: gone's running exec whose container is still there is waited for and succeeds, one
// whose container exists but whose start was never recorded too, its queued exec is queued
// again here and runs, one naming env variables and a running one whose container vanished end
// lost naming gone, one whose files are in another workspace ends lost and its container is
// removed; gone's containers of a finished exec and of an unknown one are removed. Live's
// execs and containers, and a container of another deployment labelled with gone's id, are
// left alone.
func TestAdoptGoneBay(t *testing.T) {
	d := newDeployment(t)
	ctx := t.Context()
	gone, live, adopter := d.bay("bay-gone"), d.bay("bay-live"), d.bay("bay-adopter")
	d.beat("bay-gone", "bay-live", "bay-adopter")
	d.clock.advance(time.Hour)
	d.beat("bay-live", "bay-adopter") // gone's heartbeat is an hour old

	alive := d.exec(gone, "e-alive", bay.ExecRunning, true, false)
	created := d.exec(gone, "e-created", bay.ExecQueued, true, false) // gone died between create and record
	queued := d.exec(gone, "e-queued", bay.ExecQueued, false, false)
	withEnv := d.exec(gone, "e-env", bay.ExecQueued, false, false, "TOKEN")
	vanished := d.exec(gone, "e-vanished", bay.ExecRunning, false, false)
	elsewhere := d.exec(gone, "e-elsewhere", bay.ExecRunning, true, true)
	over := d.exec(gone, "e-over", bay.ExecSucceeded, true, false)
	unknown := d.exec(gone, "e-unknown", bay.ExecSucceeded, false, false)
	if _, err := d.drv.CreateInstance(ctx, gone.instanceSpec(&bay.ExecRecord{ID: "e-norecord", Instance: bay.ExecInstancePrefix + "e-norecord",
		Image: "img", Cmd: "bash", Policy: bay.DefaultExecPolicy()}, nil)); err != nil {
		t.Fatal(err)
	}
	liveRun := d.exec(live, "e-live-run", bay.ExecRunning, true, false)
	liveQueued := d.exec(live, "e-live-queued", bay.ExecQueued, false, false)
	// A bay of another database on the same engine, with an instance id like gone's.
	other := New(d.store, d.drv, nil, nil, Config{Image: "img", InstanceID: "bay-gone", Deployment: "another-deployment",
		Workspace: Workspace{Paths: WorkspacePaths{Native: d.root, Mount: d.root}}})
	otherSpec := other.instanceSpec(&bay.ExecRecord{ID: "e-other", Instance: bay.ExecInstancePrefix + "e-other", Image: "img",
		Cmd: "bash", Policy: bay.DefaultExecPolicy()}, nil)
	if _, err := d.drv.CreateInstance(ctx, otherSpec); err != nil {
		t.Fatal(err)
	}
	_ = unknown

	if err := adopter.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	d.releaseAll()
	for id, want := range map[string]bay.ExecStatus{alive.ID: bay.ExecSucceeded, created.ID: bay.ExecSucceeded,
		queued.ID: bay.ExecSucceeded, withEnv.ID: bay.ExecLost, vanished.ID: bay.ExecLost, elsewhere.ID: bay.ExecLost} {
		got := waitFinal(t, adopter, "alice", id)
		if got.Status != want || got.EndedAt == nil || got.BayInstance != "bay-adopter" {
			t.Errorf("%s: %s by %s (ended %v, %q), want %s by bay-adopter", id, got.Status, got.BayInstance, got.EndedAt, got.ErrorReason, want)
		}
		if want == bay.ExecLost && !strings.Contains(got.ErrorReason, "bay instance bay-gone went away") {
			t.Errorf("%s: reason %q does not name the gone bay", id, got.ErrorReason)
		}
	}
	if got := d.get(withEnv.ID); !strings.Contains(got.ErrorReason, "env values") || got.StartedAt != nil {
		t.Errorf("queued exec with env: %q (started %v)", got.ErrorReason, got.StartedAt)
	}
	if got := d.get(elsewhere.ID); !strings.Contains(got.ErrorReason, "execs.workspace_root") {
		t.Errorf("exec of another workspace: %q", got.ErrorReason)
	}
	if got := d.get(created.ID); got.StartedAt == nil {
		t.Errorf("created exec adopted without a start time")
	}
	// Only the queued exec ran anew; the ones with a container were re-attached, not created.
	runs := slices.DeleteFunc(d.g.order(), func(id string) bool { return id == alive.ID || id == created.ID })
	if !slices.Equal(runs, []string{queued.ID}) {
		t.Errorf("runs after the adoption %v, want [%s]", runs, queued.ID)
	}
	left := d.drv.Instances()
	for _, name := range []string{elsewhere.Instance, over.Instance, bay.ExecInstancePrefix + "e-norecord", alive.Instance, created.Instance} {
		if slices.Contains(left, name) {
			t.Errorf("container %s left: %v", name, left)
		}
	}
	for _, name := range []string{liveRun.Instance, otherSpec.Name} {
		if !slices.Contains(left, name) {
			t.Errorf("container %s of a live bay or another deployment was removed: %v", name, left)
		}
	}
	for _, rec := range []*bay.ExecRecord{liveRun, liveQueued} {
		if got := d.get(rec.ID); got.Status != rec.Status || got.BayInstance != "bay-live" {
			t.Errorf("live bay's exec %s: %s by %s, want %s by bay-live", rec.ID, got.Status, got.BayInstance, rec.Status)
		}
	}
	// Nothing of gone is left open, and a second pass adopts nothing more.
	if err := adopter.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	open, _, err := d.store.ListExecRecords(ctx, bay.ExecQuery{Statuses: []bay.ExecStatus{bay.ExecQueued, bay.ExecRunning}})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range open {
		if rec.BayInstance != "bay-live" {
			t.Errorf("exec %s still %s by %s", rec.ID, rec.Status, rec.BayInstance)
		}
	}
}

// TestAdoptExactlyOnce: three live bays, each with a store of its own on the database (as three
// processes), adopt the open execs of a gone one at the same time; each exec is claimed by
// exactly one of them, and runs or is re-attached once.
func TestAdoptExactlyOnce(t *testing.T) {
	d := newDeployment(t)
	ctx := t.Context()
	gone := d.bay("bay-gone")
	d.beat("bay-gone")
	d.clock.advance(time.Hour)
	var ids []string
	for i := range 12 {
		id := "e-" + string(rune('a'+i))
		d.exec(gone, id, bay.ExecQueued, i%3 == 0, false) // every third one's container exists
		ids = append(ids, id)
	}
	var adopters []*Service
	for _, id := range []string{"bay-1", "bay-2", "bay-3"} {
		d.beat(id)
		adopters = append(adopters, d.bayOn(openStore(t, d.path), id))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(adopters))
	for i, a := range adopters {
		wg.Go(func() { errs[i] = a.Adopt(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	d.releaseAll()
	by := map[string]int{}
	for _, id := range ids {
		got := waitFinal(t, adopters[0], "alice", id)
		if got.Status != bay.ExecSucceeded {
			t.Errorf("%s: %s (%s)", id, got.Status, got.ErrorReason)
		}
		by[got.BayInstance]++
	}
	if by["bay-gone"] != 0 || by["bay-1"]+by["bay-2"]+by["bay-3"] != len(ids) {
		t.Errorf("adopted by %v", by)
	}
	// Each exec started once: the 8 without a container were created by one adopter each.
	if got := d.g.order(); len(got) != len(ids) {
		t.Errorf("%d runs for %d execs: %v", len(got), len(ids), got)
	}
	if n := d.drv.CallCount(fake.MethodCreateInstance); n != len(ids) {
		t.Errorf("%d containers created, want %d (4 before, 8 by the adopters)", n, len(ids))
	}
	t.Logf("adopted by %v", by)
}

// TestAdoptLeavesTheLiving: an instance whose heartbeat is younger than GoneAfter is not
// adopted from, nor this bay's own records; and an instance that comes back between the pass's
// read and its claim keeps its execs (the claim reads the heartbeat again).
func TestAdoptLeavesTheLiving(t *testing.T) {
	d := newDeployment(t)
	ctx := t.Context()
	slow, self := d.bay("bay-slow"), d.bay("bay-self")
	d.beat("bay-slow", "bay-self")
	d.clock.advance(time.Hour)
	d.beat("bay-slow")                // silent for less than GoneAfter (30 s) from now on; bay-self's own row is
	d.clock.advance(20 * time.Second) // stale, but its execs are Reconcile's, not Adopt's
	stalled := d.exec(slow, "e-slow", bay.ExecQueued, false, false)
	own := d.exec(self, "e-own", bay.ExecQueued, false, false)
	if err := self.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	for _, rec := range []*bay.ExecRecord{stalled, own} {
		if got := d.get(rec.ID); got.Status != bay.ExecQueued || got.BayInstance != rec.BayInstance {
			t.Errorf("%s: %s by %s, want left queued by %s", rec.ID, got.Status, got.BayInstance, rec.BayInstance)
		}
	}

	d.clock.advance(time.Hour)
	cands := []*bay.ExecRecord{d.get(stalled.ID)}
	d.beat("bay-slow") // back before the claim
	claimed, err := self.claim(ctx, "bay-slow", cands, map[string]bool{})
	if err != nil || len(claimed) != 0 {
		t.Fatalf("claim from a bay that came back: %d claimed, %v", len(claimed), err)
	}
	if got := d.get(stalled.ID); got.BayInstance != "bay-slow" {
		t.Fatalf("exec of a bay that came back now names %s", got.BayInstance)
	}
}

// TestAdoptedExecNotOverwritten: a bay that was taken for gone (a stall) and adopted from
// cannot overwrite the exec afterwards, nor remove the container the adopter waits for: the
// adopter's record stands.
func TestAdoptedExecNotOverwritten(t *testing.T) {
	d := newDeployment(t)
	ctx := t.Context()
	stalled, adopter := d.bay("bay-stalled"), d.bay("bay-adopter")
	d.beat("bay-stalled")
	d.clock.advance(time.Hour)
	d.beat("bay-adopter")
	rec := d.exec(stalled, "e-x", bay.ExecQueued, false, false, "TOKEN") // ends lost at the adopter
	running := d.exec(stalled, "e-run", bay.ExecRunning, true, false)    // waited for by the adopter
	if err := adopter.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	// The stalled bay's wait ends (its container exited, say) while the adopter's goes on.
	stalled.outcome(ctx, ctx, running, bay.Exit{Code: 1}, nil)
	if !slices.Contains(d.drv.Instances(), running.Instance) {
		t.Fatalf("the stalled bay removed the container the adopter waits for")
	}
	d.releaseAll()
	if got := waitFinal(t, adopter, "alice", running.ID); got.Status != bay.ExecSucceeded || got.BayInstance != "bay-adopter" {
		t.Fatalf("re-attached exec: %s by %s (%s), want succeeded by bay-adopter", got.Status, got.BayInstance, got.ErrorReason)
	}
	got := waitFinal(t, adopter, "alice", rec.ID)
	if got.Status != bay.ExecLost || got.BayInstance != "bay-adopter" {
		t.Fatalf("adopted: %s by %s", got.Status, got.BayInstance)
	}
	// The stalled bay resumes and finishes its in-memory copy of the exec.
	rec.Status, rec.ErrorReason = bay.ExecCancelled, "cancelled before it started"
	stalled.finish(ctx, rec, nil)
	if got := d.get(rec.ID); got.Status != bay.ExecLost || got.BayInstance != "bay-adopter" {
		t.Fatalf("after the stalled bay's finish: %s by %s, want lost by bay-adopter", got.Status, got.BayInstance)
	}
	err := d.store.Tx(ctx, func(tx bay.Tx) error { return update(ctx, tx, rec) })
	if !errors.Is(err, errAdopted) {
		t.Fatalf("update of an adopted exec: %v, want errAdopted", err)
	}
}

// TestRunAdoptionPeriodically: the loop adopts at once, and again at its interval what a bay
// left when it went away later; it stops with its context. Without a deployment id it adopts
// nothing.
func TestRunAdoptionPeriodically(t *testing.T) {
	d := newDeployment(t)
	first, later, adopter := d.bay("bay-first"), d.bay("bay-later"), d.bay("bay-adopter")
	d.beat("bay-first")
	d.clock.advance(time.Hour)
	d.beat("bay-later", "bay-adopter")
	a := d.exec(first, "e-first", bay.ExecRunning, false, false)
	b := d.exec(later, "e-later", bay.ExecRunning, false, false)

	// No deployment id: the loop returns at once.
	bare := New(d.store, d.drv, nil, nil, Config{Image: "img", InstanceID: "bay-bare", GoneAfter: time.Second,
		Workspace: Workspace{Paths: WorkspacePaths{Native: d.root, Mount: d.root}}})
	if err := bare.RunAdoption(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := d.get(a.ID); got.BayInstance != "bay-first" {
		t.Fatalf("a bay without a deployment id adopted %s", a.ID)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- adopter.RunAdoption(ctx) }()
	if got := waitFinal(t, adopter, "alice", a.ID); got.Status != bay.ExecLost || got.BayInstance != "bay-adopter" {
		t.Fatalf("first: %s by %s", got.Status, got.BayInstance)
	}
	if got := d.get(b.ID); got.Status != bay.ExecRunning {
		t.Fatalf("exec of a live bay: %s", got.Status)
	}
	d.clock.advance(time.Hour) // bay-later goes away
	if got := waitFinal(t, adopter, "alice", b.ID); got.Status != bay.ExecLost || !strings.Contains(got.ErrorReason, "bay-later") {
		t.Fatalf("later: %s (%q)", got.Status, got.ErrorReason)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunAdoption did not stop with its context")
	}
}

// TestClaimComparesAndSets: two bays read the same open execs of a gone bay (as two passes at
// once do) and claim them one after the other: the first gets them, the second none, and an
// exec that ended meanwhile is claimed by neither.
func TestClaimComparesAndSets(t *testing.T) {
	d := newDeployment(t)
	ctx := t.Context()
	gone, b1, b2 := d.bay("bay-gone"), d.bay("bay-1"), d.bay("bay-2")
	d.beat("bay-gone")
	d.clock.advance(time.Hour)
	d.beat("bay-1", "bay-2")
	cands := []*bay.ExecRecord{
		d.exec(gone, "e-1", bay.ExecQueued, false, false),
		d.exec(gone, "e-2", bay.ExecRunning, true, false),
		d.exec(gone, "e-ended", bay.ExecRunning, false, false),
	}
	ended := d.get("e-ended")
	ended.Status = bay.ExecCancelled
	if err := d.store.Tx(ctx, func(tx bay.Tx) error { return tx.UpdateExecRecord(ctx, ended) }); err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{"e-2": true}
	first, err := b1.claim(ctx, "bay-gone", cands, exists)
	if err != nil {
		t.Fatal(err)
	}
	second, err := b2.claim(ctx, "bay-gone", cands, exists)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rec := range first {
		got = append(got, rec.ID)
	}
	if !slices.Equal(got, []string{"e-1", "e-2"}) || len(second) != 0 {
		t.Fatalf("first claim %v, second %d records; want [e-1 e-2] and none", got, len(second))
	}
	for _, id := range []string{"e-1", "e-2"} {
		if rec := d.get(id); rec.BayInstance != "bay-1" {
			t.Errorf("%s names %s, want bay-1", id, rec.BayInstance)
		}
	}
	if rec := d.get("e-ended"); rec.BayInstance != "bay-gone" || rec.Status != bay.ExecCancelled {
		t.Errorf("ended exec: %s by %s", rec.Status, rec.BayInstance)
	}
}

// TestAdoptKeepsAdmissionOrder: the queued execs of two gone bays are queued again in the order
// they were admitted, whichever bay admitted them.
func TestAdoptKeepsAdmissionOrder(t *testing.T) {
	d := newDeployment(t)
	ctx := t.Context()
	g1, g2, adopter := d.bay("bay-g1"), d.bay("bay-g2"), d.bay("bay-adopter")
	adopter.cfg.MaxConcurrent = 1 // one at a time: the runs' order is the queue's
	d.beat("bay-g1", "bay-g2")
	d.clock.advance(time.Hour)
	d.beat("bay-adopter")
	var want []string
	for i, by := range []*Service{g2, g1, g2, g1} {
		id := fmt.Sprintf("e-%d", i)
		d.exec(by, id, bay.ExecQueued, false, false)
		want = append(want, id)
		d.clock.advance(time.Second)
	}
	if err := adopter.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	d.releaseAll()
	for _, id := range want {
		if got := waitFinal(t, adopter, "alice", id); got.Status != bay.ExecSucceeded {
			t.Fatalf("%s: %s (%s)", id, got.Status, got.ErrorReason)
		}
	}
	if got := d.g.order(); !slices.Equal(got, want) {
		t.Fatalf("runs %v, want the admission order %v", got, want)
	}
}
