package main

import (
	"context"
	"fmt"
	"time"

	"github.com/shipyard-dev/shipyard/bench/benchlib"
)

// readySandbox creates a bay sandbox, runs python once (kernel up) and returns its id, its
// container and ship's address on it.
func (b *bench) readySandbox(ctx context.Context, profile string) (id, container, endpoint string, err error) {
	id, _, err = b.create(ctx, profile)
	if err != nil {
		return "", "", "", err
	}
	if err := b.python(ctx, id, "1+1", "2"); err != nil {
		return id, "", "", err
	}
	container, endpoint, err = b.sandboxContainer(ctx, id)
	return id, container, endpoint, err
}

// sharedReady returns the ready sandbox shared by the ready and transfer figures (created on
// first use; deleted by releaseShared or at cleanup).
func (b *bench) sharedReady(ctx context.Context) (id, container, endpoint string, err error) {
	if b.shared.id != "" {
		return b.shared.id, b.shared.cid, b.shared.ep, nil
	}
	id, container, endpoint, err = b.readySandbox(ctx, profileCold)
	if err != nil {
		if id != "" {
			b.deleteSandbox(ctx, id)
		}
		return "", "", "", err
	}
	b.shared.id, b.shared.cid, b.shared.ep = id, container, endpoint
	return id, container, endpoint, nil
}

func (b *bench) releaseShared(ctx context.Context) {
	if b.shared.id != "" {
		b.deleteSandbox(ctx, b.shared.id)
		b.shared.id = ""
	}
}

// interleave runs n rounds of each fn, in blocks of 10 per side alternating, after warmup
// rounds, and returns the samples per fn.
func interleave(ctx context.Context, warmup, n int, fns ...func(ctx context.Context) error) ([][]time.Duration, error) {
	out := make([][]time.Duration, len(fns))
	const block = 10
	for done := -warmup; done < n; done += block {
		for k, fn := range fns {
			for j := range block {
				if done+j >= n {
					break
				}
				t0 := time.Now()
				if err := fn(ctx); err != nil {
					return out, err
				}
				if done+j >= 0 {
					out[k] = append(out[k], time.Since(t0))
				}
			}
		}
	}
	return out, nil
}

// figReady measures python `1+1` and shell `true` on one ready sandbox, through bay and
// straight to ship's endpoint on the container (and, for shell, an Engine API exec).
func (b *bench) figReady(ctx context.Context) error {
	const pyID, pyTitle = "ready-python", "python `1+1` through bay on a ready sandbox"
	const shID, shTitle = "ready-shell", "shell `true` through bay on a ready sandbox"
	id, cid, ep, err := b.sharedReady(ctx)
	if err != nil {
		b.failed(pyID, pyTitle, err)
		return b.failed(shID, shTitle, err)
	}

	n := b.reps.Ready
	res, err := interleave(ctx, 20, n,
		func(ctx context.Context) error { return b.python(ctx, id, "1+1", "2") },
		func(ctx context.Context) error { return b.shipPython(ctx, ep, "1+1", "2") })
	if err != nil {
		b.failed(pyID, pyTitle, err)
	} else {
		f := &benchlib.Figure{ID: pyID, Title: pyTitle, Measured: benchlib.Latency("bay", res[0])}
		f.AddBaseline(benchlib.Latency("ship /ipython/exec direct", res[1]))
		f.RatioAtMost(1.3)
		f.AtMost("p50", f.Measured.Stats.P50, 3, "ms")
		f.Note("bay = POST /v1/sandboxes/{id}/python/exec {code: 1+1}; direct = POST http://<container IP>:8123/ipython/exec with the same body, same HTTP client settings (keep-alive), same sandbox, output checked; %d round trips per side in alternating blocks of 10 after 20 unmeasured", n)
		f.Note("the Go Jupyter client against a kernel without ship (bench/ship) is the next floor down: ship's own overhead is measured there")
		b.add(f)
	}

	nSh := max(n*3/5, 20)
	res, err = interleave(ctx, 10, nSh,
		func(ctx context.Context) error { return b.shell(ctx, id, shellCmd) },
		func(ctx context.Context) error { return b.shipShell(ctx, ep, shellCmd) },
		func(ctx context.Context) error { _, err := b.engineExec(ctx, cid, "bash", "-lc", shellCmd); return err })
	if err != nil {
		return b.failed(shID, shTitle, fmt.Errorf("shell round trips: %w", err))
	}
	f := &benchlib.Figure{ID: shID, Title: shTitle, Measured: benchlib.Latency("bay", res[0])}
	f.AddBaseline(benchlib.Latency("Engine API exec `bash -lc true`", res[2]))
	f.AddBaseline(benchlib.Latency("ship /shell/exec direct", res[1]))
	f.RatioAtMost(1.2)
	if r := f.Baselines[1].Ratio; r > 0 {
		f.AtMost("ratio to ship /shell/exec direct", r, 1.2, "x")
	}
	f.Note("bay = POST .../shell/exec {command: true}; ship runs `bash -lc true` as user 1000; the Engine API exec runs the same argv as user 1000 (exec create + attach + inspect); %d round trips per side, alternating blocks", nSh)
	b.add(f)
	return nil
}
