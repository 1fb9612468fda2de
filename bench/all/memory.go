package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/bench/benchlib"
)

// figMemory starts N ready sandboxes (python answered once) and reads: ship's and the
// kernel's RSS (ship /stat), each container's cgroup memory (Engine API stats), and bay's RSS
// before and after. The capacity on 24 GiB is extrapolated from the mean per-sandbox working
// set.
func (b *bench) figMemory(ctx context.Context) error {
	n := b.reps.ReadyN
	titles := map[string]string{
		"ship-rss":    "ship RSS, idle in a ready sandbox",
		"kernel-rss":  "ipykernel RSS, idle in a ready sandbox",
		"sandbox-mem": "memory per ready sandbox (container cgroup)",
		"bay-rss":     fmt.Sprintf("bay RSS with %d ready sandboxes", n),
	}
	failAll := func(err error) error {
		for _, k := range []string{"ship-rss", "kernel-rss", "sandbox-mem", "bay-rss"} {
			b.failed(k, titles[k], err)
		}
		return err
	}
	pid := b.bay.proc.PID()
	bayBefore := benchlib.RSS(pid)

	type sb struct{ id, cid, ep string }
	sbs := make([]sb, n)
	var ids []string
	var mu sync.Mutex
	defer func() { b.deleteAll(ctx, ids, 4) }()
	errs := make(chan error, n)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			id, cid, ep, err := b.readySandbox(ctx, profileCold)
			mu.Lock()
			if id != "" {
				ids = append(ids, id)
			}
			mu.Unlock()
			sbs[i] = sb{id, cid, ep}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return failAll(fmt.Errorf("start %d ready sandboxes: %w", n, err))
		}
	}
	// Let the kernels and ship settle after their first execution.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.reps.Settle):
	}
	var shipRSS, kernRSS, ws, usage, anon []float64
	for _, s := range sbs {
		st, err := b.shipStat(ctx, s.ep)
		if err != nil {
			return failAll(err)
		}
		m, err := benchlib.ReadContainerMemory(ctx, b.cli, s.cid)
		if err != nil {
			return failAll(err)
		}
		shipRSS = append(shipRSS, benchlib.MiB(st.RSSBytes))
		kernRSS = append(kernRSS, benchlib.MiB(st.KernelRSS))
		ws = append(ws, benchlib.MiB(m.WorkingSet))
		usage = append(usage, benchlib.MiB(m.Usage))
		anon = append(anon, benchlib.MiB(m.RSS))
	}
	bayAfter := benchlib.RSS(pid)
	bayAnon, bayFile := benchlib.RSSAnon(pid), benchlib.RSSFile(pid)

	series := func(name string, vs []float64) benchlib.Series {
		s := benchlib.SummarizeValues(vs, "MiB")
		return benchlib.Series{Name: name, Stats: &s, Unit: "MiB"}
	}
	f := &benchlib.Figure{ID: "ship-rss", Title: titles["ship-rss"], Measured: series("ship VmRSS", shipRSS)}
	f.AtMost("max", f.Measured.Stats.Max, 15, "MiB")
	f.Note("ship's /stat rss_bytes (VmRSS of ship itself, kernel excluded) in each of the %d ready sandboxes, %s after their first python call", n, b.reps.Settle)
	b.add(f)

	f = &benchlib.Figure{ID: "kernel-rss", Title: titles["kernel-rss"], Measured: series("ipykernel VmRSS", kernRSS)}
	f.Note("ship's /stat kernel_rss_bytes (the ipykernel process) after one `1+1`")
	b.add(f)

	wsStats := benchlib.SummarizeValues(ws, "MiB")
	budget := 24 * 1024.0 // MiB
	capacity := (budget - benchlib.MiB(bayAfter)) / wsStats.Mean
	capacityMax := (budget - benchlib.MiB(bayAfter)) / wsStats.Max
	f = &benchlib.Figure{ID: "sandbox-mem", Title: titles["sandbox-mem"], Measured: series("working set (usage - inactive file)", ws)}
	f.AtLeast("ready sandboxes on 24 GiB", capacity, 150, "")
	f.Breakdown = []benchlib.Series{
		series("cgroup usage incl. page cache", usage),
		series("anonymous memory (total_rss)", anon),
		benchlib.Scalar("extrapolated capacity on 24 GiB from the mean working set", capacity, "sandboxes"),
		benchlib.Scalar("extrapolated capacity on 24 GiB from the largest working set", capacityMax, "sandboxes"),
	}
	f.Note("%d ready sandboxes actually started (each answered python `1+1`), plus the %d warm-pool sandboxes of the other profile; memory read with the Engine API stats (one shot) %s after", n, b.warmPool, b.reps.Settle)
	f.Note("capacity = (24 GiB - bay RSS) / mean per-sandbox working set; the page cache (image files, the workspace) is shared or reclaimable and not counted")
	b.add(f)

	f = &benchlib.Figure{ID: "bay-rss", Title: titles["bay-rss"], Measured: benchlib.Scalar("bay VmRSS", benchlib.MiB(bayAfter), "MiB")}
	f.Breakdown = []benchlib.Series{
		benchlib.Scalar("bay VmRSS before the sandboxes", benchlib.MiB(bayBefore), "MiB"),
		benchlib.Scalar("growth per ready sandbox", benchlib.MiB(bayAfter-bayBefore)/float64(n), "MiB"),
		benchlib.Scalar("bay VmHWM (peak since start)", benchlib.MiB(benchlib.HWM(pid)), "MiB"),
		benchlib.Scalar("of which anonymous (RssAnon: heap, stacks)", benchlib.MiB(bayAnon), "MiB"),
		benchlib.Scalar("of which file pages (RssFile: the mapped binary, clean and shared with the page cache)", benchlib.MiB(bayFile), "MiB"),
	}
	b.add(f)
	return nil
}
