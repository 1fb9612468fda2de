package httpapi_test

// The jobs API over bay's real HTTP layer, service and SQLite store, against a real ship
// daemon running in this process (the fake driver hands out its address as the sandbox's
// runtime): owners are kept apart, bad requests are refused, a followed job streams its
// output and ends in the history.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/httpapi"
	"github.com/shipyard-dev/shipyard/internal/bay/jobs"
	"github.com/shipyard-dev/shipyard/internal/bay/lease"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
	"github.com/shipyard-dev/shipyard/internal/ship"
	"github.com/shipyard-dev/shipyard/internal/ship/shiptest"
)

func newJobsHarness(t *testing.T) *harness { return newJobsHarnessIdle(t, 30*time.Minute) }

// newJobsHarnessIdle is newJobsHarness with the profile's idle timeout.
func newJobsHarnessIdle(t *testing.T, idle time.Duration) *harness {
	t.Helper()
	return newJobsHarnessWith(t, idle, false)
}

// newJobsHarnessWith is newJobsHarness with the profile's idle timeout and, with kernel, ship's
// real Python kernel.
func newJobsHarnessWith(t *testing.T, idle time.Duration, kernel bool) *harness {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "bay.db"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := ship.DefaultConfig()
	cfg.Listen, cfg.Workspace, cfg.SkillsDir, cfg.NoKernel, cfg.AuthToken = "127.0.0.1:0", t.TempDir(), t.TempDir(), !kernel, ""
	if kernel {
		cfg.Python = shiptest.Python(t)
	}
	cfg.Log = slog.New(slog.DiscardHandler)
	md := ship.New(cfg)
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- md.Run(sctx) }()
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-md.Ready():
	case err := <-done:
		t.Fatal(err)
	}
	drv := fake.New(fake.WithEndpointFunc(func(string, bay.ContainerSpec) string { return "http://" + md.Addr() }))
	profiles := []bay.Profile{{ID: "python-default", IdleTimeout: idle,
		Containers: []bay.ContainerProfile{{Name: "primary", Image: "ship:test", RuntimeType: "ship", RuntimePort: 8123,
			Resources: bay.Resources{CPUs: 1, Memory: "1g"}, Capabilities: bay.DefaultCapabilities}}}}
	sc := shipclient.New(nil, nil)
	svc := sandbox.New(st, drv, sc, nil, nil, sandbox.Config{Profiles: profiles, InstanceID: "test"})
	caps := capability.New(svc, sc, nil, capability.Config{})
	js := jobs.New(caps, sc, st, jobs.Config{MaxDuration: time.Hour, PollInterval: 100 * time.Millisecond})
	t.Cleanup(js.Close)
	api := httpapi.New(httpapi.Options{Service: svc, Capabilities: caps, Auth: tokens{}, Version: "test", Jobs: js})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	newJobs := func(ship jobs.Ship, cfg jobs.Config) *jobs.Service {
		js := jobs.New(caps, ship, st, cfg)
		t.Cleanup(js.Close)
		return js
	}
	return &harness{t: t, srv: srv, api: api, drv: drv, newJobs: newJobs, jobs: js, store: st}
}

func TestJobsOwnersAndValidation(t *testing.T) {
	h := newJobsHarness(t)
	sb := h.sandbox("alice")
	base := "/v1/sandboxes/" + sb + "/jobs"
	job := h.ok(h.do("POST", base, "alice", `{"kind":"shell","command":"echo hi; echo oops >&2; exit 2","tags":"t1"}`), 202)["job_id"].(string)

	// Bob sees none of it, and cannot start jobs in Alice's sandbox.
	for _, c := range [][2]string{{"GET", base}, {"GET", base + "/" + job}, {"GET", base + "/" + job + "/output"},
		{"GET", base + "/" + job + "/output?follow=true"}, {"POST", base + "/" + job + "/cancel"}} {
		h.expect(h.do(c[0], c[1], "bob", nil), 404, "not_found")
	}
	h.expect(h.do("POST", base, "bob", `{"kind":"shell","command":"true"}`), 404, "not_found")

	for _, body := range []string{`{}`, `{"kind":"perl","command":"x"}`, `{"kind":"shell"}`, `{"kind":"python","command":"x"}`,
		`{"kind":"shell","command":"x","timeout":3601}`, `{"kind":"shell","command":"x","timeout":0}`,
		`{"kind":"shell","command":"x","env":{"1A":"x"}}`, `{"kind":"shell","command":"x","cwd":"/etc"}`,
		`{"kind":"shell","command":"a\u0000b"}`, `[]`} {
		if r := h.do("POST", base, "alice", body); r.status < 400 || r.status >= 500 {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}
	h.expect(h.do("POST", base, "alice", `{"kind":"shell","command":"x"}`, "Idempotency-Key", "bad key"), 400, "validation_error")
	h.expect(h.do("GET", base+"?status=nope", "alice", nil), 422, "validation_error")
	h.expect(h.do("GET", base+"?limit=0", "alice", nil), 422, "validation_error")
	h.expect(h.do("GET", base+"/"+job+"/output?stdout_offset=x", "alice", nil), 422, "validation_error")
	h.expect(h.do("GET", base+"/"+job+"/output", "alice", nil, "Last-Event-ID", "1"), 422, "validation_error")

	// Followed: events, then the end.
	req, _ := http.NewRequest("GET", h.srv.URL+base+"/"+job+"/output", nil)
	req.Header.Set("Authorization", "Bearer alice-key")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events, end := readEvents(resp.Body, "end")
	// The two streams are two pipes: their order is not defined.
	slices.Sort(events)
	if strings.Join(events, ",") != "stderr=oops\n,stdout=hi\n" || end["status"] != "failed" || end["exit_code"].(float64) != 2 {
		t.Fatalf("events %q end %v", events, end)
	}
	if a, ok := end["created_artifacts"].([]any); !ok || len(a) != 0 {
		t.Fatalf("created_artifacts of a job that wrote nothing: %v", end["created_artifacts"])
	}
	// A job that writes a file under its output paths reports it, with size and sha256.
	art := h.ok(h.do("POST", base, "alice", `{"kind":"shell","command":"mkdir -p res; echo hello > res/out.txt; echo x > other.txt","output_paths":["res"]}`), 202)["job_id"].(string)
	var got map[string]any
	for range 100 {
		if got = h.ok(h.do("GET", base+"/"+art, "alice", nil), 200); got["status"] != "running" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	arts, _ := got["created_artifacts"].([]any)
	if len(arts) != 1 || arts[0].(map[string]any)["path"] != "res/out.txt" || arts[0].(map[string]any)["size"].(float64) != 6 ||
		arts[0].(map[string]any)["sha256"] != "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03" || arts[0].(map[string]any)["change"] != "created" {
		t.Fatalf("artifacts: %v", got)
	}
	h.expect(h.do("POST", base, "alice", `{"kind":"shell","command":"true","output_paths":["../x"]}`), 400, "invalid_path")
	list := h.ok(h.do("GET", base+"?status=failed", "alice", nil), 200)
	if list["total"].(float64) != 1 {
		t.Fatalf("list: %v", list)
	}
	hist := h.ok(h.do("GET", "/v1/sandboxes/"+sb+"/history", "alice", nil), 200)
	var e map[string]any
	for _, x := range hist["entries"].([]any) {
		if m := x.(map[string]any); strings.HasPrefix(m["code"].(string), "echo hi") {
			e = m
		}
	}
	if e["exec_type"] != "shell" || e["success"] != false || !strings.Contains(e["tags"].(string), "job") || !strings.Contains(e["error"].(string), "exit code 2") {
		t.Fatalf("history: %v", e)
	}
}

// ok checks the status and decodes the JSON object answer.
func (h *harness) ok(r resp, status int) map[string]any {
	h.t.Helper()
	h.expect(r, status, "")
	return r.json(h.t)
}

// TestStreamedShellExec: with Accept: text/event-stream a shell exec streams its output, then
// the plain exec's answer, recorded in the history.
func TestStreamedShellExec(t *testing.T) {
	h := newJobsHarness(t)
	sb := h.sandbox("alice")
	req, _ := http.NewRequest("POST", h.srv.URL+"/v1/sandboxes/"+sb+"/shell/exec",
		strings.NewReader(`{"command":"echo one; sleep 0.3; echo two; echo bad >&2; exit 4","include_code":true}`))
	req.Header.Set("Authorization", "Bearer alice-key")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	events, result := readEvents(resp.Body, "result")
	if len(events) < 3 || !slices.Contains(events, "stdout=one\n") || !slices.Contains(events, "stderr=bad\n") {
		t.Fatalf("events %q", events)
	}
	if result["output"] != "one\ntwo" || result["error"] != "bad" || result["exit_code"].(float64) != 4 || result["success"] != false ||
		result["command"] == nil || result["execution_id"] == "" {
		t.Fatalf("result %v", result)
	}
	// Errors before the stream are plain JSON.
	h.expect(h.do("POST", "/v1/sandboxes/"+sb+"/shell/exec", "bob", `{"command":"true"}`, "Accept", "text/event-stream"), 404, "not_found")
	hist := h.ok(h.do("GET", "/v1/sandboxes/"+sb+"/history?exec_type=shell", "alice", nil), 200)
	if hist["total"].(float64) != 1 {
		t.Fatalf("history %v", hist)
	}
}

// readEvents reads an event stream to its end: the data events as "<event>=<data>", and the
// JSON of the last event named last.
func readEvents(body io.Reader, last string) ([]string, map[string]any) {
	var events []string
	var final map[string]any
	sc := bufio.NewScanner(body)
	ev := ""
	for sc.Scan() {
		switch l := sc.Text(); {
		case strings.HasPrefix(l, "event: "):
			ev = l[7:]
		case strings.HasPrefix(l, "data: "):
			var d map[string]any
			_ = json.Unmarshal([]byte(l[6:]), &d)
			if ev == last {
				final = d
			} else if data, ok := d["data"].(string); ok {
				events = append(events, ev+"="+data)
			}
		}
	}
	return events, final
}

// TestIdempotentShellExec: retries of a keyed exec (concurrent, and after the end) run the
// command once and all get its answer; one history entry.
func TestIdempotentShellExec(t *testing.T) {
	h := newJobsHarness(t)
	sb := h.sandbox("alice")
	path := "/v1/sandboxes/" + sb + "/shell/exec"
	body := `{"command":"echo ran >> runs.txt; sleep 0.5; wc -l < runs.txt"}`
	outs := make(chan string, 3)
	for range 3 {
		go func() {
			r := h.do("POST", path, "alice", body, "Idempotency-Key", "exec-once")
			if r.status != 200 {
				outs <- fmt.Sprintf("%d %s", r.status, r.body)
				return
			}
			outs <- r.json(t)["output"].(string)
		}()
	}
	for range 3 {
		if o := <-outs; o != "1" {
			t.Fatalf("keyed exec answered %q", o)
		}
	}
	r := h.ok(h.do("POST", path, "alice", body, "Idempotency-Key", "exec-once"), 200)
	if r["output"] != "1" {
		t.Fatalf("retry after the end: %v", r)
	}
	if o := h.ok(h.do("POST", path, "alice", `{"command":"wc -l < runs.txt"}`), 200)["output"]; o != "1" {
		t.Fatalf("the keyed command ran %v times", o)
	}
	hist := h.ok(h.do("GET", "/v1/sandboxes/"+sb+"/history?exec_type=shell", "alice", nil), 200)
	if hist["total"].(float64) != 2 {
		t.Fatalf("history: %v", hist)
	}
	h.expect(h.do("POST", path, "alice", body, "Idempotency-Key", "bad key!"), 400, "validation_error")
}

// TestRunningJobPinsIdle: while a job runs, the watcher's polls keep pushing the sandbox's idle
// deadline (never its TTL); once it ended, the deadline stays.
func TestRunningJobPinsIdle(t *testing.T) {
	h := newJobsHarnessIdle(t, time.Second)
	r := h.do("POST", "/v1/sandboxes", "alice", `{"ttl":600}`)
	h.expect(r, 201, "")
	sb := r.json(t)["id"].(string)
	h.ok(h.do("POST", "/v1/sandboxes/"+sb+"/jobs", "alice", `{"kind":"shell","command":"sleep 2.5"}`), 202)
	first := h.ok(h.do("GET", "/v1/sandboxes/"+sb, "alice", nil), 200)
	deadline := func(m map[string]any) time.Time {
		v, _ := m["idle_expires_at"].(string)
		ts, err := time.Parse("2006-01-02T15:04:05.999999", v)
		if err != nil {
			t.Fatalf("idle_expires_at %q: %v", v, err)
		}
		return ts
	}
	for i := range 4 {
		time.Sleep(500 * time.Millisecond)
		m := h.ok(h.do("GET", "/v1/sandboxes/"+sb, "alice", nil), 200)
		if d := deadline(m); !d.After(time.Now().UTC()) {
			t.Fatalf("poll %d: idle deadline %s passed while the job runs", i, d)
		}
		if m["expires_at"] != first["expires_at"] {
			t.Fatalf("the TTL moved: %v -> %v", first["expires_at"], m["expires_at"])
		}
	}
	// After the end nothing refreshes it (reading the sandbox does not either).
	time.Sleep(2 * time.Second)
	if d := deadline(h.ok(h.do("GET", "/v1/sandboxes/"+sb, "alice", nil), 200)); d.After(time.Now().UTC()) {
		t.Fatalf("idle deadline %s still ahead after the job ended", d)
	}
}

// TestStreamedPythonExec: with Accept: text/event-stream a python exec streams stdout line by
// line as the cell prints, stderr apart and rich outputs as display events, in the kernel a
// plain exec uses; then the plain exec's answer, recorded in the history.
func TestStreamedPythonExec(t *testing.T) {
	h := newJobsHarnessWith(t, 30*time.Minute, true)
	sb := h.sandbox("alice")
	path := "/v1/sandboxes/" + sb + "/python/exec"
	h.ok(h.do("POST", path, "alice", `{"code":"state = 'kept'","timeout":60}`), 200)
	code := "import sys, time\nfor i in range(4):\n    print('line', i, state, flush=True)\n    time.sleep(0.5)\n" +
		"print('bad', file=sys.stderr)\ndisplay({'a': 1})\n6 * 7"
	body, _ := json.Marshal(map[string]any{"code": code, "include_code": true})
	req, _ := http.NewRequest("POST", h.srv.URL+path, strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer alice-key")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	// Each stdout line arrives on its own, about when it was printed.
	var lines []time.Time
	var events []string
	var result map[string]any
	sc := bufio.NewScanner(resp.Body)
	ev := ""
	for sc.Scan() {
		switch l := sc.Text(); {
		case strings.HasPrefix(l, "event: "):
			ev = l[7:]
		case strings.HasPrefix(l, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(l[6:]), &d); err != nil {
				t.Fatalf("event %s: %q", ev, l)
			}
			switch ev {
			case "result":
				result = d
			case "display":
				events = append(events, fmt.Sprintf("display=%v %v", d["type"], d["data"].(map[string]any)["text/plain"]))
			default:
				events = append(events, ev+"="+d["data"].(string))
				if ev == "stdout" {
					lines = append(lines, time.Now())
				}
			}
		}
	}
	want := []string{"stdout=line 0 kept\n", "stdout=line 1 kept\n", "stdout=line 2 kept\n", "stdout=line 3 kept\n",
		"stderr=bad\n", "display=display_data {'a': 1}", "display=execute_result 42"}
	if !slices.Equal(events, want) {
		t.Fatalf("events %q", events)
	}
	if gap := lines[3].Sub(lines[0]); gap < 1200*time.Millisecond {
		t.Fatalf("the four lines came within %v: not as printed", gap)
	}
	if result["success"] != true || result["stdout"] != "line 0 kept\nline 1 kept\nline 2 kept\nline 3 kept\n" || result["stderr"] != "bad\n" ||
		!strings.HasSuffix(result["output"].(string), "42") || result["code"] != code || result["execution_id"] == "" {
		t.Fatalf("result %v", result)
	}
	// A failing cell: the plain answer's error, streamed as the result.
	r := h.do("POST", path, "alice", `{"code":"1/0"}`, "Accept", "text/event-stream")
	_, result = readEvents(strings.NewReader(string(r.body)), "result")
	if result["success"] != false || !strings.Contains(fmt.Sprint(result["error"]), "ZeroDivisionError") {
		t.Fatalf("error result %v", result)
	}
	h.expect(h.do("POST", path, "bob", `{"code":"1"}`, "Accept", "text/event-stream"), 404, "not_found")
	hist := h.ok(h.do("GET", "/v1/sandboxes/"+sb+"/history?exec_type=python", "alice", nil), 200)
	if hist["total"].(float64) != 3 {
		t.Fatalf("history %v", hist)
	}
}

// TestIdempotentPythonExec: retries of a keyed python exec (concurrent, streamed or not, and
// after the end) run the cell once and all get its answer; one history entry.
func TestIdempotentPythonExec(t *testing.T) {
	h := newJobsHarnessWith(t, 30*time.Minute, true)
	sb := h.sandbox("alice")
	path := "/v1/sandboxes/" + sb + "/python/exec"
	body := `{"code":"import time\nwith open('runs.txt', 'a') as f:\n    f.write('ran\\n')\ntime.sleep(0.5)\nprint(len(open('runs.txt').readlines()))","timeout":60}`
	outs := make(chan string, 3)
	for i := range 3 {
		go func() {
			hdr := []string{"Idempotency-Key", "py-once"}
			if i == 0 {
				hdr = append(hdr, "Accept", "text/event-stream")
			}
			r := h.do("POST", path, "alice", body, hdr...)
			if r.status != 200 {
				outs <- fmt.Sprintf("%d %s", r.status, r.body)
				return
			}
			res := map[string]any{}
			if i == 0 {
				_, res = readEvents(strings.NewReader(string(r.body)), "result")
			} else {
				res = r.json(t)
			}
			outs <- fmt.Sprint(res["stdout"])
		}()
	}
	for range 3 {
		if o := <-outs; o != "1\n" {
			t.Fatalf("keyed exec answered %q", o)
		}
	}
	r := h.ok(h.do("POST", path, "alice", body, "Idempotency-Key", "py-once"), 200)
	if r["stdout"] != "1\n" {
		t.Fatalf("retry after the end: %v", r)
	}
	if o := h.ok(h.do("POST", path, "alice", `{"code":"print(len(open('runs.txt').readlines()))"}`), 200)["stdout"]; o != "1\n" {
		t.Fatalf("the keyed cell ran %q times", o)
	}
	// A shell exec under the same key is another execution.
	if o := h.ok(h.do("POST", "/v1/sandboxes/"+sb+"/shell/exec", "alice", `{"command":"echo shell"}`, "Idempotency-Key", "py-once"), 200)["output"]; o != "shell" {
		t.Fatalf("shell under the python key: %v", o)
	}
	hist := h.ok(h.do("GET", "/v1/sandboxes/"+sb+"/history?exec_type=python", "alice", nil), 200)
	if hist["total"].(float64) != 2 {
		t.Fatalf("history: %v", hist)
	}
	h.expect(h.do("POST", path, "alice", body, "Idempotency-Key", "bad key!"), 400, "validation_error")
}

// countingShip counts the job polls of a watcher, in all and per job.
type countingShip struct {
	jobs.Ship
	gets  atomic.Int64
	mu    sync.Mutex
	byJob map[string]int
}

func (c *countingShip) GetJob(ctx context.Context, endpoint, id string) (*shipapi.JobInfo, error) {
	c.gets.Add(1)
	c.mu.Lock()
	if c.byJob == nil {
		c.byJob = map[string]int{}
	}
	c.byJob[id]++
	c.mu.Unlock()
	return c.Ship.GetJob(ctx, endpoint, id)
}

func (c *countingShip) polls(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byJob[id]
}

// TestOneBayWatchesEachJob: of the bays sharing a database, only the one holding a job's watch
// lease polls it; when that bay dies (its watchers stop without releasing the lease), exactly
// one other takes the job over and records its end.
func TestOneBayWatchesEachJob(t *testing.T) {
	h := newJobsHarness(t)
	sb := h.sandbox("alice")
	// The API's service (bay A) starts the job, watches it and holds its lease.
	job := h.ok(h.do("POST", "/v1/sandboxes/"+sb+"/jobs", "alice", `{"kind":"shell","command":"sleep 4; echo done"}`), 202)["job_id"].(string)
	others := []*countingShip{{Ship: shipclient.New(nil, nil)}, {Ship: shipclient.New(nil, nil)}}
	for i, c := range others {
		svc := h.newJobs(c, jobs.Config{PollInterval: 100 * time.Millisecond, Holder: fmt.Sprintf("bay-%d", i)})
		if err := svc.Resume(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// A job started after the others resumed: they would adopt it at their next round, but bay
	// A holds its lease from the moment the job is recorded. (Once, on a loaded machine, bay A's
	// watcher first ran after another bay's round, which took the job.)
	late := h.ok(h.do("POST", "/v1/sandboxes/"+sb+"/jobs", "alice", `{"kind":"shell","command":"sleep 5; echo late"}`), 202)["job_id"].(string)
	// So does a bay whose watchers never run (closed: its watcher gives up at once).
	closed := h.newJobs(shipclient.New(nil, nil), jobs.Config{PollInterval: 100 * time.Millisecond, Holder: "bay-closed", MaxDuration: time.Hour})
	closed.Close()
	cj, _, err := closed.Start(t.Context(), "alice", sb, jobs.StartParams{Kind: "shell", Command: "sleep 1"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := lease.Acquire(t.Context(), h.store, jobs.WatchLease(cj.ID), "intruder", time.Now(), time.Minute, 5*time.Second); err != nil || ok {
		t.Fatalf("the lease of a job just recorded by a bay whose watcher never ran: taken by another holder (%v, %v)", ok, err)
	}
	time.Sleep(2 * time.Second)
	if n := others[0].gets.Load() + others[1].gets.Load(); n != 0 {
		t.Fatalf("the other bays polled the job %d times while bay A held its lease", n)
	}
	// Bay A dies: its watchers stop and its leases stay until they lapse.
	h.jobs.Close()
	deadline := time.Now().Add(30 * time.Second) // two lease TTLs and the jobs' end
	for _, id := range []string{job, late} {
		for {
			j := h.ok(h.do("GET", "/v1/sandboxes/"+sb+"/jobs/"+id, "alice", nil), 200)
			if j["status"] == "succeeded" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job not recorded ended: %v", j)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, id := range []string{job, late} {
		b, c := others[0].polls(id), others[1].polls(id)
		if b+c == 0 || b > 0 && c > 0 {
			t.Fatalf("polls of %s after bay A died: %d and %d; want one bay", id, b, c)
		}
	}
}

// TestStreamedPythonExecCallerLeaves: a caller hanging up a streamed python exec without a key
// interrupts its cell, as a plain exec's would be, so the kernel is free at once; its state
// stays.
func TestStreamedPythonExecCallerLeaves(t *testing.T) {
	h := newJobsHarnessWith(t, 30*time.Minute, true)
	sb := h.sandbox("alice")
	path := "/v1/sandboxes/" + sb + "/python/exec"
	h.ok(h.do("POST", path, "alice", `{"code":"kept = 1","timeout":60}`), 200)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+path,
		strings.NewReader(`{"code":"import time\nprint('go', flush=True)\ntime.sleep(120)","timeout":300}`))
	req.Header.Set("Authorization", "Bearer alice-key")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "event: stdout" {
	}
	cancel()
	resp.Body.Close()
	began := time.Now()
	r := h.ok(h.do("POST", path, "alice", `{"code":"print(kept)","timeout":60}`), 200)
	if r["stdout"] != "1\n" || time.Since(began) > 30*time.Second {
		t.Fatalf("after the caller left: %v in %v", r, time.Since(began))
	}
}
