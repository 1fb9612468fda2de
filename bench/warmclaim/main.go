// Command warmclaim measures what the warm pool buys: the time from POST /v1/sandboxes to the
// first python result (`1+1`) when the create claims a warm sandbox, against a cold create
// (no pool: the first call starts the container) in the same run, through the whole bay (HTTP
// API, lifecycle service, SQLite, Docker driver, ship) on loopback.
//
// Targets: warm claim to first result p50 <= 50 ms, p99 <= 150 ms.
//
// Usage: go run ./bench/warmclaim -out DIR [-image ship:latest] [-n 30] [-cold 10] [-pool 4]
//
// It writes DIR/warmclaim.json and DIR/warmclaim.md and prints the table. Every sandbox it
// creates is deleted; the warm sandboxes are deleted at the end (cleanup on shutdown).
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
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/bench/benchlib"
	"github.com/shipyard-dev/shipyard/bench/benchlib/inproc"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/app"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "warmclaim:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "output directory (required)")
	image := flag.String("image", "ship:latest", "sandbox image (must exist locally)")
	n := flag.Int("n", 30, "warm claims measured")
	coldN := flag.Int("cold", 10, "cold creates measured")
	pool := flag.Int("pool", 4, "warm pool size")
	flag.Parse()
	if *out == "" {
		return errors.New("-out is required")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	instance := fmt.Sprintf("bench-warmclaim-%d", os.Getpid())
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
  instance_id: %q
warm_pool:
  enabled: true
  interval_seconds: 1
  warmup_queue_workers: 4
profiles:
  - id: warm
    image: %q
    warm_pool_size: %d
    warm_rotate_ttl: 3600
    idle_timeout: 600
  - id: cold
    image: %q
    idle_timeout: 600
`, dir, instance, *image, *pool, *image)
	}
	b, err := inproc.New(inproc.Options{TempPrefix: "warmclaim-", Config: config, LogPath: filepath.Join(*out, "warmclaim-bay.log")})
	if err != nil {
		return err
	}
	defer b.Close()
	store, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(b.Dir, "bay.db"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer store.Close()
	m := b.Main
	m.Store = store
	defer func() {
		b.Stop()
		cleanupWarm(store, m)
	}()
	if err := b.Start(ctx); err != nil {
		return err
	}
	c := &client{base: b.URL(), hc: &http.Client{Timeout: 5 * time.Minute}}

	rep := &benchlib.Report{Title: "Warm-pool claim to first python result", Date: time.Now().UTC(), Machine: benchlib.ReadMachine(),
		GitRev: benchlib.GitRevision(".")}
	rep.Notes = append(rep.Notes, fmt.Sprintf("bay in-process on loopback, SQLite file, Docker driver, image %s, warm pool size %d", *image, *pool))

	// Cold: create (no pool), first exec starts the container.
	var cold []time.Duration
	for i := range *coldN {
		d, id, err := c.createAndRun(ctx, "cold")
		if err != nil {
			return fmt.Errorf("cold %d: %w", i, err)
		}
		cold = append(cold, d)
		_ = c.delete(ctx, id)
	}

	// Warm: wait until a warm sandbox is available (untimed), then claim and run.
	var warm []time.Duration
	misses := 0
	for i := -2; i < *n; i++ { // two unmeasured warm-ups
		if err := waitAvailable(ctx, store, "warm", 2*time.Minute); err != nil {
			return fmt.Errorf("warm %d: %w", i, err)
		}
		d, id, err := c.createAndRun(ctx, "warm")
		if err != nil {
			return fmt.Errorf("warm %d: %w", i, err)
		}
		sb, err := store.GetSandbox(ctx, id)
		if err != nil {
			return err
		}
		if sb.WarmClaimedAt == nil {
			misses++
		}
		if i >= 0 {
			warm = append(warm, d)
		}
		_ = c.delete(ctx, id)
	}

	f := &benchlib.Figure{ID: "warm-claim", Title: "POST /v1/sandboxes (warm claim) + first python/exec `1+1`",
		Measured: benchlib.Latency("warm claim to first result", warm)}
	f.AddBaseline(benchlib.Latency("cold create to first result", cold))
	f.AtMost("warm p50", f.Measured.Stats.P50, 50, "ms")
	f.AtMost("warm p99", f.Measured.Stats.P99, 150, "ms")
	f.Note("%d of %d warm creates missed the pool (cold path); the pool was waited for before each create", misses, *n+2)
	f.Note("cold = create without a pool; its first exec creates and starts the container and waits for ship's /health")
	rep.Figures = append(rep.Figures, f)
	rep.Duration = time.Since(began).Round(time.Second).String()
	md, err := rep.Write(*out, "warmclaim")
	if err != nil {
		return err
	}
	fmt.Println(md)
	if !f.Pass() {
		return errors.New("targets not met")
	}
	return nil
}

// waitAvailable polls the store until profile has an available warm sandbox.
func waitAvailable(ctx context.Context, store bay.Store, profile string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	warm, state := true, bay.WarmAvailable
	for {
		n, err := store.CountSandboxes(ctx, bay.SandboxQuery{Warm: &warm, WarmState: &state, ProfileID: profile})
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no warm sandbox of %s became available within %s", profile, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cleanupWarm deletes the warm sandboxes the run left (bay keeps them by default).
func cleanupWarm(store bay.Store, m *app.Main) {
	svc := m.Service()
	if svc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	warm := true
	list, err := store.ListSandboxes(ctx, bay.SandboxQuery{Warm: &warm})
	if err != nil {
		return
	}
	for _, sb := range list {
		_, _ = svc.ReclaimSandbox(ctx, bay.Pin{SandboxID: sb.ID, Reason: bay.ReasonShutdown})
	}
}

type client struct {
	base string
	hc   *http.Client
}

func (c *client) do(ctx context.Context, method, path string, body, out any) error {
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
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// createAndRun creates a sandbox of profile and runs `1+1`, timing both together.
func (c *client) createAndRun(ctx context.Context, profile string) (time.Duration, string, error) {
	code := "1+1"
	t0 := time.Now()
	var sb bayapi.SandboxResponse
	if err := c.do(ctx, http.MethodPost, bayapi.PathSandboxes, bayapi.CreateSandboxRequest{Profile: &profile}, &sb); err != nil {
		return 0, "", err
	}
	var res bayapi.PythonExecResponse
	if err := c.do(ctx, http.MethodPost, bayapi.SandboxPath(bayapi.PathPythonExec, sb.ID), bayapi.PythonExecRequest{Code: &code}, &res); err != nil {
		return 0, sb.ID, err
	}
	d := time.Since(t0)
	if !res.Success || res.Data.Output.Text != "2" {
		return d, sb.ID, fmt.Errorf("1+1 gave %+v", res)
	}
	return d, sb.ID, nil
}

func (c *client) delete(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, bayapi.SandboxPath(bayapi.PathSandbox, id), nil, nil)
}
