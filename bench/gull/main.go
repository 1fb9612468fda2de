// Command gull-bench measures the gull browser runtime on loopback against a
// real Chromium:
//
//  1. gull's idle RSS (the daemon alone, Chromium running with one page; target <= 15 MiB),
//     after start and again after the latency runs;
//  2. Chromium's memory with one page: the RSS and PSS summed over its process group;
//  3. p50 latencies through gull's HTTP API of `open` (a local page), `snapshot -i`
//     (target <= 50 ms), `click` (a button that does not navigate) and `screenshot`;
//  4. as the baseline in the same run, the same DevTools calls made directly over the pipe
//     to a second Chromium with no gull in between: Page.navigate + load event,
//     Accessibility.getFullAXTree, the button's box by Runtime.evaluate and three
//     Input.dispatchMouseEvent, Page.captureScreenshot.
//
// Usage: go run ./bench/gull -out DIR [-quick] [-gull BINARY] [-chromium PATH] [-reps N]
//
// It writes DIR/gull-bench.json and DIR/gull-bench.md and prints the table.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shipyard-dev/shipyard/api/gullapi"
	"github.com/shipyard-dev/shipyard/bench/benchlib"
	"github.com/shipyard-dev/shipyard/internal/gull/browser"
	"github.com/shipyard-dev/shipyard/internal/runtimekit"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gull-bench:", err)
		os.Exit(1)
	}
}

// benchPage is a page of a realistic size for an agent: a form, a table
// and a list of links, and a button that changes the page without a
// navigation.
func benchPage() string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><title>Bench</title></head><body><h1>Orders</h1><form action="/">`)
	for i := range 20 {
		fmt.Fprintf(&b, `<label for="f%d">Field %d</label><input id="f%d" name="f%d"><br>`, i, i, i, i)
	}
	b.WriteString(`</form><button id="inc" onclick="document.getElementById('n').textContent++">Add one</button><span id="n">0</span><table>`)
	for i := range 30 {
		fmt.Fprintf(&b, `<tr><td>Order %d</td><td>%d.00 EUR</td><td><a href="/order/%d">details</a></td></tr>`, i, i*7, i)
	}
	b.WriteString(`</table><ul>`)
	for i := range 40 {
		fmt.Fprintf(&b, `<li><a href="/item/%d">Item %d</a></li>`, i, i)
	}
	b.WriteString(`</ul></body></html>`)
	return b.String()
}

func run() error {
	out := flag.String("out", "", "output directory (required)")
	quick := flag.Bool("quick", false, "fewer repetitions")
	gullBin := flag.String("gull", "", "gull binary (default: build ./cmd/gull as `make build` does)")
	chromium := flag.String("chromium", runtimekit.EnvOr("GULL_TEST_CHROMIUM", browser.DefaultBinary), "Chromium executable")
	reps := flag.Int("reps", 100, "repetitions per latency")
	flag.Parse()
	if *out == "" {
		return errors.New("-out DIR is required")
	}
	if *quick {
		*reps = 20
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	scratch, err := os.MkdirTemp("", "gull-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)

	if *gullBin == "" {
		*gullBin = filepath.Join(scratch, "gull")
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", *gullBin, "./cmd/gull")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build gull: %w\n%s", err, b)
		}
	}
	page := benchPage()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, page)
	}))
	defer site.Close()
	pageURL := site.URL + "/bench"

	rep := &benchlib.Report{Title: "gull runtime benchmark", Date: time.Now(), Quick: *quick, Machine: benchlib.ReadMachine(),
		GitRev: benchlib.GitRevision("."), LoadStart: benchlib.LoadAvg(), Docker: "not used"}
	rep.Notes = append(rep.Notes, fmt.Sprintf("Chromium: %s; page: %d bytes (20 labelled inputs, 30-row table, 70 links); %d repetitions per latency", *chromium, len(page), *reps))

	g, err := startGull(ctx, *gullBin, *chromium, filepath.Join(scratch, "ws"))
	if err != nil {
		return err
	}
	defer g.stop()

	// 1 and 2: memory with one page open.
	if _, err := g.exec(ctx, "open "+pageURL); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // let both settle (GC, lazy page work)
	idle := float64(benchlib.RSS(g.cmd.Process.Pid)) / (1 << 20)
	chromeRSS, chromePSS, nproc := groupMemory(g.chromiumPID())

	// 3: latencies through gull.
	var openD, snapD, clickD, shotD []time.Duration
	for i := range *reps {
		d, err := timed(func() error { _, err := g.exec(ctx, "open "+pageURL); return err })
		if err != nil {
			return err
		}
		openD = append(openD, d)
		var snap string
		d, err = timed(func() (err error) { snap, err = g.exec(ctx, "snapshot -i"); return err })
		if err != nil {
			return err
		}
		snapD = append(snapD, d)
		ref := refOf(snap, `button "Add one"`)
		if ref == "" {
			return fmt.Errorf("no button in the snapshot:\n%s", snap)
		}
		d, err = timed(func() error { _, err := g.exec(ctx, "click "+ref); return err })
		if err != nil {
			return err
		}
		clickD = append(clickD, d)
		d, err = timed(func() error { _, err := g.exec(ctx, "screenshot bench-"+strconv.Itoa(i%2)+".png"); return err })
		if err != nil {
			return err
		}
		shotD = append(shotD, d)
	}
	time.Sleep(2 * time.Second)
	idleAfter := float64(benchlib.RSS(g.cmd.Process.Pid)) / (1 << 20)
	lastSnap, _ := g.exec(ctx, "snapshot -i")

	// 4: the baseline, the same DevTools calls without gull.
	base, err := baseline(ctx, *chromium, filepath.Join(scratch, "baseline-profile"), pageURL, *reps)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}

	f := &benchlib.Figure{ID: "gull-idle-rss", Title: "gull daemon idle RSS (Chromium running, one page)",
		Measured: benchlib.Scalar("gull RSS after start", idle, "MiB")}
	f.Breakdown = append(f.Breakdown, benchlib.Scalar("gull RSS after the latency runs", idleAfter, "MiB"))
	f.AtMost("RSS after start", idle, 15, "MiB")
	f.AtMost("RSS after the latency runs", idleAfter, 15, "MiB")
	rep.Figures = append(rep.Figures, f)

	f = &benchlib.Figure{ID: "chromium-memory", Title: "Chromium with one page (its process group)",
		Measured: benchlib.Scalar("PSS", chromePSS, "MiB")}
	f.Breakdown = append(f.Breakdown, benchlib.Scalar("RSS sum (shared pages counted per process)", chromeRSS, "MiB"), benchlib.Scalar("processes", float64(nproc), ""))
	rep.Figures = append(rep.Figures, f)

	f = &benchlib.Figure{ID: "gull-open", Title: "open of a local page through gull", Measured: benchlib.Latency("gull open", openD)}
	f.AddBaseline(benchlib.Latency("Page.navigate + load event, direct", base.open))
	rep.Figures = append(rep.Figures, f)

	f = &benchlib.Figure{ID: "gull-snapshot", Title: "snapshot -i through gull", Measured: benchlib.Latency("gull snapshot -i", snapD)}
	f.AddBaseline(benchlib.Latency("Accessibility.getFullAXTree, direct", base.snapshot))
	f.AtMost("p50", f.Measured.Central(), 50, "ms")
	f.Note("snapshot -i of the bench page lists %d elements", strings.Count(lastSnap, "[ref="))
	rep.Figures = append(rep.Figures, f)

	f = &benchlib.Figure{ID: "gull-click", Title: "click @ref (no navigation) through gull", Measured: benchlib.Latency("gull click", clickD)}
	f.AddBaseline(benchlib.Latency("button box by Runtime.evaluate + 3x Input.dispatchMouseEvent, direct", base.click))
	f.Note("gull's click also resolves the ref, scrolls the element into view, reads its box and waits one task turn to see whether a navigation started")
	rep.Figures = append(rep.Figures, f)

	f = &benchlib.Figure{ID: "gull-screenshot", Title: "screenshot (1280x720 PNG into the workspace) through gull", Measured: benchlib.Latency("gull screenshot", shotD)}
	f.AddBaseline(benchlib.Latency("Page.captureScreenshot, direct", base.screenshot))
	rep.Figures = append(rep.Figures, f)

	rep.LoadEnd = benchlib.LoadAvg()
	rep.Duration = time.Since(t0).Round(time.Second).String()
	md, err := rep.Write(*out, "gull-bench")
	if err != nil {
		return err
	}
	fmt.Print(md)
	return nil
}

func timed(f func() error) (time.Duration, error) {
	t := time.Now()
	err := f()
	return time.Since(t), err
}

func refOf(snap, what string) string {
	for _, line := range strings.Split(snap, "\n") {
		if strings.Contains(line, what) {
			if _, after, ok := strings.Cut(line, "[ref="); ok {
				ref, _, _ := strings.Cut(after, "]")
				return "@" + ref
			}
		}
	}
	return ""
}

type gullProc struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

func startGull(ctx context.Context, bin, chromium, ws string) (*gullProc, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "-listen", addr, "-workspace", ws, "-chromium", chromium, "-skills-dir", filepath.Join(ws, "no-skills"), "-log-level", "warn")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=2")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start gull: %w", err)
	}
	g := &gullProc{cmd: cmd, url: "http://" + addr, done: make(chan struct{})}
	go func() { cmd.Wait(); close(g.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var h gullapi.HealthResponse
		if err := getJSON(ctx, g.url+gullapi.PathHealth, &h); err == nil && h.BrowserReady {
			return g, nil
		}
		if time.Now().After(deadline) {
			g.stop()
			return nil, errors.New("gull did not get ready in 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (g *gullProc) stop() {
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(15 * time.Second):
		g.cmd.Process.Kill()
		<-g.done
	}
}

// chromiumPID finds gull's Chromium: the child of gull that leads its own
// process group.
func (g *gullProc) chromiumPID() int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, pgid := statIDs(pid)
		if ppid == g.cmd.Process.Pid && pgid == pid {
			return pid
		}
	}
	return 0
}

// statIDs reads the parent pid and the process group of pid.
func statIDs(pid int) (ppid, pgid int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return 0, 0
	}
	ppid, _ = strconv.Atoi(f[1])
	pgid, _ = strconv.Atoi(f[2])
	return ppid, pgid
}

// groupMemory sums RSS and PSS (MiB) over the processes of process group pgid.
func groupMemory(pgid int) (rss, pss float64, n int) {
	if pgid == 0 {
		return 0, 0, 0
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, g := statIDs(pid); g != pgid {
			continue
		}
		n++
		rss += float64(benchlib.RSS(pid)) / (1 << 20)
		if b, err := os.ReadFile("/proc/" + e.Name() + "/smaps_rollup"); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "Pss:"); ok {
					kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
					pss += kb / 1024
				}
			}
		}
	}
	return rss, pss, n
}

func (g *gullProc) exec(ctx context.Context, cmd string) (string, error) {
	body, _ := json.Marshal(gullapi.ExecRequest{Cmd: &cmd})
	req, _ := http.NewRequestWithContext(ctx, "POST", g.url+gullapi.PathExec, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var r gullapi.ExecResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return "", fmt.Errorf("%s: HTTP %d: %w", cmd, resp.StatusCode, err)
	}
	if r.ExitCode != 0 {
		return "", fmt.Errorf("%s: exit %d: %s", cmd, r.ExitCode, r.Stderr)
	}
	return r.Stdout, nil
}

func getJSON(ctx context.Context, url string, out any) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

type baselineTimes struct{ open, snapshot, click, screenshot []time.Duration }

// baseline drives a second Chromium (started the same way, over the pipe)
// with raw DevTools calls: what any client pays without gull.
func baseline(ctx context.Context, chromium, profile, pageURL string, reps int) (baselineTimes, error) {
	var bt baselineTimes
	m, err := browser.NewManager(ctx, browser.Config{Binary: chromium, ProfileDir: profile, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return bt, err
	}
	defer m.Close(ctx)
	b, err := m.Get(ctx)
	if err != nil {
		return bt, err
	}
	for range reps {
		// Page.navigate, then the load event (polled by readyState, as
		// cheaply as any client can without its own event plumbing).
		d, err := timed(func() error {
			var nav struct {
				LoaderID string `json:"loaderId"`
			}
			if err := b.Call(ctx, "Page.navigate", map[string]any{"url": pageURL}, &nav); err != nil {
				return err
			}
			for {
				var r struct {
					Result struct {
						Value string `json:"value"`
					} `json:"result"`
				}
				if err := b.Call(ctx, "Runtime.evaluate", map[string]any{"expression": "document.readyState", "returnByValue": true}, &r); err != nil {
					return err
				}
				if r.Result.Value == "complete" {
					return nil
				}
				time.Sleep(time.Millisecond)
			}
		})
		if err != nil {
			return bt, err
		}
		bt.open = append(bt.open, d)
		d, err = timed(func() error {
			var res struct {
				Nodes []json.RawMessage `json:"nodes"`
			}
			return b.Call(ctx, "Accessibility.getFullAXTree", nil, &res)
		})
		if err != nil {
			return bt, err
		}
		bt.snapshot = append(bt.snapshot, d)
		d, err = timed(func() error {
			var r struct {
				Result struct {
					Value []float64 `json:"value"`
				} `json:"result"`
			}
			expr := "(() => { const r = document.getElementById('inc').getBoundingClientRect(); return [r.left + r.width/2, r.top + r.height/2] })()"
			if err := b.Call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
				return err
			}
			if len(r.Result.Value) != 2 {
				return fmt.Errorf("no button box: %v", r.Result.Value)
			}
			for _, typ := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
				p := map[string]any{"type": typ, "x": r.Result.Value[0], "y": r.Result.Value[1]}
				if typ != "mouseMoved" {
					p["button"], p["clickCount"] = "left", 1
				}
				if err := b.Call(ctx, "Input.dispatchMouseEvent", p, nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return bt, err
		}
		bt.click = append(bt.click, d)
		d, err = timed(func() error {
			var res struct {
				Data []byte `json:"data"`
			}
			return b.Call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &res)
		})
		if err != nil {
			return bt, err
		}
		bt.screenshot = append(bt.screenshot, d)
	}
	return bt, nil
}
