package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/bench/benchlib"
)

// figConcurrent starts C clients at once, each POST /v1/sandboxes + shell `true` (the exec
// starts the container), and counts errors.
func (b *bench) figConcurrent(ctx context.Context) error {
	c := b.reps.Concurrent
	id, title := "concurrent", fmt.Sprintf("%d concurrent cold creates + first exec", c)
	var mu sync.Mutex
	var ids []string
	var lat []time.Duration
	var errs []string
	defer func() { b.deleteAll(ctx, ids, 8) }()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			sid, _, err := b.create(ctx, profileCold)
			if err == nil {
				mu.Lock()
				ids = append(ids, sid)
				mu.Unlock()
				err = b.shell(ctx, sid, shellCmd)
			}
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err.Error())
				return
			}
			lat = append(lat, d)
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	wall := time.Since(t0)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	f := &benchlib.Figure{ID: id, Title: title, Measured: benchlib.Latency("bay, per client", lat)}
	f.AtMost("errors", float64(len(errs)), 0, "")
	f.Breakdown = []benchlib.Series{
		benchlib.Scalar("wall time for all", float64(wall.Milliseconds()), "ms"),
		benchlib.Scalar("errors", float64(len(errs)), ""),
	}
	f.Note("%d clients released together; each POST /v1/sandboxes then POST .../shell/exec `true` (which creates and starts the container); latency per client from its POST to its result", c)
	for i, e := range errs {
		if i == 5 {
			f.Note("... %d more errors", len(errs)-5)
			break
		}
		f.Note("error: %s", e)
	}
	b.add(f)
	return nil
}
