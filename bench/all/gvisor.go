package main

import (
	"context"
	"fmt"
	"time"

	"github.com/shipyard-dev/shipyard/bench/benchlib"
)

// figGVisorCold measures cold create -> first shell result and -> first python result of a
// profile under gVisor (runtime: runsc) against the same profile under runc, through bay, in
// the same run, interleaved in rotating order.
func (b *bench) figGVisorCold(ctx context.Context) error {
	for _, c := range []struct {
		id, title string
		kernel    bool
		run       func(ctx context.Context, id string) error
	}{
		{"gvisor-cold-shell", "gVisor: cold create -> first shell result (`true`), runsc vs runc", false,
			func(ctx context.Context, id string) error { return b.shell(ctx, id, shellCmd) }},
		{"gvisor-cold-python", "gVisor: cold create -> first python result (`1+1`), runsc vs runc", true,
			func(ctx context.Context, id string) error { return b.python(ctx, id, "1+1", "2") }},
	} {
		var runsc, runc []time.Duration
		// legs hands nil in warm-up rounds: each side keeps its breakdown apart.
		ppRunsc, ppRunc := newParts(), newParts()
		for i := -b.reps.ColdWarmup; i < b.reps.Cold; i++ {
			err := legs(ctx, i, newParts(),
				leg{&runsc, func(ctx context.Context, pp *parts) (time.Duration, error) {
					return b.coldBayOf(ctx, pick(pp != nil, ppRunsc), profileGVisor, c.kernel, c.run)
				}},
				leg{&runc, func(ctx context.Context, pp *parts) (time.Duration, error) {
					return b.coldBayOf(ctx, pick(pp != nil, ppRunc), profileCold, c.kernel, c.run)
				}})
			if err != nil {
				b.failed(c.id, c.title, fmt.Errorf("repetition %d: %w", i, err))
				return err
			}
		}
		f := &benchlib.Figure{ID: c.id, Title: c.title, Measured: benchlib.Latency("bay, runsc", runsc)}
		f.AddBaseline(benchlib.Latency("bay, runc (the same profile without runtime)", runc))
		f.Breakdown = append(ppRunsc.series("runsc "), ppRunc.series("runc ")...)
		f.Note("runsc = POST /v1/sandboxes {profile: %s} (runtime: runsc, gVisor's systrap platform, registered by scripts/gvisor.sh) then the first call; runc = the same on %s; same image, limits and hardening", profileGVisor, profileCold)
		f.Note("no target: the ratio is what gVisor costs here (docs/gvisor.md); %d repetitions per side after %d unmeasured round(s), interleaved in rotating order", b.reps.Cold, b.reps.ColdWarmup)
		b.add(f)
	}
	return nil
}

// figGVisorReady measures python `1+1` and shell `true` through bay on a ready sandbox under
// runsc against one under runc, in alternating blocks.
func (b *bench) figGVisorReady(ctx context.Context) error {
	const pyID, pyTitle = "gvisor-ready-python", "gVisor: python `1+1` through bay on a ready sandbox, runsc vs runc"
	const shID, shTitle = "gvisor-ready-shell", "gVisor: shell `true` through bay on a ready sandbox, runsc vs runc"
	var ids []string
	defer func() {
		for _, id := range ids {
			b.deleteSandbox(ctx, id)
		}
	}()
	for _, p := range []string{profileGVisor, profileCold} {
		id, _, _, err := b.readySandbox(ctx, p)
		if id != "" {
			ids = append(ids, id)
		}
		if err != nil {
			b.failed(pyID, pyTitle, err)
			return b.failed(shID, shTitle, err)
		}
	}
	n := b.reps.Ready
	py, err := interleave(ctx, 20, n,
		func(ctx context.Context) error { return b.python(ctx, ids[0], "1+1", "2") },
		func(ctx context.Context) error { return b.python(ctx, ids[1], "1+1", "2") })
	if err != nil {
		return b.failed(pyID, pyTitle, err)
	}
	nSh := max(n*3/5, 20)
	sh, err := interleave(ctx, 10, nSh,
		func(ctx context.Context) error { return b.shell(ctx, ids[0], shellCmd) },
		func(ctx context.Context) error { return b.shell(ctx, ids[1], shellCmd) })
	if err != nil {
		return b.failed(shID, shTitle, err)
	}
	for _, c := range []struct {
		id, title string
		res       [][]time.Duration
		n         int
	}{{pyID, pyTitle, py, n}, {shID, shTitle, sh, nSh}} {
		f := &benchlib.Figure{ID: c.id, Title: c.title, Measured: benchlib.Latency("bay, runsc", c.res[0])}
		f.AddBaseline(benchlib.Latency("bay, runc", c.res[1]))
		f.Note("one ready sandbox of %s (runsc) and one of %s (runc); %d round trips per side in alternating blocks of 10 after unmeasured ones; no target: the ratio is what gVisor costs here", profileGVisor, profileCold, c.n)
		b.add(f)
	}
	return nil
}
