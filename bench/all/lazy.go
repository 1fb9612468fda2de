package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/bench/benchlib"
)

// deleteAll deletes sandboxes through bay with workers in parallel (not timed).
func (b *bench) deleteAll(ctx context.Context, ids []string, workers int) error {
	ch := make(chan string)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ch {
				if err := b.deleteSandbox(ctx, id); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, id := range ids {
		ch <- id
	}
	close(ch)
	wg.Wait()
	return first
}

// figLazyCreate measures POST /v1/sandboxes alone (no container is started by a create):
// sequential latency, and throughput with 8 concurrent clients.
func (b *bench) figLazyCreate(ctx context.Context) error {
	const id, title = "lazy-create", "lazy create (POST /v1/sandboxes, no container)"
	var ids []string
	defer func() { b.deleteAll(ctx, ids, 4) }()

	volsBefore, err := b.bayVolumes(ctx)
	if err != nil {
		return b.failed(id, title, err)
	}
	seq, err := benchlib.Repeat(ctx, 5, b.reps.Lazy, func(ctx context.Context, i int) (time.Duration, error) {
		t0 := time.Now()
		sid, _, err := b.create(ctx, profileCold)
		d := time.Since(t0)
		if sid != "" {
			ids = append(ids, sid)
		}
		return d, err
	})
	if err != nil {
		return b.failed(id, title, err)
	}

	volsAfter, err := b.bayVolumes(ctx)
	if err != nil {
		return b.failed(id, title, err)
	}

	// Throughput: LazyBurst creates by 8 workers.
	const workers = 8
	var mu sync.Mutex
	var burst []time.Duration
	var firstErr error
	next := make(chan struct{})
	var wg sync.WaitGroup
	t0 := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				t := time.Now()
				sid, _, err := b.create(ctx, profileCold)
				d := time.Since(t)
				mu.Lock()
				if sid != "" {
					ids = append(ids, sid)
				}
				if err != nil && firstErr == nil {
					firstErr = err
				}
				burst = append(burst, d)
				mu.Unlock()
			}
		}()
	}
	for range b.reps.LazyBurst {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	wall := time.Since(t0)
	if firstErr != nil {
		return b.failed(id, title, fmt.Errorf("burst: %w", firstErr))
	}
	rate := float64(b.reps.LazyBurst) / wall.Seconds()

	// What one create must physically do while bay creates the cargo volume eagerly.
	vols, err := benchlib.Repeat(ctx, 2, min(b.reps.Lazy, 100), func(ctx context.Context, i int) (time.Duration, error) {
		name := fmt.Sprintf("shipyard-bench-%s-vol-%d", b.runID, i+10)
		t := time.Now()
		_, err := b.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: map[string]string{labelTest: "bench", labelRun: b.runID}})
		d := time.Since(t)
		if err == nil {
			b.clean.volume(name)
			rctx, cancel := detached(ctx, 10*time.Second)
			if _, err := b.cli.VolumeRemove(rctx, name, client.VolumeRemoveOptions{Force: true}); err == nil {
				b.clean.volumeGone(name)
			}
			cancel()
		}
		return d, err
	})
	if err != nil {
		return b.failed(id, title, fmt.Errorf("raw volume create: %w", err))
	}

	f := &benchlib.Figure{ID: id, Title: title, Measured: benchlib.Latency("bay, sequential", seq)}
	f.AddBaseline(benchlib.Latency("raw Engine API volume create", vols))
	f.AtMost("p50", f.Measured.Stats.P50, 2, "ms")
	f.AtLeast("throughput, 8 clients", rate, 1000, "/s")
	f.Breakdown = []benchlib.Series{
		benchlib.Scalar("throughput with 8 concurrent clients", rate, "creates/s"),
		benchlib.Latency("latency under 8 concurrent clients", burst),
	}
	f.Note("%d sequential creates (after 5 unmeasured), then %d creates by %d concurrent clients in %s; all deleted afterwards (not timed)", b.reps.Lazy, b.reps.LazyBurst, workers, wall.Round(time.Millisecond))
	f.Note("the %d sequential creates made %d Docker volumes (0 = the cargo volume is created at the first start, a create is database work only); the baseline is what an eager volume create would add to each", b.reps.Lazy+5, volsAfter-volsBefore)
	b.add(f)
	return nil
}

// bayVolumes counts the volumes carrying this bay's instance label.
func (b *bench) bayVolumes(ctx context.Context) (int, error) {
	res, err := b.cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", "bay.instance_id="+b.bay.Instance)})
	if err != nil {
		return 0, fmt.Errorf("list volumes: %w", err)
	}
	return len(res.Items), nil
}
