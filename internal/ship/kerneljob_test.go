package ship_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
)

// follow reads a job's output from offset 0 to its end, noting when each stdout chunk came.
func (d *daemon) follow(t *testing.T, id string) (out shipapi.JobOutputResponse, stdout, stderr string, display []shipapi.DisplayEvent, arrivals []time.Time) {
	t.Helper()
	var offs [3]int64
	var disp strings.Builder
	for range 200 {
		resp, err := http.Get(fmt.Sprintf("%s/jobs/%s/output?stdout_offset=%d&stderr_offset=%d&display_offset=%d&wait_ms=5000", d.url, id, offs[0], offs[1], offs[2]))
		if err != nil {
			t.Fatal(err)
		}
		out = shipapi.JobOutputResponse{}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("output %d %v", resp.StatusCode, err)
		}
		if out.Stdout.Next > out.Stdout.Offset {
			arrivals = append(arrivals, time.Now())
		}
		stdout += out.Stdout.Data
		stderr += out.Stderr.Data
		offs[0], offs[1] = out.Stdout.Next, out.Stderr.Next
		if out.Display != nil {
			disp.WriteString(out.Display.Data)
			offs[2] = out.Display.Next
		}
		if out.Job.Status != shipapi.JobRunning && offs[0] >= out.Job.Stdout.Bytes && offs[1] >= out.Job.Stderr.Bytes &&
			(out.Job.Display == nil || offs[2] >= out.Job.Display.Bytes) {
			for _, l := range strings.Split(strings.TrimSpace(disp.String()), "\n") {
				if l == "" {
					continue
				}
				var e shipapi.DisplayEvent
				if err := json.Unmarshal([]byte(l), &e); err != nil {
					t.Fatalf("display line %q: %v", l, err)
				}
				display = append(display, e)
			}
			return
		}
	}
	t.Fatal("job did not end")
	return
}

// A kernel job runs its cell in the kernel a python exec uses, and its outputs come as the
// kernel publishes them: stdout line by line, stderr apart, rich outputs as display events,
// then the answer a python exec gives.
func TestKernelJobStreamsCellOutputs(t *testing.T) {
	d := newDaemon(t)
	if st, b := d.py(t, "kj_state = 'kept'", 30); st != 200 || b["success"] != true {
		t.Fatalf("setup %d %v", st, b)
	}
	code := "import sys, time\nfor i in range(4):\n    print('line', i, kj_state, flush=True)\n    time.sleep(0.5)\n" +
		"print('oops', file=sys.stderr)\ndisplay({'a': 1})\n6 * 7"
	st, b := d.post(t, "/jobs", map[string]any{"id": "kj-stream", "kind": "kernel", "code": code, "timeout": 30})
	if st != 200 || b["status"] != "running" || b["display"] == nil {
		t.Fatalf("start %d %v", st, b)
	}
	out, stdout, stderr, display, arrivals := d.follow(t, "kj-stream")
	if stdout != "line 0 kept\nline 1 kept\nline 2 kept\nline 3 kept\n" || stderr != "oops\n" {
		t.Fatalf("streams %q %q", stdout, stderr)
	}
	if len(arrivals) < 4 || arrivals[len(arrivals)-1].Sub(arrivals[0]) < 1200*time.Millisecond {
		t.Fatalf("stdout came in %d reads over %v: not as printed", len(arrivals), arrivals[len(arrivals)-1].Sub(arrivals[0]))
	}
	if len(display) != 2 || display[0].Type != "display_data" || display[0].Data["text/plain"] != "{'a': 1}" ||
		display[1].Type != "execute_result" || display[1].Data["text/plain"] != "42" {
		t.Fatalf("display %+v", display)
	}
	p := out.Python
	if out.Job.Status != shipapi.JobSucceeded || out.Error != nil || p == nil || !p.Success || p.Stdout != stdout || p.Stderr != stderr ||
		!strings.Contains(p.Output.Text, "line 3 kept") || !strings.HasSuffix(p.Output.Text, "42") || p.ExecutionCount == nil {
		t.Fatalf("answer %+v %+v %+v", out.Job, out.Error, p)
	}
	// A start under the same id runs nothing: the cell appended once.
	if st, b := d.post(t, "/jobs", map[string]any{"id": "kj-stream", "kind": "kernel", "code": code}); st != 200 || b["status"] != "succeeded" {
		t.Fatalf("restart %d %v", st, b)
	}
}

// A kernel job's failing cell answers as a python exec does; a cancel interrupts the cell and
// leaves the kernel's state; a timeout interrupts it too.
func TestKernelJobErrorsCancelAndTimeout(t *testing.T) {
	d := newDaemon(t)
	d.post(t, "/jobs", map[string]any{"id": "kj-err", "kind": "kernel", "code": "kj_x = 5\n1/0"})
	out, _, _, _, _ := d.follow(t, "kj-err")
	if out.Job.Status != shipapi.JobFailed || out.Python == nil || out.Python.Success || out.Python.Error == nil ||
		!strings.Contains(*out.Python.Error, "ZeroDivisionError") {
		t.Fatalf("error %+v %+v", out.Job, out.Python)
	}
	d.post(t, "/jobs", map[string]any{"id": "kj-cancel", "kind": "kernel", "code": "import time\nprint('go', flush=True)\ntime.sleep(60)"})
	time.Sleep(500 * time.Millisecond)
	began := time.Now()
	if st, b := d.post(t, "/jobs/kj-cancel/cancel", nil); st != 200 || b["status"] != "cancelled" || time.Since(began) > 10*time.Second {
		t.Fatalf("cancel %d %v after %v", st, b, time.Since(began))
	}
	out, _, _, _, _ = d.follow(t, "kj-cancel")
	if out.Error == nil || out.Python != nil {
		t.Fatalf("cancelled answer %+v %+v", out.Error, out.Python)
	}
	if st, b := d.py(t, "print(kj_x)", 30); st != 200 || text(b) != "5" {
		t.Fatalf("state after cancel %d %v", st, b)
	}
	d.post(t, "/jobs", map[string]any{"id": "kj-timeout", "kind": "kernel", "code": "import time\ntime.sleep(60)", "timeout": 1})
	out, _, _, _, _ = d.follow(t, "kj-timeout")
	if out.Job.Status != shipapi.JobTimedOut || out.Python == nil || !out.Python.TimedOut {
		t.Fatalf("timeout %+v %+v", out.Job, out.Python)
	}
	for _, bad := range []map[string]any{
		{"kind": "kernel"},
		{"kind": "kernel", "code": "1", "command": "ls"},
		{"kind": "kernel", "code": "1", "cwd": "x"},
		{"kind": "kernel", "code": "1", "env": map[string]string{"A": "1"}},
	} {
		if st, b := d.post(t, "/jobs", bad); st != 400 || b["code"] != shipapi.CodeBadRequest {
			t.Errorf("%v: %d %v", bad, st, b)
		}
	}
}

// The python exec answer keeps stdout and stderr apart; output.text still has both (in the
// order the kernel flushed them) and the result.
func TestPythonExecStreamsApart(t *testing.T) {
	d := newDaemon(t)
	st, b := d.py(t, "import sys\nprint('a')\nprint('b', file=sys.stderr)\nprint('c')\n'r'", 30)
	if st != 200 || b["stdout"] != "a\nc\n" || b["stderr"] != "b\n" || !strings.Contains(text(b), "b\n") || !strings.HasSuffix(text(b), "'r'") {
		t.Fatalf("%d %v", st, b)
	}
}
