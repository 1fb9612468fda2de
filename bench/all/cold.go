package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/api/gullapi"
	"github.com/shipyard-dev/shipyard/bench/benchlib"
)

// parts collects named latency samples in insertion order.
type parts struct {
	names []string
	ds    map[string][]time.Duration
}

func newParts() *parts { return &parts{ds: map[string][]time.Duration{}} }

func (p *parts) add(name string, d time.Duration) {
	if _, ok := p.ds[name]; !ok {
		p.names = append(p.names, name)
	}
	p.ds[name] = append(p.ds[name], d)
}

func (p *parts) series(prefix string) []benchlib.Series {
	var out []benchlib.Series
	for _, n := range p.names {
		out = append(out, benchlib.Latency(prefix+n, p.ds[n]))
	}
	return out
}

// coldBay times POST /v1/sandboxes + the first call (run) on a cold profile, and splits the
// time with the engine's events: POST, POST answered -> container created (bay's first-call
// path up to the engine's create), created -> started, started -> result (ship readiness wait,
// the call itself, bay's bookkeeping).
func (b *bench) coldBay(ctx context.Context, pp *parts, kernel bool, run func(ctx context.Context, id string) error) (time.Duration, error) {
	return b.coldBayOf(ctx, pp, profileCold, kernel, run)
}

// coldBayOf is coldBay on another cold profile.
func (b *bench) coldBayOf(ctx context.Context, pp *parts, profile string, kernel bool, run func(ctx context.Context, id string) error) (time.Duration, error) {
	t0 := time.Now()
	id, warm, err := b.create(ctx, profile)
	if err != nil {
		return 0, err
	}
	defer b.deleteSandbox(ctx, id)
	if warm {
		return 0, fmt.Errorf("sandbox %s of the cold profile was a warm claim", id)
	}
	tPost := time.Now()
	if err := run(ctx, id); err != nil {
		return 0, err
	}
	tEnd := time.Now()
	if pp != nil {
		pp.add("bay: POST /v1/sandboxes", tPost.Sub(t0))
		created, started := b.events.times(id)
		if !created.IsZero() && !started.IsZero() {
			pp.add("bay: POST answered -> engine created container", created.Sub(tPost))
			pp.add("bay: engine created -> engine started", started.Sub(created))
			pp.add("bay: engine started -> result", tEnd.Sub(started))
		}
		if kernel {
			if cid, _, err := b.sandboxContainer(ctx, id); err == nil {
				if d, ok := b.kernelStartTime(ctx, cid); ok {
					pp.add("bay: kernel start (ship's log: launch to kernel_info + init code)", d)
				}
			}
		}
		if profile == profileBrowser {
			b.browserParts(ctx, pp, id)
		}
	}
	return tEnd.Sub(t0), nil
}

// coldRawShip times the baseline without bay: volume + container create + start through the
// Engine API, ship's /health polled every 5 ms on the container address, then run against
// ship directly.
func (b *bench) coldRawShip(ctx context.Context, pp *parts, kernel bool, run func(ctx context.Context, endpoint string) error) (time.Duration, error) {
	t0 := time.Now()
	rs, err := b.rawCreate(ctx)
	defer b.rawRemove(ctx, rs)
	if err != nil {
		return 0, err
	}
	tStarted := time.Now()
	if err := b.shipWaitHealthy(ctx, rs.Endpoint); err != nil {
		return 0, err
	}
	tHealthy := time.Now()
	if err := run(ctx, rs.Endpoint); err != nil {
		return 0, err
	}
	tEnd := time.Now()
	if pp != nil {
		pp.add("raw: volume create", rs.VolumeCreate)
		pp.add("raw: container create", rs.Create)
		pp.add("raw: container start + inspect", rs.Start)
		pp.add("raw: ship /health ready", tHealthy.Sub(tStarted))
		pp.add("raw: first call on ship", tEnd.Sub(tHealthy))
		if kernel {
			if d, ok := b.kernelStartTime(ctx, rs.ID); ok {
				pp.add("raw: kernel start (ship's log: launch to kernel_info + init code)", d)
			}
		}
	}
	return tEnd.Sub(t0), nil
}

// coldRawEngine times volume + container create + start + an Engine API exec of command.
func (b *bench) coldRawEngine(ctx context.Context, pp *parts, cmd ...string) (time.Duration, error) {
	t0 := time.Now()
	rs, err := b.rawCreate(ctx)
	defer b.rawRemove(ctx, rs)
	if err != nil {
		return 0, err
	}
	tStarted := time.Now()
	if _, err := b.engineExec(ctx, rs.ID, cmd...); err != nil {
		return 0, err
	}
	tEnd := time.Now()
	if pp != nil {
		pp.add("raw engine: create+start (volume, create, start, inspect)", tStarted.Sub(t0))
		pp.add("raw engine: Engine API exec", tEnd.Sub(tStarted))
	}
	return tEnd.Sub(t0), nil
}

// leg is one side of a repetition: run gets the breakdown collector (nil in warm-up rounds)
// and its sample goes into *into.
type leg struct {
	into *[]time.Duration
	run  func(ctx context.Context, pp *parts) (time.Duration, error)
}

// legs runs the legs of one repetition in an order rotated by i, so that no side always
// runs first (page cache, engine state); samples of warm-up rounds (i < 0) are dropped.
func legs(ctx context.Context, i int, pp *parts, ls ...leg) error {
	keep := i >= 0
	n := len(ls)
	for k := range n {
		l := ls[(k+max(i, 0))%n]
		d, err := l.run(ctx, pick(keep, pp))
		if err != nil {
			return err
		}
		if keep {
			*l.into = append(*l.into, d)
		}
	}
	return nil
}

const shellCmd = "true"

func (b *bench) figColdShell(ctx context.Context) error {
	const id, title = "cold-shell", "cold create -> first shell result (`true`)"
	var bayT, rawEngine, rawShip []time.Duration
	pp := newParts()
	for i := -b.reps.ColdWarmup; i < b.reps.Cold; i++ {
		err := legs(ctx, i, pp,
			leg{&bayT, func(ctx context.Context, pp *parts) (time.Duration, error) {
				return b.coldBay(ctx, pp, false, func(ctx context.Context, id string) error { return b.shell(ctx, id, shellCmd) })
			}},
			leg{&rawEngine, func(ctx context.Context, pp *parts) (time.Duration, error) {
				return b.coldRawEngine(ctx, pp, "bash", "-lc", shellCmd)
			}},
			leg{&rawShip, func(ctx context.Context, pp *parts) (time.Duration, error) {
				return b.coldRawShip(ctx, pp, false, func(ctx context.Context, ep string) error { return b.shipShell(ctx, ep, shellCmd) })
			}})
		if err != nil {
			return b.failed(id, title, fmt.Errorf("repetition %d: %w", i, err))
		}
	}
	f := &benchlib.Figure{ID: id, Title: title, Measured: benchlib.Latency("bay", bayT)}
	f.AddBaseline(benchlib.Latency("raw Engine API create+start+exec", rawEngine))
	f.AddBaseline(benchlib.Latency("raw create+start, ship /shell/exec direct", rawShip))
	f.RatioAtMost(1.15)
	f.AtMost("p50", f.Measured.Stats.P50, 400, "ms")
	f.Breakdown = pp.series("")
	f.Note("bay = POST /v1/sandboxes {profile} (cold profile: no pool; bay creates the volume) then POST .../shell/exec {command: true}; the exec creates and starts the container and waits for ship's /health")
	f.Note("raw Engine API = volume create + container create (same image, user 1000, cap-drop ALL, no-new-privileges, 1 CPU, 1 GiB, pids 256, port published on 127.0.0.1, volume at /workspace) + start + inspect + Engine API exec `bash -lc true` (the command ship runs); this floor does not wait for any runtime")
	f.Note("raw ship = the same container, ship's /health polled every 5 ms on the container IP, then ship's /shell/exec `true` directly: the same runtime without bay")
	f.Note("%d repetitions per side after %d unmeasured round(s), sides interleaved in rotating order", b.reps.Cold, b.reps.ColdWarmup)
	b.add(f)
	return nil
}

func (b *bench) figColdPython(ctx context.Context) error {
	const id, title = "cold-python", "cold create -> first python result (`1+1`)"
	var bayT, rawShip []time.Duration
	pp := newParts()
	for i := -b.reps.ColdWarmup; i < b.reps.Cold; i++ {
		err := legs(ctx, i, pp,
			leg{&bayT, func(ctx context.Context, pp *parts) (time.Duration, error) {
				return b.coldBay(ctx, pp, true, func(ctx context.Context, id string) error { return b.python(ctx, id, "1+1", "2") })
			}},
			leg{&rawShip, func(ctx context.Context, pp *parts) (time.Duration, error) {
				return b.coldRawShip(ctx, pp, true, func(ctx context.Context, ep string) error { return b.shipPython(ctx, ep, "1+1", "2") })
			}})
		if err != nil {
			return b.failed(id, title, fmt.Errorf("repetition %d: %w", i, err))
		}
	}
	f := &benchlib.Figure{ID: id, Title: title, Measured: benchlib.Latency("bay", bayT)}
	f.AddBaseline(benchlib.Latency("raw create+start, kernel answers 1+1 on ship direct", rawShip))
	f.RatioAtMost(1.15)
	f.AtMost("p50", f.Measured.Stats.P50, 1200, "ms")
	f.Breakdown = pp.series("")
	f.Note("bay = POST /v1/sandboxes then POST .../python/exec {code: 1+1}, output checked (\"2\")")
	f.Note("baseline = raw Engine API volume + container create + start (same spec as bay's driver), ship's /health polled every 5 ms, then POST /ipython/exec {code: 1+1} on ship directly: ship starts ipykernel at boot and the exec waits until the kernel answers (kernel_info over the Jupyter protocol inside the container), so the baseline ends at the first result of a ready kernel")
	f.Note("the baseline's container reads its Python trees from the image, as plain `docker run` does; bay's Docker driver serves them from its image cache (driver.docker.image_cache, on by default where the engine's storage driver is fuse-overlayfs or vfs, as here: see bay.log, \"image cache\"), which the benchmark lets finish its one-time copy before measuring. The ratio below 1 is that cache; without it (image_cache: off) bay and the baseline are level")
	f.Note("%d repetitions per side after %d unmeasured round(s), interleaved in rotating order", b.reps.Cold, b.reps.ColdWarmup)
	s := f.Measured
	b.coldPython = &s
	b.add(f)
	return nil
}

func pick(keep bool, pp *parts) *parts {
	if keep {
		return pp
	}
	return nil
}

var (
	kernelReadyRE     = regexp.MustCompile(`msg="kernel ready".*\btook=([0-9.]+(?:ms|s|µs|m))`)
	chromiumStartedRE = regexp.MustCompile(`msg="chromium started".*\btook=([0-9.]+(?:ms|s|µs|m))`)
)

// kernelStartTime reads ship's "kernel ready ... took=" line from the container's log: the
// time from launching ipykernel to its kernel_info reply and init code.
func (b *bench) kernelStartTime(ctx context.Context, id string) (time.Duration, bool) {
	return b.logDuration(ctx, id, kernelReadyRE)
}

// chromiumStartTime reads gull's "chromium started ... took=" line from the container's log:
// the time from launching Chromium to its first tab attached.
func (b *bench) chromiumStartTime(ctx context.Context, id string) (time.Duration, bool) {
	return b.logDuration(ctx, id, chromiumStartedRE)
}

// logDuration finds re in the container's log and parses its first group as a duration.
func (b *bench) logDuration(ctx context.Context, id string, re *regexp.Regexp) (time.Duration, bool) {
	rc, err := b.cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return 0, false
	}
	defer rc.Close()
	var out, errb bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errb, io.LimitReader(rc, 1<<20)); err != nil && !errors.Is(err, io.EOF) {
		return 0, false
	}
	m := re.FindStringSubmatch(out.String() + errb.String())
	if m == nil {
		return 0, false
	}
	d, err := time.ParseDuration(m[1])
	return d, err == nil
}

// browserParts adds what the runtimes of a browser sandbox logged about their start: gull's
// Chromium start and, when ship started its kernel at boot, the kernel's (both run at once).
func (b *bench) browserParts(ctx context.Context, pp *parts, sandboxID string) {
	res, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "bay.sandbox_id="+sandboxID)})
	if err != nil {
		return
	}
	for _, c := range res.Items {
		switch c.Labels["bay.runtime_type"] {
		case "gull":
			if d, ok := b.chromiumStartTime(ctx, c.ID); ok {
				pp.add("bay: chromium start (gull's log: launch to the first tab)", d)
			}
		case "ship":
			if d, ok := b.kernelStartTime(ctx, c.ID); ok {
				pp.add("bay: ship's kernel start at boot, beside Chromium's (ship's log)", d)
			}
		}
	}
}

// browserCmd is the first browser command of the cold browser figure: it needs a running
// Chromium and nothing else.
const browserCmd = "get url"

func (b *bench) figColdBrowser(ctx context.Context) error {
	const id, title = "cold-browser", "cold create -> first browser result (`get url`)"
	var bayT, raw []time.Duration
	pp := newParts()
	for i := -b.reps.ColdWarmup; i < b.reps.Cold; i++ {
		err := legs(ctx, i, pp,
			leg{&bayT, func(ctx context.Context, pp *parts) (time.Duration, error) {
				return b.coldBayOf(ctx, pp, profileBrowser, false, func(ctx context.Context, id string) error { return b.browser(ctx, id, browserCmd) })
			}},
			leg{&raw, b.coldRawGull})
		if err != nil {
			return b.failed(id, title, fmt.Errorf("repetition %d: %w", i, err))
		}
	}
	f := &benchlib.Figure{ID: id, Title: title, Measured: benchlib.Latency("bay", bayT)}
	f.AddBaseline(benchlib.Latency("raw create+start of the gull image until Chromium answers", raw))
	f.RatioAtMost(1.2)
	f.Breakdown = pp.series("")
	f.Note("bay = POST /v1/sandboxes {profile: %s} (ship + gull on one cargo, ship with SHIP_NO_KERNEL=1 as in the default browser-python profile) then POST .../browser/exec {cmd: %q}: the call creates both containers (gull's on the sandbox network, ship's in gull's network namespace), starts gull's, waits for gull's browser_ready, then runs the command while ship's container starts in the background", profileBrowser, browserCmd)
	f.Note("baseline = raw Engine API volume + container create of %s (user 1000, cap-drop ALL, no-new-privileges, 1 CPU, 1 GiB, pids 512) + start, gull's /health polled every 5 ms until browser_ready, then POST /exec {cmd: %q} on gull directly", b.gullImage, browserCmd)
	f.Note("%d repetitions per side after %d unmeasured round(s), sides interleaved in rotating order", b.reps.Cold, b.reps.ColdWarmup)
	b.add(f)
	return nil
}

// coldRawGull times the browser baseline without bay.
func (b *bench) coldRawGull(ctx context.Context, pp *parts) (time.Duration, error) {
	t0 := time.Now()
	rs, err := b.rawCreateOf(ctx, rawImage{image: b.gullImage, port: gullapi.DefaultPort, pids: 512})
	defer b.rawRemove(ctx, rs)
	if err != nil {
		return 0, err
	}
	tStarted := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		var h gullapi.HealthResponse
		if err := b.getJSON(wctx, rs.Endpoint+gullapi.PathHealth, &h); err == nil && h.BrowserReady {
			break
		}
		select {
		case <-wctx.Done():
			return 0, fmt.Errorf("raw gull at %s: browser not ready: %w", rs.Endpoint, wctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	tReady := time.Now()
	var r gullapi.ExecResponse
	if err := b.shipPost(ctx, rs.Endpoint, gullapi.PathExec, map[string]any{"cmd": browserCmd, "timeout": 60}, &r); err != nil {
		return 0, err
	}
	if r.ExitCode != 0 {
		return 0, fmt.Errorf("raw gull %q: exit %d: %s", browserCmd, r.ExitCode, r.Stderr)
	}
	tEnd := time.Now()
	if pp != nil {
		pp.add("raw gull: create+start", tStarted.Sub(t0))
		pp.add("raw gull: container start + inspect", rs.Start)
		pp.add("raw gull: started -> browser_ready", tReady.Sub(tStarted))
		pp.add("raw gull: first command", tEnd.Sub(tReady))
		if d, ok := b.chromiumStartTime(ctx, rs.ID); ok {
			pp.add("raw gull: chromium start (gull's log: launch to the first tab)", d)
		}
	}
	return tEnd.Sub(t0), nil
}
