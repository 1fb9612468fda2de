package e2e

// Jobs through the real bay and ship: output followed live as Server-Sent Events, resumed from
// an offset after a disconnect, a cancel that kills grandchildren, a bay SIGKILLed while a job
// runs, and a ship killed while a job runs.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	id, event string
	data      map[string]any
	at        time.Time
}

// follow opens the job's output as an event stream (lastID: resume point, "" from the start)
// and sends every event on the returned channel until the stream ends or ctx is done.
func (b *Bay) follow(ctx context.Context, sandboxID, jobID, lastID string) <-chan sseEvent {
	b.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", b.URL+"/v1/sandboxes/"+sandboxID+"/jobs/"+jobID+"/output?follow=true", nil)
	if err != nil {
		b.t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	return b.events(ctx, req)
}

// events sends req with bay's key, expects an event stream, and reads it as readSSE does.
func (b *Bay) events(ctx context.Context, req *http.Request) <-chan sseEvent {
	b.t.Helper()
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		b.t.Fatalf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return readSSE(ctx, resp)
}

// readSSE sends every event of resp's body on the returned channel, with its arrival time,
// until the stream ends or ctx is done; it closes the body.
func readSSE(ctx context.Context, resp *http.Response) <-chan sseEvent {
	ch := make(chan sseEvent, 64)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 1<<16), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" {
					ev.at = time.Now()
					select {
					case ch <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(line[6:]), &ev.data)
			}
		}
	}()
	return ch
}

func (b *Bay) startJob(sandboxID string, body map[string]any) string {
	b.t.Helper()
	r := expect(b.t, b.do("POST", "/v1/sandboxes/"+sandboxID+"/jobs", body, nil), 202, "start job")
	if r.Str("status") != "running" || !strings.HasPrefix(r.Str("job_id"), "job-") || r.Str("started_at") == "" {
		b.t.Fatalf("start job: %s", r)
	}
	return r.Str("job_id")
}

// waitJob polls the job until its status is final.
func (b *Bay) waitJob(sandboxID, jobID string, timeout time.Duration) Response {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r := expect(b.t, b.do("GET", "/v1/sandboxes/"+sandboxID+"/jobs/"+jobID, nil, nil), 200, "get job")
		if r.Str("status") != "running" {
			return r
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("job %s still running after %s: %s", jobID, timeout, r)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func TestJobsFollowLiveResumeAndCancel(t *testing.T) {
	docker(t)
	b := startBay(t, bayOptions{})
	sb := b.create(map[string]any{"profile": "python-default"}, nil).Str("id")

	// A line every 0.5 s, each stamped with the time it was printed (the container shares the
	// host's clock).
	job := b.startJob(sb, map[string]any{"kind": "shell", "description": "ticker", "tags": "e2e",
		"command": `for i in $(seq 1 8); do echo "tick $i $(date +%s.%N)"; sleep 0.5; done; echo bye >&2`})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var stdout strings.Builder
	var lastID string
	var lags []time.Duration
	n := 0
	sctx, stopFirst := context.WithCancel(ctx)
	for ev := range b.follow(sctx, sb, job, "") {
		if ev.event != "stdout" {
			continue
		}
		stdout.WriteString(ev.data["data"].(string))
		lastID = ev.id
		for l := range strings.Lines(ev.data["data"].(string)) {
			f := strings.Fields(l)
			printed, _ := strconv.ParseFloat(f[2], 64)
			lags = append(lags, ev.at.Sub(time.UnixMicro(int64(printed*1e6))))
			n++
		}
		if n >= 3 {
			break // disconnect mid-job
		}
	}
	stopFirst()
	t.Logf("print -> client lags of the first lines: %v", lags)
	for i, l := range lags {
		// Live: a line arrives while the job still runs, not at its end (the benchmark
		// measures the latency itself).
		if l > 1500*time.Millisecond {
			t.Errorf("line %d arrived %s after it was printed", i+1, l)
		}
	}
	// Resume from the last event id: exactly the rest, then the end.
	var end sseEvent
	var stderr string
	for ev := range b.follow(ctx, sb, job, lastID) {
		switch ev.event {
		case "stdout":
			if int64(ev.data["offset"].(float64)) != int64(stdout.Len()) {
				t.Fatalf("resumed chunk starts at %v, %d bytes were read", ev.data["offset"], stdout.Len())
			}
			stdout.WriteString(ev.data["data"].(string))
		case "stderr":
			stderr += ev.data["data"].(string)
		case "end":
			end = ev
		}
	}
	if end.event != "end" || end.data["status"] != "succeeded" || end.data["exit_code"].(float64) != 0 {
		t.Fatalf("end event: %+v", end)
	}
	if got := strings.Count(stdout.String(), "tick "); got != 8 || stderr != "bye\n" {
		t.Fatalf("stdout %q stderr %q", stdout.String(), stderr)
	}
	// Without follow: what exists from an offset, as JSON.
	r := expect(t, b.do("GET", fmt.Sprintf("/v1/sandboxes/%s/jobs/%s/output?stdout_offset=%d", sb, job, strings.Index(stdout.String(), "tick 8")), nil, nil), 200, "output")
	if !strings.HasPrefix(r.Str("stdout.data"), "tick 8 ") || r.Str("stderr.data") != "bye\n" || r.Str("job.status") != "succeeded" {
		t.Fatalf("output from an offset: %s", r)
	}
	if g := b.waitJob(sb, job, 10*time.Second); g.Get("stdout.bytes").(float64) != float64(stdout.Len()) || g.Str("description") != "ticker" {
		t.Fatalf("job: %s", g)
	}
	// Its end is in the history, tagged job.
	h := expect(t, b.do("GET", "/v1/sandboxes/"+sb+"/history?tags=job", nil, nil), 200, "history")
	if h.Get("total").(float64) != 1 {
		t.Fatalf("history: %s", h)
	}

	t.Run("cancel kills grandchildren", func(t *testing.T) {
		job := b.startJob(sb, map[string]any{"kind": "shell",
			"command": `bash -c 'trap "" TERM; echo $$ > gc.pid; sleep 300' & sleep 300`})
		var pid string
		for i := 0; i < 100 && pid == ""; i++ {
			pid = strings.TrimSpace(b.shellOK(sb, "cat gc.pid 2>/dev/null || true"))
			time.Sleep(100 * time.Millisecond)
		}
		if pid == "" {
			t.Fatal("the grandchild never wrote its pid")
		}
		c := expect(t, b.do("POST", "/v1/sandboxes/"+sb+"/jobs/"+job+"/cancel", nil, nil), 200, "cancel")
		if c.Str("status") != "cancelled" || c.Str("reason") == "" {
			t.Fatalf("cancel: %s", c)
		}
		if out := b.shellOK(sb, "kill -0 "+pid+" 2>&1 && echo ALIVE || echo gone"); !strings.Contains(out, "gone") {
			t.Fatalf("grandchild %s after the cancel: %s", pid, out)
		}
		l := expect(t, b.do("GET", "/v1/sandboxes/"+sb+"/jobs?status=cancelled", nil, nil), 200, "list")
		if l.Get("total").(float64) != 1 || l.Get("items").([]any)[0].(map[string]any)["job_id"] != job {
			t.Fatalf("list cancelled: %s", l)
		}
	})

	t.Run("a retry with the same Idempotency-Key runs the command once", func(t *testing.T) {
		body := map[string]any{"kind": "shell", "command": "echo once >> count.txt; sleep 1"}
		key := map[string]string{"Idempotency-Key": "append-" + randHex(t)}
		ids := make(chan string, 6)
		for range 6 {
			go func() {
				r := b.do("POST", "/v1/sandboxes/"+sb+"/jobs", body, key)
				if r.Status != 202 {
					t.Errorf("keyed start: %s", r)
				}
				ids <- r.Str("job_id")
			}()
		}
		first := <-ids
		for range 5 {
			if id := <-ids; id != first {
				t.Fatalf("keyed starts named two jobs: %s and %s", first, id)
			}
		}
		b.waitJob(sb, first, 30*time.Second)
		again := expect(t, b.do("POST", "/v1/sandboxes/"+sb+"/jobs", body, key), 202, "retry after the end")
		if again.Str("job_id") != first || again.Header.Get("Idempotent-Replayed") != "true" || again.Str("status") != "succeeded" {
			t.Fatalf("retry after the end: %s %v", again, again.Header)
		}
		if out := b.shellOK(sb, "cat count.txt"); strings.TrimSpace(out) != "once" {
			t.Fatalf("count.txt %q: the command ran more than once", out)
		}
		expectError(t, b.do("POST", "/v1/sandboxes/"+sb+"/jobs", map[string]any{"kind": "shell", "command": "other"}, key), 409, "conflict", "same key, other command")
	})

	t.Run("bad requests", func(t *testing.T) {
		for _, body := range []map[string]any{
			{"kind": "perl", "command": "x"}, {"kind": "shell"}, {"kind": "shell", "command": "  "},
			{"kind": "shell", "command": "x", "code": "y"}, {"kind": "shell", "command": "x", "timeout": 0},
			{"kind": "shell", "command": "x", "timeout": 86401}, {"kind": "shell", "command": "x", "cwd": "../x"},
			{"kind": "shell", "command": "x", "env": map[string]any{"A=B": "1"}},
		} {
			r := b.do("POST", "/v1/sandboxes/"+sb+"/jobs", body, nil)
			if r.Status < 400 || r.Status >= 500 {
				t.Errorf("%v: %s", body, r)
			}
		}
		expectError(t, b.do("GET", "/v1/sandboxes/"+sb+"/jobs/job-000000000000", nil, nil), 404, "not_found", "unknown job")
		expectError(t, b.do("GET", "/v1/sandboxes/"+sb+"/jobs?status=weird", nil, nil), 422, "validation_error", "bad status")
		expectError(t, b.do("GET", "/v1/sandboxes/"+sb+"/jobs/"+job+"/output?offset=-1", nil, nil), 422, "validation_error", "bad offset")
	})
}

// TestJobSurvivesBayKill: bay SIGKILLed while a job runs; the job runs on in the sandbox and
// the restarted bay records its end.
func TestJobSurvivesBayKill(t *testing.T) {
	docker(t)
	b := startBay(t, bayOptions{})
	sb := b.create(map[string]any{"profile": "python-default"}, nil).Str("id")
	job := b.startJob(sb, map[string]any{"kind": "python", "code": "import time, sys\nprint('start', flush=True)\ntime.sleep(5)\nprint('done')\nsys.exit(3)"})
	b.kill()
	time.Sleep(6 * time.Second)
	b.launch()
	r := b.waitJob(sb, job, 30*time.Second)
	if r.Str("status") != "failed" || r.Get("exit_code").(float64) != 3 || r.Get("stdout.bytes").(float64) != float64(len("start\ndone\n")) || r.Str("ended_at") == "" {
		t.Fatalf("after the bay restart: %s", r)
	}
	o := expect(t, b.do("GET", "/v1/sandboxes/"+sb+"/jobs/"+job+"/output", nil, nil), 200, "output")
	if o.Str("stdout.data") != "start\ndone\n" {
		t.Fatalf("output: %s", o)
	}
}

// TestJobLostWhenShipDies: ship killed while a job runs: the job is lost, with the reason.
func TestJobLostWhenShipDies(t *testing.T) {
	cli := docker(t)
	b := startBay(t, bayOptions{})
	sb := b.create(map[string]any{"profile": "python-default"}, nil).Str("id")
	job := b.startJob(sb, map[string]any{"kind": "shell", "command": "echo started; sleep 300"})
	cs := sessionContainers(t, cli, sb)
	if len(cs) != 1 {
		t.Fatalf("containers: %v", cs)
	}
	ctx := t.Context()
	x, err := cli.ExecCreate(ctx, strings.Fields(cs[0])[0], client.ExecCreateOptions{Cmd: []string{"pkill", "-KILL", "-x", "ship"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ExecStart(ctx, x.ID, client.ExecStartOptions{}); err != nil {
		t.Fatal(err)
	}
	r := b.waitJob(sb, job, time.Minute)
	if r.Str("status") != "lost" || !strings.Contains(r.Str("reason"), "session") && !strings.Contains(r.Str("reason"), "runtime") {
		t.Fatalf("after ship died: %s", r)
	}
	t.Logf("lost: %s", r.Str("reason"))
	// The sandbox serves again (a new session).
	if out := b.shellOK(sb, "echo back"); strings.TrimSpace(out) != "back" {
		t.Fatalf("sandbox after the loss: %q", out)
	}
}
