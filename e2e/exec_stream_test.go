package e2e

// Python execs through the real bay and ship: streamed as the kernel publishes (stdout line by
// line, stderr apart, rich outputs), and named by an Idempotency-Key so that a retry, even of a
// caller that hung up while the cell ran, never runs it twice.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// execEvents posts body to an exec path asking for Server-Sent Events.
func (b *Bay) execEvents(ctx context.Context, path string, body any, hdr map[string]string) <-chan sseEvent {
	b.t.Helper()
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", b.URL+path, bytes.NewReader(raw))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return b.events(ctx, req)
}

func TestPythonExecStreamedAndIdempotent(t *testing.T) {
	docker(t)
	b := startBay(t, bayOptions{})
	sb := b.create(map[string]any{"profile": "python-default"}, nil).Str("id")
	path := "/v1/sandboxes/" + sb + "/python/exec"
	expect(t, b.do("POST", path, map[string]any{"code": "state = 'kept'", "timeout": 120}, nil), 200, "warm-up exec")

	t.Run("a loop printing every 0.5 s arrives line by line, stderr apart", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		code := "import sys, time\nfor i in range(5):\n    print('line', i, state, flush=True)\n    time.sleep(0.5)\n" +
			"print('warned', file=sys.stderr, flush=True)\ndisplay({'a': 1})\n6 * 7"
		var got []string
		var lines []time.Time
		var result map[string]any
		for ev := range b.execEvents(ctx, path, map[string]any{"code": code}, nil) {
			switch ev.event {
			case "stdout", "stderr":
				got = append(got, ev.event+"="+fmt.Sprint(ev.data["data"]))
				if ev.event == "stdout" {
					lines = append(lines, ev.at)
				}
			case "display":
				got = append(got, fmt.Sprintf("display=%v %v", ev.data["type"], ev.data["data"].(map[string]any)["text/plain"]))
			case "result":
				result = ev.data
			default:
				t.Fatalf("event %s %v", ev.event, ev.data)
			}
		}
		want := []string{"stdout=line 0 kept\n", "stdout=line 1 kept\n", "stdout=line 2 kept\n", "stdout=line 3 kept\n", "stdout=line 4 kept\n",
			"stderr=warned\n", "display=display_data {'a': 1}", "display=execute_result 42"}
		if !slices.Equal(got, want) {
			t.Fatalf("events %q", got)
		}
		for i := 1; i < len(lines); i++ {
			if gap := lines[i].Sub(lines[i-1]); gap < 300*time.Millisecond {
				t.Fatalf("line %d came %v after line %d: not as printed", i, gap, i-1)
			}
		}
		if result["success"] != true || result["stderr"] != "warned\n" || !strings.HasPrefix(fmt.Sprint(result["stdout"]), "line 0 kept\n") ||
			!strings.HasSuffix(fmt.Sprint(result["output"]), "42") || result["execution_id"] == "" {
			t.Fatalf("result %v", result)
		}
		// The plain answer also keeps the streams apart, output as before.
		r := expect(t, b.do("POST", path, map[string]any{"code": "import sys\nprint('o')\nprint('e', file=sys.stderr)"}, nil), 200, "plain exec")
		if r.Str("stdout") != "o\n" || r.Str("stderr") != "e\n" || !strings.Contains(r.Str("output"), "o") || !strings.Contains(r.Str("output"), "e") {
			t.Fatalf("plain exec %s", r)
		}
	})

	t.Run("a plot arrives as a display event with its image", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		code := "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()"
		var png string
		var result map[string]any
		for ev := range b.execEvents(ctx, path, map[string]any{"code": code, "timeout": 120}, nil) {
			switch ev.event {
			case "display":
				if d, ok := ev.data["data"].(map[string]any)["image/png"].(string); ok {
					png = d
				}
			case "result":
				result = ev.data
			}
		}
		images, _ := result["data"].(map[string]any)["output"].(map[string]any)["images"].([]any)
		if len(png) < 1000 || result["success"] != true || len(images) != 1 || images[0].(map[string]any)["image/png"] != png {
			t.Fatalf("plot: %d base64 bytes streamed; result %v", len(png), result["success"])
		}
	})

	t.Run("an idempotent retry of code appending to a file runs it once", func(t *testing.T) {
		key := map[string]string{"Idempotency-Key": "py-append-" + randHex(t)}
		body := map[string]any{"code": "import time\nwith open('appended.txt', 'a') as f:\n    f.write('ran\\n')\n" +
			"print('appended', flush=True)\ntime.sleep(2)\nprint(len(open('appended.txt').readlines()))", "timeout": 60}
		// The first caller hangs up once the cell printed; the cell runs on.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		for ev := range b.execEvents(ctx, path, body, key) {
			if ev.event == "stdout" {
				break
			}
		}
		cancel()
		// Retries attach to the running cell (streamed and not), then one after its end.
		outs := make(chan string, 2)
		go func() {
			r := b.do("POST", path, body, key)
			outs <- fmt.Sprintf("%d %v", r.Status, r.Get("stdout"))
		}()
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var res map[string]any
			for ev := range b.execEvents(ctx, path, body, key) {
				if ev.event == "result" {
					res = ev.data
				}
			}
			outs <- fmt.Sprintf("200 %v", res["stdout"])
		}()
		for range 2 {
			if o := <-outs; o != "200 appended\n1\n" {
				t.Fatalf("a retry answered %q", o)
			}
		}
		again := expect(t, b.do("POST", path, body, key), 200, "retry after the end")
		if again.Str("stdout") != "appended\n1\n" {
			t.Fatalf("retry after the end: %s", again)
		}
		if out := b.shellOK(sb, "cat appended.txt"); strings.TrimSpace(out) != "ran" {
			t.Fatalf("appended.txt %q: the cell ran more than once", out)
		}
		h := expect(t, b.do("GET", "/v1/sandboxes/"+sb+"/history?exec_type=python&limit=100", nil, nil), 200, "history")
		n := 0
		for _, e := range h.Get("entries").([]any) {
			if strings.Contains(fmt.Sprint(e.(map[string]any)["code"]), "appended.txt', 'a'") {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d history entries of the keyed cell", n)
		}
	})
}
