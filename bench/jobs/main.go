// Command jobs measures the jobs API through the whole bay (HTTP API, jobs service, SQLite,
// Docker driver, ship) on loopback:
//
//   - print -> client latency: a Python job prints its clock every 100 ms; a client following
//     the output as Server-Sent Events notes when each line arrives (the container shares the
//     host's clock). Target p50 <= 20 ms.
//   - the same with 100 followers of one job at once (every follower must get every line).
//   - job start (POST .../jobs, 202) against a plain exec (POST .../shell/exec `true`).
//   - a streamed python exec (POST .../python/exec, Accept: text/event-stream) whose cell prints
//     its clock every 100 ms: print -> client latency against a streamed shell exec doing the
//     same in bash.
//
// Usage: go run ./bench/jobs -out DIR [-image ship:latest] [-lines 100] [-followers 100] [-n 30]
//
// It writes DIR/jobs.json and DIR/jobs.md and prints the table. The sandbox is deleted.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/bench/benchlib"
	"github.com/shipyard-dev/shipyard/bench/benchlib/inproc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "jobs:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "output directory (required)")
	image := flag.String("image", "ship:latest", "sandbox image (must exist locally)")
	lines := flag.Int("lines", 100, "lines printed by the followed job (one per 100 ms)")
	followers := flag.Int("followers", 100, "followers of one job at once")
	n := flag.Int("n", 30, "job starts and plain execs measured")
	flag.Parse()
	if *out == "" {
		return errors.New("-out is required")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	config := func(dir string) string {
		return fmt.Sprintf(`database:
  url: "sqlite:///%s/bay.db"
driver:
  type: docker
  image_pull_policy: never
  docker:
    connect_mode: auto
security:
  allow_anonymous: true
gc:
  enabled: false
  instance_id: "bench-jobs-%d"
profiles:
  - id: bench
    image: %q
    idle_timeout: 600
`, dir, os.Getpid(), *image)
	}
	b, err := inproc.New(inproc.Options{TempPrefix: "benchjobs-", Config: config, LogPath: filepath.Join(*out, "jobs-bay.log")})
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Start(ctx); err != nil {
		return err
	}
	defer b.Stop()
	c := &client{base: b.URL(), hc: &http.Client{}}
	profile := "bench"
	var sb bayapi.SandboxResponse
	if err := c.do(ctx, "POST", bayapi.PathSandboxes, bayapi.CreateSandboxRequest{Profile: &profile}, &sb, nil); err != nil {
		return err
	}
	defer c.do(context.Background(), "DELETE", bayapi.SandboxPath(bayapi.PathSandbox, sb.ID), nil, nil, nil)
	if _, err := c.exec(ctx, sb.ID); err != nil { // starts the container (untimed)
		return err
	}

	rep := &benchlib.Report{Title: "Jobs: live output and start", Date: time.Now().UTC(), Machine: benchlib.ReadMachine(),
		GitRev: benchlib.GitRevision(".")}
	rep.Notes = append(rep.Notes, fmt.Sprintf("bay in-process on loopback, SQLite file, Docker driver, image %s; load %s", *image, benchlib.LoadAvg()))

	// One follower.
	code := fmt.Sprintf("import time\nfor i in range(%d):\n    print(time.time_ns(), flush=True)\n    time.sleep(0.1)\n", *lines)
	job, err := c.startJob(ctx, sb.ID, code)
	if err != nil {
		return err
	}
	lags, err := c.follow(ctx, sb.ID, job)
	if err != nil {
		return err
	}
	if len(lags) != *lines {
		return fmt.Errorf("the follower got %d of %d lines", len(lags), *lines)
	}
	f1 := &benchlib.Figure{ID: "print-to-client", Title: "Job output: print in the sandbox -> event at the client (SSE)",
		Measured: benchlib.Latency("one follower", lags)}
	f1.AtMost("p50", f1.Measured.Stats.P50, 20, "ms")
	f1.Note("a Python job prints time.time_ns() every 100 ms, %d lines; the client follows GET .../output?follow=true", *lines)
	rep.Figures = append(rep.Figures, f1)

	// Many followers of one job.
	job, err = c.startJob(ctx, sb.ID, code)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var all []time.Duration
	var errs []error
	var wg sync.WaitGroup
	for range *followers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.follow(ctx, sb.ID, job)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && len(l) != *lines {
				err = fmt.Errorf("a follower got %d of %d lines", len(l), *lines)
			}
			if err != nil {
				errs = append(errs, err)
			}
			all = append(all, l...)
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	f2 := &benchlib.Figure{ID: "followers", Title: fmt.Sprintf("Job output with %d followers of one job", *followers),
		Measured: benchlib.Latency(fmt.Sprintf("%d followers, every line", *followers), all)}
	f2.AddBaseline(f1.Measured)
	f2.Note("every follower received every line")
	rep.Figures = append(rep.Figures, f2)

	// Job start against a plain exec.
	starts, err := benchlib.Repeat(ctx, 3, *n, func(ctx context.Context, _ int) (time.Duration, error) {
		return benchlib.Time(func() error { _, err := c.startJob(ctx, sb.ID, "pass"); return err })
	})
	if err != nil {
		return err
	}
	execs, err := benchlib.Repeat(ctx, 3, *n, func(ctx context.Context, _ int) (time.Duration, error) {
		return c.exec(ctx, sb.ID)
	})
	if err != nil {
		return err
	}
	f3 := &benchlib.Figure{ID: "job-start", Title: "POST .../jobs (202, python `pass`) against POST .../shell/exec `true`",
		Measured: benchlib.Latency("job start", starts)}
	f3.AddBaseline(benchlib.Latency("plain shell exec", execs))
	f3.Note("a job start answers once ship has started the process; the exec answers once `true` has run")
	rep.Figures = append(rep.Figures, f3)

	// Streamed execs: python in the kernel against shell.
	pyCode := fmt.Sprintf("import time\nfor i in range(%d):\n    print(time.time_ns(), flush=True)\n    time.sleep(0.1)\n", *lines)
	pyLags, err := c.execStream(ctx, sb.ID, bayapi.PathPythonExec, bayapi.PythonExecRequest{Code: &pyCode, Timeout: bayapi.IntPtr(120)})
	if err != nil {
		return err
	}
	shCmd := fmt.Sprintf("for i in $(seq %d); do date +%%s%%N; sleep 0.1; done", *lines)
	shLags, err := c.execStream(ctx, sb.ID, bayapi.PathShellExec, bayapi.ShellExecRequest{Command: &shCmd, Timeout: bayapi.IntPtr(120)})
	if err != nil {
		return err
	}
	if len(pyLags) != *lines || len(shLags) != *lines {
		return fmt.Errorf("streamed execs got %d and %d of %d lines", len(pyLags), len(shLags), *lines)
	}
	f4 := &benchlib.Figure{ID: "exec-stream", Title: "Streamed exec: print in the sandbox -> event at the client, python (kernel) against shell",
		Measured: benchlib.Latency("python exec, streamed", pyLags)}
	f4.AddBaseline(benchlib.Latency("shell exec, streamed", shLags))
	f4.Note("the cell prints time.time_ns() every 100 ms, %d lines; the shell loop prints date +%%s%%N as often; POST .../exec with Accept: text/event-stream", *lines)
	rep.Figures = append(rep.Figures, f4)

	rep.Duration = time.Since(began).Round(time.Second).String()
	md, err := rep.Write(*out, "jobs")
	if err != nil {
		return err
	}
	fmt.Println(md)
	if !f1.Pass() {
		return errors.New("targets not met")
	}
	return nil
}

type client struct {
	base string
	hc   *http.Client
}

func (c *client) do(ctx context.Context, method, path string, body, out any, status *int) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if status != nil {
		*status = resp.StatusCode
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (c *client) exec(ctx context.Context, id string) (time.Duration, error) {
	cmd := "true"
	var res bayapi.ShellExecResponse
	d, err := benchlib.Time(func() error {
		return c.do(ctx, "POST", bayapi.SandboxPath(bayapi.PathShellExec, id), bayapi.ShellExecRequest{Command: &cmd}, &res, nil)
	})
	if err == nil && !res.Success {
		err = fmt.Errorf("exec true failed: %+v", res)
	}
	return d, err
}

func (c *client) startJob(ctx context.Context, id, code string) (string, error) {
	var res bayapi.StartJobResponse
	var st int
	err := c.do(ctx, "POST", bayapi.SandboxPath(bayapi.PathJobs, id), bayapi.StartJobRequest{Kind: bayapi.JobKindPython, Code: &code}, &res, &st)
	if err == nil && st != http.StatusAccepted {
		err = fmt.Errorf("job start answered %d", st)
	}
	return res.JobID, err
}

// follow reads the job's output as events until the end and returns, per line, the time from
// its print to the arrival of its end.
func (c *client) follow(ctx context.Context, id, job string) ([]time.Duration, error) {
	path := strings.Replace(bayapi.SandboxPath(bayapi.PathJobOutput, id), "{job_id}", job, 1) + "?follow=true"
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		return nil, err
	}
	return c.lags(req, bayapi.JobEventEnd)
}

// execStream posts body to an exec path asking for events and returns, per line printed, the
// time from its print to its arrival.
func (c *client) execStream(ctx context.Context, id, path string, body any) ([]time.Duration, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+bayapi.SandboxPath(path, id), bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	return c.lags(req, bayapi.ExecEventResult)
}

// lags sends req, reads its stdout events (each line a Unix time in ns) until the event end,
// and returns each line's time from print to arrival.
func (c *client) lags(req *http.Request, end string) ([]time.Duration, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	var lags []time.Duration
	var partial string // a line whose end has not arrived (print writes the text, then "\n")
	sc := bufio.NewScanner(resp.Body)
	event := ""
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "event: "):
			event = l[7:]
		case strings.HasPrefix(l, "data: ") && event == bayapi.JobEventStdout:
			now := time.Now()
			var ch bayapi.JobChunk
			if err := json.Unmarshal([]byte(l[6:]), &ch); err != nil {
				return nil, err
			}
			for line := range strings.Lines(partial + ch.Data) {
				if !strings.HasSuffix(line, "\n") {
					partial = line
					break
				}
				partial = ""
				ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("line %q: %w", line, err)
				}
				lags = append(lags, now.Sub(time.Unix(0, ns)))
			}
		case strings.HasPrefix(l, "data: ") && event == end:
			return lags, nil
		}
	}
	return lags, sc.Err()
}
