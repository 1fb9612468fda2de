package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/testenv"
	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
)

// The multi-bay scenario's size: 200 sandboxes, 16 in flight (each start is a container on a
// 2-core machine), bay 1 SIGKILLed once half of them are done and relaunched mbDownFor later.
const (
	mbSandboxes   = 200
	mbConcurrency = 16
	mbKillAfter   = mbSandboxes / 2
	mbVictim      = 1
	mbDownFor     = 5 * time.Second
	// mbOpDeadline bounds one client operation with its retries: longer than a bay's restart
	// and a stale start's takeover, shorter than the test's patience.
	mbOpDeadline = 3 * time.Minute
)

// ship:base keeps the 200 starts light; every session still runs ship and its kernel.
const multiBayProfiles = `profiles:
  - id: python-default
    image: "ship:base"
    resources: {cpus: 0.5, memory: "512m"}
    capabilities: [filesystem, shell, python]
    idle_timeout: 1800
`

// mbClient is the test's client behind the round-robin proxy: it sends a request again on a
// connection error, a 502 (the bay died while answering) and a 503 (session_not_ready: another
// bay is starting the session; it waits retry_after_ms), until mbOpDeadline. Any other answer
// than the expected status is an error. Creates carry an Idempotency-Key, so a create sent
// again after its bay died returns the sandbox the first attempt made, if it made one.
type mbClient struct {
	base string
	http *http.Client
	mu   sync.Mutex
	// retries counts the attempts sent again, by reason.
	retries map[string]int
}

// mbReply is a response with the index of the bay that answered (the proxy's header).
type mbReply struct {
	Response
	backend int
}

func (c *mbClient) retried(reason string) {
	c.mu.Lock()
	c.retries[reason]++
	c.mu.Unlock()
}

func (c *mbClient) call(method, path string, body any, hdr map[string]string, want int) (mbReply, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return mbReply{}, err
	}
	deadline := time.Now().Add(mbOpDeadline)
	for {
		r, err := c.once(method, path, raw, body != nil, hdr)
		wait := 200 * time.Millisecond
		switch {
		case err != nil:
			c.retried("transport error")
		case r.Status == http.StatusBadGateway:
			c.retried("502 bay died while answering")
		case r.Status == http.StatusServiceUnavailable:
			c.retried("503 " + r.Str("error.code"))
			if ms, ok := r.Get("error.details.retry_after_ms").(float64); ok && ms > 0 {
				wait = min(time.Duration(ms)*time.Millisecond, 2*time.Second)
			}
		case r.Status == want:
			return r, nil
		default:
			return r, fmt.Errorf("%s %s: want HTTP %d, got %s", method, path, want, r)
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("last answer %s", r)
			}
			return r, fmt.Errorf("%s %s: no answer within %s: %w", method, path, mbOpDeadline, err)
		}
		time.Sleep(wait)
	}
}

func (c *mbClient) once(method, path string, raw []byte, hasBody bool, hdr map[string]string) (mbReply, error) {
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return mbReply{}, err
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return mbReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return mbReply{}, err
	}
	r := mbReply{Response: Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, backend: -1}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && len(b) > 0 {
		_ = json.Unmarshal(b, &r.JSON)
	}
	if v := resp.Header.Get(testenv.HeaderBackend); v != "" {
		r.backend, _ = strconv.Atoi(v)
	}
	return r, nil
}

// shell runs command on the sandbox and returns its trimmed output; a failed command is an
// error.
func (c *mbClient) shell(id, command string) (string, int, error) {
	r, err := c.call("POST", "/v1/sandboxes/"+id+"/shell/exec", map[string]any{"command": command, "timeout": 60}, nil, 200)
	if err != nil {
		return "", -1, err
	}
	if r.Get("success") != true {
		return "", r.backend, fmt.Errorf("shell %q on %s failed: %s", command, id, r)
	}
	return strings.TrimSpace(r.Str("output")), r.backend, nil
}

// mbSandbox is one sandbox of the scenario.
type mbSandbox struct {
	id, cargo string
}

// mbWatch samples, while the scenario runs, the engine's running containers and the database's
// live session rows per sandbox, and records any sandbox with two of either.
type mbWatch struct {
	cli       *client.Client
	db        *pgx.Conn
	instances []string
	mu        sync.Mutex
	samples   int
	maxLive   int
	doubles   []string
}

func (w *mbWatch) sample(ctx context.Context) error {
	running := map[string][]string{}
	live := 0
	for _, inst := range w.instances {
		res, err := w.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("label", "bay.managed=true").Add("label", "bay.instance_id="+inst)})
		if err != nil {
			return fmt.Errorf("list containers: %w", err)
		}
		for _, c := range res.Items {
			if c.State == "running" {
				sb := c.Labels["bay.sandbox_id"]
				running[sb] = append(running[sb], strings.TrimPrefix(c.Names[0], "/")+"@"+inst)
				live++
			}
		}
	}
	rows, err := w.db.Query(ctx, `SELECT sandbox_id, string_agg(id || ':' || observed_state || '@' || instance_id, ', ')
		FROM sessions WHERE observed_state IN ('pending', 'starting', 'running')
		GROUP BY sandbox_id HAVING count(*) > 1`)
	if err != nil {
		return fmt.Errorf("query sessions: %w", err)
	}
	var dbDoubles []string
	for rows.Next() {
		var sb, what string
		if err := rows.Scan(&sb, &what); err != nil {
			rows.Close()
			return err
		}
		dbDoubles = append(dbDoubles, fmt.Sprintf("%s has two live session rows: %s", sb, what))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	w.maxLive = max(w.maxLive, live)
	for sb, names := range running {
		if len(names) > 1 {
			w.doubles = append(w.doubles, fmt.Sprintf("%s has %d running containers: %v", sb, len(names), names))
		}
	}
	w.doubles = append(w.doubles, dbDoubles...)
	return nil
}

// Three bays on one PostgreSQL behind a round-robin proxy: 200 creates, each followed by shell
// execs (a third of them a second time through another bay) and a stop, 16 at once; bay 1 is
// SIGKILLed half-way and relaunched on the same instance id 5 s later. No sandbox is lost
// (each answers an exec at the end and still holds the file its first exec wrote), none ever
// has two running containers or two live session rows, and after one orphan GC pass per bay
// nothing is left that no sandbox refers to.
//
// The killed bay is relaunched (a supervisor does that) because the work it left is its own:
// restart recovery rebuilds the sessions it left starting, and orphan container GC removes
// only containers whose bay.instance_id label is the running bay's, so no other bay may ever
// remove them.
func TestMultiBayPostgresSIGKILL(t *testing.T) {
	cli := docker(t)
	began := time.Now()
	ctx := context.Background()
	if _, err := cli.ImageInspect(ctx, "ship:base"); err != nil {
		t.Fatalf("image ship:base is missing: build it with `make image-base` (%v)", err)
	}
	dbURL := pgtest.NewDatabase(t)
	bays := make([]*Bay, 3)
	var ids, urls []string
	for i := range bays {
		bays[i] = startBay(t, bayOptions{databaseURL: dbURL, profiles: multiBayProfiles,
			instanceID: fmt.Sprintf("e2e-mb-%d-%d", os.Getpid(), i)})
		ids = append(ids, bays[i].InstanceID)
		urls = append(urls, bays[i].URL)
	}
	proxy, err := testenv.StartRoundRobin(urls...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	t.Logf("3 bays on PostgreSQL %s up in %v", pgtest.Shared(t).Version(), time.Since(began).Round(time.Millisecond))

	c := &mbClient{base: proxy.URL, http: &http.Client{Timeout: 2 * time.Minute}, retries: map[string]int{}}
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	watchDB, err := pgx.Connect(ctx, dbURL) // a pgx connection serves one goroutine
	if err != nil {
		t.Fatal(err)
	}
	defer watchDB.Close(context.Background())
	watch := &mbWatch{cli: cli, db: watchDB, instances: ids}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for watchCtx.Err() == nil {
			if err := watch.sample(watchCtx); err != nil && watchCtx.Err() == nil {
				t.Errorf("watch: %v", err)
				return
			}
			select {
			case <-watchCtx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	defer func() { stopWatch(); <-watchDone }()

	// Phase 1: create, exec (writes a marker), on a third a second exec through another bay,
	// stop. Bay mbVictim is killed once mbKillAfter sandboxes are done.
	sbs := make([]mbSandbox, mbSandboxes)
	run := randHex(t)
	var done atomic.Int64
	var crossBay atomic.Int64
	killAt := make(chan struct{})
	var killOnce sync.Once
	phase1 := time.Now()
	errs := forEach(mbSandboxes, mbConcurrency, func(i int) error {
		defer func() {
			if done.Add(1) == mbKillAfter {
				killOnce.Do(func() { close(killAt) })
			}
		}()
		r, err := c.call("POST", "/v1/sandboxes", map[string]any{}, map[string]string{"Idempotency-Key": fmt.Sprintf("mb-%s-%03d", run, i)}, 201)
		if err != nil {
			return err
		}
		sbs[i] = mbSandbox{id: r.Str("id"), cargo: r.Str("cargo_id")}
		bays[0].mu.Lock() // the cleanup of bay 0 (never killed) deletes what a failed test left
		bays[0].created = append(bays[0].created, sbs[i].id)
		bays[0].mu.Unlock()
		want := fmt.Sprintf("v-%d", i)
		out, first, err := c.shell(sbs[i].id, "echo "+want+" > marker && cat marker")
		if err != nil {
			return err
		}
		if out != want {
			return fmt.Errorf("%s: first exec printed %q, want %q", sbs[i].id, out, want)
		}
		if i%3 == 0 {
			// Through another bay than the first exec's: the proxy picks, so ask until it does.
			for try := 0; try < 8; try++ {
				out, second, err := c.shell(sbs[i].id, "cat marker")
				if err != nil {
					return err
				}
				if out != want {
					return fmt.Errorf("%s: second exec printed %q, want %q", sbs[i].id, out, want)
				}
				if second != first {
					crossBay.Add(1)
					break
				}
			}
		}
		if i%4 == 1 {
			return nil // kept running through the GC pass
		}
		_, err = c.call("POST", "/v1/sandboxes/"+sbs[i].id+"/stop", nil, nil, 200)
		return err
	})

	// The killer runs here, beside the workers: SIGKILL, then relaunch on the same config.
	oldBoot := map[string]bool{}
	var killedAt, relaunchedAt time.Duration
	select {
	case <-killAt:
		bays[mbVictim].kill()
		killedAt = time.Since(phase1)
		// The sessions the killed boot had running: their containers outlive it and the
		// other bays go on using them.
		for _, id := range queryStrings(t, db, `SELECT id FROM sessions WHERE observed_state = 'running' AND instance_id LIKE '`+bays[mbVictim].InstanceID+`/%'`) {
			oldBoot[id] = true
		}
		time.Sleep(mbDownFor)
		bays[mbVictim].launch()
		relaunchedAt = time.Since(phase1)
	case err := <-errs.first:
		t.Fatalf("phase 1 failed before the kill: %v", err)
	}
	if err := errs.wait(); err != nil {
		t.Fatalf("phase 1: %v", err)
	}
	phase1Took := time.Since(phase1)
	t.Logf("phase 1: %d creates + %d execs (%d second execs through another bay) + stops in %v; bay %d SIGKILLed at %v, relaunched at %v",
		mbSandboxes, mbSandboxes+int(crossBay.Load()), crossBay.Load(), phase1Took.Round(time.Millisecond), mbVictim,
		killedAt.Round(time.Millisecond), relaunchedAt.Round(time.Millisecond))
	if crossBay.Load() == 0 {
		t.Fatal("no second exec reached another bay than the first: the proxy does not spread the calls")
	}

	// Every container is the running current session of a live sandbox: those kept running,
	// one each (the killed bay's previous boot started some of them). One orphan container GC
	// pass on each bay (each removes only its own instance's), and that still holds: GC took
	// nothing live, the restarted bay's included.
	kept := map[string]bool{}
	for i, sb := range sbs {
		if i%4 == 1 {
			kept[sb.id] = true
		}
	}
	before := mbCheckRefs(t, cli, db, ids, kept, oldBoot, false)
	gcBegan := time.Now()
	cleaned := make([]float64, len(bays))
	for i, b := range bays {
		res := b.gcRun(t, "orphan_container")
		cleaned[i], _ = res["cleaned_count"].(float64)
		if errs, _ := res["errors"].([]any); len(errs) > 0 {
			t.Fatalf("gc on bay %d: %v", i, errs)
		}
	}
	after := mbCheckRefs(t, cli, db, ids, kept, oldBoot, true)
	t.Logf("orphan GC (one pass per bay, %v): cleaned %v; containers before %d (%d unreferenced: %v), after %d; "+
		"%d sessions of bay %d's killed boot were running at the kill, %d of them kept running through the restart and GC",
		time.Since(gcBegan).Round(time.Millisecond), cleaned, before.containers, len(before.unreferenced), before.unreferenced,
		after.containers, len(oldBoot), mbVictim, after.oldBoot)

	// Phase 2: no sandbox lost. Each one answers an exec with the file its first exec wrote,
	// then is stopped again.
	phase2 := time.Now()
	if err := forEach(mbSandboxes, mbConcurrency, func(i int) error {
		out, _, err := c.shell(sbs[i].id, "cat marker")
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("v-%d", i); out != want {
			return fmt.Errorf("%s: final exec printed %q, want %q", sbs[i].id, out, want)
		}
		_, err = c.call("POST", "/v1/sandboxes/"+sbs[i].id+"/stop", nil, nil, 200)
		return err
	}).wait(); err != nil {
		t.Fatalf("phase 2: %v", err)
	}
	t.Logf("phase 2: %d execs + stops in %v", mbSandboxes, time.Since(phase2).Round(time.Millisecond))
	stopWatch()
	<-watchDone
	t.Logf("watch: %d samples, at most %d running session containers at once", watch.samples, watch.maxLive)
	if len(watch.doubles) > 0 {
		t.Fatalf("a sandbox had two running containers or two live sessions:\n%s", strings.Join(dedupe(watch.doubles), "\n"))
	}
	c.mu.Lock()
	t.Logf("client retries: %v; proxy: served per bay %v, refused connections skipped %d", c.retries, proxy.Served(), proxy.Skipped())
	c.mu.Unlock()

	// The database knows exactly the sandboxes the client got (the idempotency keys folded the
	// creates sent twice), and none of them has a live session after its stop.
	want := make([]string, 0, mbSandboxes)
	for _, sb := range sbs {
		want = append(want, sb.id)
	}
	slices.Sort(want)
	got := queryStrings(t, db, `SELECT id FROM sandboxes WHERE deleted_at IS NULL ORDER BY id`)
	if !slices.Equal(got, want) {
		t.Fatalf("the database holds %d sandboxes, the client created %d (a create lost or made twice)", len(got), len(want))
	}
	if live := queryStrings(t, db, `SELECT id || ' ' || observed_state FROM sessions WHERE observed_state IN ('pending', 'starting', 'running')`); len(live) > 0 {
		t.Fatalf("live sessions after every sandbox was stopped: %v", live)
	}

	// Every sandbox stopped: no container and no network is left, and the volumes are exactly
	// the sandboxes' cargo volumes.
	left := mbObjects(t, cli, ids)
	if len(left.containers) > 0 || len(left.networks) > 0 {
		t.Fatalf("left after every sandbox was stopped: containers %v, networks %v", left.containers, left.networks)
	}
	var cargoVolumes []string
	for _, sb := range sbs {
		cargoVolumes = append(cargoVolumes, "bay-cargo-"+sb.cargo)
	}
	slices.Sort(cargoVolumes)
	if !slices.Equal(left.volumes, cargoVolumes) {
		t.Fatalf("volumes are not the sandboxes' cargo volumes: %d volumes, %d sandboxes; extra %v",
			len(left.volumes), len(cargoVolumes), missingFrom(left.volumes, cargoVolumes))
	}

	// Delete everything through the proxy; nothing of the bays' instances is left.
	del := time.Now()
	if err := forEach(mbSandboxes, mbConcurrency, func(i int) error {
		_, err := c.call("DELETE", "/v1/sandboxes/"+sbs[i].id, nil, nil, 204)
		return err
	}).wait(); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if left := mbObjects(t, cli, ids); len(left.containers)+len(left.volumes)+len(left.networks) > 0 {
		t.Fatalf("left after deleting every sandbox: %+v", left)
	}
	if n := queryStrings(t, db, `SELECT id FROM sandboxes WHERE deleted_at IS NULL`); len(n) > 0 {
		t.Fatalf("%d sandboxes not deleted", len(n))
	}
	t.Logf("deleted %d sandboxes in %v; whole scenario %v", mbSandboxes, time.Since(del).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// mbRefs is what mbCheckRefs saw.
type mbRefs struct {
	containers   int
	unreferenced []string
	// oldBoot counts the containers of live sessions named in oldBoot (the killed boot's).
	oldBoot int
}

// mbCheckRefs compares the engine's containers of the instances with the database: each kept
// sandbox must have exactly one container, running, that is its current running session; with
// strict, a container that no live sandbox's current session names fails the test (without,
// it is returned for the log: the GC pass that follows must remove it). Containers of the
// sessions in oldBoot are counted.
func mbCheckRefs(t *testing.T, cli *client.Client, db *pgx.Conn, instances []string, kept, oldBoot map[string]bool, strict bool) mbRefs {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.Query(ctx, `SELECT b.id, s.id, s.observed_state, s.instance_id FROM sandboxes b
		JOIN sessions s ON s.id = b.current_session_id WHERE b.deleted_at IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
	type cur struct{ sandbox, state, boot string }
	current := map[string]cur{} // by session id
	for rows.Next() {
		var sb, sess, state, boot string
		if err := rows.Scan(&sb, &sess, &state, &boot); err != nil {
			t.Fatal(err)
		}
		current[sess] = cur{sb, state, boot}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var refs mbRefs
	per := map[string]int{}
	for _, inst := range instances {
		res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("label", "bay.managed=true").Add("label", "bay.instance_id="+inst)})
		if err != nil {
			t.Fatalf("list containers: %v", err)
		}
		for _, c := range res.Items {
			refs.containers++
			name := strings.TrimPrefix(c.Names[0], "/")
			sess, sb := c.Labels["bay.session_id"], c.Labels["bay.sandbox_id"]
			cs, ok := current[sess]
			if !ok || cs.sandbox != sb || cs.state != "running" || c.State != "running" {
				refs.unreferenced = append(refs.unreferenced, fmt.Sprintf("%s %s (sandbox %s, session row %+v)", name, c.State, sb, cs))
				continue
			}
			per[sb]++
			if oldBoot[sess] {
				refs.oldBoot++
			}
		}
	}
	if strict && len(refs.unreferenced) > 0 {
		t.Fatalf("containers that no live sandbox's current session refers to:\n%s", strings.Join(refs.unreferenced, "\n"))
	}
	for sb := range kept {
		if per[sb] != 1 {
			t.Fatalf("kept sandbox %s has %d containers of its current running session, want 1", sb, per[sb])
		}
	}
	for sb, n := range per {
		if !kept[sb] {
			t.Fatalf("sandbox %s was stopped but has %d running containers", sb, n)
		}
	}
	return refs
}

// mbLeft is what the engine holds for a set of bay instances (sorted names).
type mbLeft struct {
	containers, volumes, networks []string
}

func mbObjects(t *testing.T, cli *client.Client, instances []string) mbLeft {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var left mbLeft
	for _, inst := range instances {
		f := make(client.Filters).Add("label", "bay.managed=true").Add("label", "bay.instance_id="+inst)
		cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatalf("list containers: %v", err)
		}
		for _, c := range cs.Items {
			left.containers = append(left.containers, strings.TrimPrefix(c.Names[0], "/")+" "+string(c.State))
		}
		vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
		if err != nil {
			t.Fatalf("list volumes: %v", err)
		}
		for _, v := range vs.Items {
			left.volumes = append(left.volumes, v.Name)
		}
		ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
		if err != nil {
			t.Fatalf("list networks: %v", err)
		}
		for _, n := range ns.Items {
			left.networks = append(left.networks, n.Name)
		}
	}
	sort.Strings(left.containers)
	sort.Strings(left.volumes)
	sort.Strings(left.networks)
	return left
}

func queryStrings(t *testing.T, db *pgx.Conn, sql string) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// missingFrom returns the elements of a that are not in b.
func missingFrom(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

func dedupe(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// workers is a running forEach: first receives the first error, wait returns it after every
// worker ended.
type workers struct {
	first chan error
	wg    sync.WaitGroup
	mu    sync.Mutex
	errs  []error
}

func (w *workers) wait() error {
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.errs...)
}

// forEach runs fn(0..n-1) from conc goroutines and returns at once. After the first error no
// new index is started.
func forEach(n, conc int, fn func(i int) error) *workers {
	w := &workers{first: make(chan error, 1)}
	var next atomic.Int64
	var failed atomic.Bool
	for range conc {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					failed.Store(true)
					w.mu.Lock()
					w.errs = append(w.errs, err)
					w.mu.Unlock()
					select {
					case w.first <- err:
					default:
					}
				}
			}
		}()
	}
	return w
}
