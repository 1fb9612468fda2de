package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/bench/benchlib"
)

// warmPoolReady reports how many warm-pool containers of this bay are running with ship
// healthy and the kernel alive (the steady state of a pool filled a while ago).
func (b *bench) warmPoolReady(ctx context.Context) (int, error) {
	res, err := b.cli.ContainerList(ctx, client.ContainerListOptions{Filters: make(client.Filters).
		Add("label", "bay.instance_id="+b.bay.Instance, "bay.profile_id="+profileWarm)})
	if err != nil {
		return 0, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ready := 0
	for _, c := range res.Items {
		_, url, err := b.sandboxContainer(ctx, c.Labels["bay.sandbox_id"]) // with its runtime token
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b.kernelAlive(ctx, url) {
				mu.Lock()
				ready++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ready, nil
}

func (b *bench) kernelAlive(ctx context.Context, endpoint string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+shipapi.PathKernelStatus, nil)
	resp, err := b.shipHTTP.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var st shipapi.KernelStatusResponse
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil && st.Status == "alive"
}

// waitWarmPool waits until the pool is full (every warm container's kernel alive), then a
// little more so that bay has recorded the last one as available.
func (b *bench) waitWarmPool(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	lastLog := time.Now()
	for {
		n, err := b.warmPoolReady(ctx)
		if err != nil {
			return fmt.Errorf("warm pool: %w", err)
		}
		if n >= b.warmPool {
			break
		}
		if time.Since(lastLog) > 5*time.Second {
			b.log.Info("waiting for the warm pool", "ready", n, "size", b.warmPool)
			lastLog = time.Now()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("warm pool of %q: %d of %d sandboxes ready after %s (see %s)", profileWarm, n, b.warmPool, limit, b.bay.LogPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(200 * time.Millisecond):
	}
	return nil
}

// figWarm measures POST /v1/sandboxes on the pooled profile (a claim) + the first python
// `1+1`, with the pool full before each repetition; the baseline is the cold create of the
// same run (figColdPython's bay series).
func (b *bench) figWarm(ctx context.Context) error {
	const id, title = "warm-claim", "warm-pool claim -> first python result (`1+1`)"
	var warm, post, first, second []time.Duration
	misses := 0
	for i := -1; i < b.reps.Warm; i++ {
		if err := b.waitWarmPool(ctx, 2*time.Minute); err != nil {
			return b.failed(id, title, err)
		}
		t0 := time.Now()
		sid, hit, err := b.create(ctx, profileWarm)
		if err != nil {
			return b.failed(id, title, err)
		}
		tPost := time.Now()
		err = b.python(ctx, sid, "1+1", "2")
		d := time.Since(t0)
		var d2 time.Duration
		if err == nil {
			d2, err = benchlib.Time(func() error { return b.python(ctx, sid, "1+1", "2") })
		}
		b.deleteSandbox(ctx, sid)
		if err != nil {
			return b.failed(id, title, err)
		}
		if i < 0 {
			continue
		}
		if !hit {
			misses++
			continue
		}
		warm = append(warm, d)
		post = append(post, tPost.Sub(t0))
		first = append(first, d-tPost.Sub(t0))
		second = append(second, d2)
	}
	f := &benchlib.Figure{ID: id, Title: title, Measured: benchlib.Latency("bay, warm claim", warm)}
	if b.coldPython != nil {
		f.AddBaseline(*b.coldPython)
		f.Baselines[0].Name = "bay cold create (same run)"
	}
	if len(warm) == 0 {
		return b.failed(id, title, fmt.Errorf("all %d creates missed the warm pool", b.reps.Warm))
	}
	f.AtMost("p50", f.Measured.Stats.P50, 50, "ms")
	f.AtMost("p99", f.Measured.Stats.P99, 150, "ms")
	f.Breakdown = []benchlib.Series{
		benchlib.Latency("POST /v1/sandboxes (the claim)", post),
		benchlib.Latency("first python/exec on the claimed sandbox", first),
		benchlib.Latency("second python/exec (not in the figure: steady state for comparison)", second),
	}
	f.Note("before each repetition the pool (size %d) is waited for until every warm container's kernel reports alive: the steady state of a pool filled earlier; each claimed sandbox is deleted after its repetition", b.warmPool)
	f.Note("%d of %d creates missed the pool (answered idle_expires_at null) and are excluded", misses, b.reps.Warm)
	b.add(f)
	return nil
}
