// Command all is the benchmark `make bench` runs: what a Shipyard sandbox costs, each figure
// measured side by side with its physical baseline on the same machine in the same run.
//
//	go run ./bench/all -out DIR [-quick] [-image ship:latest] [-bay bin/bay]
//
// It starts bin/bay (`bay serve`) with a generated config.yaml (SQLite file in a temporary
// directory, Docker driver, connect_mode auto, an API key, GC off, one profile without and one
// with a warm pool) and drives it over HTTP, and it creates the baselines with the Docker
// Engine API directly (never the docker CLI): containers of the same image with the same
// hardening, limits, volume mount and port publishing as bay's driver, and ship spoken to
// directly on the container's address. See README.md in this directory for every figure, its
// baseline and its target.
//
// Output: DIR/bench.json (for machines), DIR/bench.md (the table, also printed), DIR/bay.log
// and DIR/bay-config.yaml. Everything the run creates is removed at the end (sandboxes through
// bay's DELETE, raw containers and volumes through the Engine API, then a sweep by label), also
// after a failure or Ctrl-C. The exit status is 0 when every figure was measured, whether or
// not its targets were met (the table says which were missed); 1 when the run itself failed.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/bench/benchlib"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// reps are the repetition counts of one mode.
type reps struct {
	Cold       int // cold creates per side (shell and python)
	ColdWarmup int // unmeasured rounds before them
	Ready      int // round trips per side on a ready sandbox
	Lazy       int // sequential lazy creates (latency)
	LazyBurst  int // lazy creates for the throughput figure
	Transfer   int // transfers per direction and side
	TransferMB int64
	ReadyN     int           // ready sandboxes for the memory figures
	Settle     time.Duration // wait after starting them before reading memory
	Warm       int
	Concurrent int
	WarmPool   int // warm_pool_size of the pooled profile
	ExecBurst  int // audited execs of the burst figure
}

var (
	fullReps  = reps{WarmPool: 4, Cold: 15, ColdWarmup: 1, Ready: 500, Lazy: 300, LazyBurst: 1000, Transfer: 2, TransferMB: 1024, ReadyN: 20, Settle: 3 * time.Second, Warm: 20, Concurrent: 50, ExecBurst: 100}
	quickReps = reps{WarmPool: 2, Cold: 2, ColdWarmup: 0, Ready: 30, Lazy: 30, LazyBurst: 100, Transfer: 1, TransferMB: 128, ReadyN: 2, Settle: time.Second, Warm: 2, Concurrent: 5, ExecBurst: 12}
)

// bench is one run.
type bench struct {
	cli       *client.Client
	image     string
	gullImage string
	bayBin    string
	out       string
	quick     bool
	reps      reps
	warmPool  int
	runID     string
	seq       int
	clean     *cleaner
	bay       *bayProc
	events    *engineEvents
	shipHTTP  *http.Client
	log       *slog.Logger
	report    *benchlib.Report

	shared  struct{ id, cid, ep string }
	execSeq int64 // raw runs of the exec figures
	// coldPython is the bay cold-create-to-python series, the warm figure's baseline.
	coldPython *benchlib.Series
}

func main() {
	code, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/all:", err)
	}
	os.Exit(code)
}

func run() (int, error) {
	out := flag.String("out", "", "output directory (required)")
	quick := flag.Bool("quick", false, "small repetition counts: finishes in under a minute")
	image := flag.String("image", "ship:latest", "sandbox image (must exist locally: make images)")
	gullImage := flag.String("gull-image", "gull:latest", "browser runtime image of the cold browser figure (make images)")
	bayBin := flag.String("bay", "", "bay binary (default: bin/bay at the repository root; make build)")
	only := flag.String("only", "", "comma-separated figure groups to run (cold,browser,ready,transfer,lazy,memory,warm,concurrent,execs,gvisor,ship); default all")
	flag.Parse()
	if *out == "" {
		return 2, errors.New("-out DIR is required")
	}
	began := time.Now()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := repoRoot()
	if err != nil {
		return 1, err
	}
	if *bayBin == "" {
		*bayBin = filepath.Join(root, "bin", "bay")
	}
	if st, err := os.Stat(*bayBin); err != nil || st.IsDir() {
		return 1, fmt.Errorf("bay binary %s not found: run `make build` first (or pass -bay)", *bayBin)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return 1, err
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return 1, fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true})
	cancel()
	if err != nil {
		return 1, fmt.Errorf("the Docker engine is not reachable: %w", err)
	}
	if _, err := cli.ImageInspect(ctx, *image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return 1, fmt.Errorf("image %s is missing: build it with `make images` (no registry is used)", *image)
		}
		return 1, fmt.Errorf("inspect image %s: %w", *image, err)
	}
	engine, err := benchlib.DockerVersion(ctx, cli)
	if err != nil {
		return 1, err
	}
	idb := make([]byte, 4)
	rand.Read(idb)
	b := &bench{
		cli: cli, image: *image, gullImage: *gullImage, bayBin: *bayBin, out: *out, quick: *quick, reps: fullReps,
		runID: hex.EncodeToString(idb), clean: newCleaner(), log: log,
		shipHTTP: &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{
			MaxIdleConns: 256, MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute, DisableCompression: true}},
	}
	if *quick {
		b.reps = quickReps
	}
	b.warmPool = b.reps.WarmPool
	b.report = &benchlib.Report{
		Title: "Shipyard benchmark: what a sandbox costs against the raw baselines", Date: began.UTC(),
		Quick: *quick, Machine: benchlib.ReadMachine(), LoadStart: benchlib.LoadAvg(), Docker: engine, GitRev: benchlib.GitRevision(root),
	}
	groups := map[string]bool{}
	for g := range strings.SplitSeq(*only, ",") {
		if g = strings.TrimSpace(g); g != "" {
			groups[g] = true
		}
	}
	want := func(g string) bool { return len(groups) == 0 || groups[g] }

	// Cleanup runs on a detached context whatever happens below (error, panic, Ctrl-C).
	defer b.cleanup(ctx)

	b.events = watchEvents(ctx, cli)
	defer b.events.stop()
	log.Info("starting bay", "binary", *bayBin, "image", *image, "run", b.runID)
	b.bay, err = b.startBay(ctx)
	if err != nil {
		return 1, err
	}
	b.report.Notes = append(b.report.Notes, fmt.Sprintf("bay: %s serve, SQLite file, Docker driver (connect_mode auto), API key auth, GC off; profiles %q (no pool) and %q (warm_pool_size %d); image %s; logs in %s",
		*bayBin, profileCold, profileWarm, b.warmPool, *image, b.bay.LogPath))
	// The pool fills in the background at startup: let it finish so it disturbs nothing.
	if err := b.waitWarmPool(ctx, 3*time.Minute); err != nil {
		return 1, err
	}

	steps := []struct {
		group string
		fn    func(context.Context) error
	}{
		{"cold", b.figColdShell},
		{"cold", b.figColdPython},
		{"browser", b.figColdBrowser},
		{"ready", b.figReady},
		{"transfer", b.figTransfer},
		{"lazy", b.figLazyCreate},
		{"memory", b.figMemory},
		{"warm", b.figWarm},
		{"concurrent", b.figConcurrent},
		{"execs", b.figExecOne},
		{"execs", b.figExecBurst},
		{"gvisor", b.figGVisorCold},
		{"gvisor", b.figGVisorReady},
	}
	// bench/ship runs after bay's figures (it loads the host on its own); it compiles and
	// starts a host kernel, so quick mode leaves it out unless asked for.
	if !*quick || groups["ship"] {
		steps = append(steps, struct {
			group string
			fn    func(context.Context) error
		}{"ship", b.figShipBench})
	}
	for _, s := range steps {
		if !want(s.group) {
			continue
		}
		t0 := time.Now()
		err := s.fn(ctx)
		log.Info("figure group done", "group", s.group, "took", time.Since(t0).Round(time.Millisecond))
		if err != nil {
			if ctx.Err() != nil {
				b.finish(began, "interrupted during "+s.group+": the figures above are partial")
				return 1, fmt.Errorf("interrupted: %w", err)
			}
			log.Error("figure failed", "group", s.group, "err", err)
		}
	}
	if ctx.Err() != nil {
		b.finish(began, "interrupted: the figures above are partial")
		return 1, ctx.Err()
	}

	md, err := b.finish(began, "")
	if err != nil {
		return 1, err
	}
	fmt.Print(md)
	for _, f := range b.report.Figures {
		if f.Error != "" {
			return 1, fmt.Errorf("figure %q could not be measured: %s", f.Title, f.Error)
		}
	}
	return 0, nil
}

// finish cleans up (so the report can say what was left behind), then writes the report.
func (b *bench) finish(began time.Time, note string) (string, error) {
	b.cleanup(context.Background())
	if note != "" {
		b.report.Notes = append(b.report.Notes, note)
	}
	b.report.Duration = time.Since(began).Round(time.Second).String()
	b.report.LoadEnd = benchlib.LoadAvg()
	return b.report.Write(b.out, "bench")
}

// add appends a figure to the report and logs it.
func (b *bench) add(f *benchlib.Figure) {
	b.report.Figures = append(b.report.Figures, f)
	if f.Error != "" {
		b.log.Error("figure", "title", f.Title, "error", f.Error)
		return
	}
	b.log.Info("figure", "title", f.Title, "measured", f.Measured.Short(), "pass", f.Pass())
}

// failed records a figure that could not be measured and returns err.
func (b *bench) failed(id, title string, err error) error {
	b.add(&benchlib.Figure{ID: id, Title: title, Error: err.Error()})
	return err
}

// cleanup deletes the remaining sandboxes through bay, stops bay, removes raw containers and
// volumes, and sweeps bay's leftovers by its instance label. It is idempotent.
func (b *bench) cleanup(ctx context.Context) {
	cctx, cancel := detached(ctx, 5*time.Minute)
	defer cancel()
	if b.bay != nil {
		for _, id := range b.clean.pendingSandboxes() {
			if err := b.deleteSandbox(cctx, id); err != nil {
				b.log.Warn("cleanup: delete sandbox", "id", id, "err", err)
			}
		}
		if err := b.bay.stop(); err != nil {
			b.log.Warn("bay did not stop cleanly", "err", err)
		}
		n, err := bayLeftovers(cctx, b.cli, b.bay.Instance, b.log)
		if err != nil {
			b.log.Warn("cleanup: bay leftovers", "err", err)
		}
		if n.WarmContainers+n.OtherContainers+n.Volumes > 0 {
			b.report.Notes = append(b.report.Notes, fmt.Sprintf("after bay stopped, the benchmark removed what was left of its instance: %d warm-pool containers (bay keeps the pool at shutdown), %d containers of sandboxes whose DELETE had answered 204, %d volumes (see bay.log: \"remove container\" / \"delete managed cargo\" errors)",
				n.WarmContainers, n.OtherContainers, n.Volumes))
		}
		b.bay = nil
	}
	b.clean.raw(cctx, b.cli, b.runID, b.log)
}

// repoRoot walks up from the working directory to the module root (go.mod).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if raw, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(raw), "module github.com/shipyard-dev/shipyard") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("not inside the shipyard repository (no go.mod above %s)", dir)
		}
	}
}

func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }
