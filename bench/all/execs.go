package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/bench/benchlib"
)

// The audited one-shot executions: one exec (POST /v1/sandbox/execs, wait, then its manifest)
// against `docker run --rm` of the same image and command through the Engine API, and a
// burst of execs at concurrency 4 against the same burst of raw runs.

// execScript is what both sides run: a line of output and one artifact.
const execScript = "echo hi; echo art > /workspace/artifacts/out.txt"

// execConcurrency is the number of clients of the burst figure (bay runs with
// max_concurrent_execs at least this).
const execConcurrency = 4

// bayExec runs one exec through bay and reads its manifest.
func (b *bench) bayExec(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	var rec bayapi.ExecResponse
	err := b.bay.do(ctx, http.MethodPost, bayapi.PathExecs, map[string]any{
		"project_id": "bench", "exec": map[string]any{"kind": "shell", "command": "bash", "args": []string{"-lc", execScript}},
	}, &rec)
	if err != nil {
		return 0, err
	}
	if rec.Status != "succeeded" {
		return 0, fmt.Errorf("exec %s ended %s: %s", rec.ExecID, rec.Status, rec.ErrorReason)
	}
	var m bayapi.ArtifactList
	if err := b.bay.do(ctx, http.MethodGet, "/v1/sandbox/execs/"+rec.ExecID+"/artifacts", nil, &m); err != nil {
		return 0, err
	}
	if len(m.Files) != 1 {
		return 0, fmt.Errorf("exec %s: manifest lists %d files, want 1", rec.ExecID, len(m.Files))
	}
	return time.Since(t0), nil
}

// rawRun is `docker run --rm` through the Engine API: the same image, command, hardening,
// limits and three bind mounts as bay's exec container, created with AutoRemove, attached,
// started, and waited for until the engine has removed it.
func (b *bench) rawRun(ctx context.Context, ws string) (time.Duration, error) {
	n := atomic.AddInt64(&b.execSeq, 1)
	art := filepath.Join(ws, "artifacts", fmt.Sprint(n))
	if err := os.MkdirAll(art, 0o755); err != nil {
		return 0, err
	}
	if err := os.Chown(art, 1000, 1000); err != nil && os.Geteuid() == 0 {
		return 0, err
	}
	pids := int64(256)
	noInit := false
	name := fmt.Sprintf("shipyard-bench-%s-run-%d", b.runID, n)
	t0 := time.Now()
	res, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name,
		Config: &container.Config{User: "1000:1000", Image: b.image, Entrypoint: []string{"bash"},
			Cmd: []string{"-lc", execScript}, WorkingDir: "/workspace/work",
			Labels: map[string]string{labelTest: "bench", labelRun: b.runID}},
		HostConfig: &container.HostConfig{
			NetworkMode: "none", CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges:true"},
			Init: &noInit, AutoRemove: true,
			Resources: container.Resources{NanoCPUs: 1e9, Memory: 1 << 30, MemorySwap: 1 << 30, PidsLimit: &pids},
			Mounts: []mount.Mount{
				{Type: mount.TypeBind, Source: filepath.Join(ws, "inputs"), Target: "/workspace/inputs", ReadOnly: true},
				{Type: mount.TypeBind, Source: filepath.Join(ws, "work"), Target: "/workspace/work"},
				{Type: mount.TypeBind, Source: art, Target: "/workspace/artifacts"},
			},
		}})
	if err != nil {
		return 0, fmt.Errorf("raw run: create: %w", err)
	}
	b.clean.container(res.ID)
	att, err := b.cli.ContainerAttach(ctx, res.ID, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return 0, fmt.Errorf("raw run: attach: %w", err)
	}
	defer att.Close()
	wait := b.cli.ContainerWait(ctx, res.ID, client.ContainerWaitOptions{Condition: container.WaitConditionRemoved})
	if _, err := b.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return 0, fmt.Errorf("raw run: start: %w", err)
	}
	if _, err := stdcopy.StdCopy(io.Discard, io.Discard, att.Reader); err != nil {
		return 0, fmt.Errorf("raw run: output: %w", err)
	}
	select {
	case r := <-wait.Result:
		if r.StatusCode != 0 {
			return 0, fmt.Errorf("raw run: exit code %d", r.StatusCode)
		}
	case err := <-wait.Error:
		return 0, fmt.Errorf("raw run: wait: %w", err)
	}
	d := time.Since(t0)
	b.clean.containerGone(res.ID)
	return d, nil
}

// rawWorkspace makes the baseline's inputs/ and work/ (uid 1000 writes work/).
func (b *bench) rawWorkspace() (string, error) {
	ws, err := os.MkdirTemp("", "shipyard-bench-ws-")
	if err != nil {
		return "", err
	}
	for _, d := range []string{"inputs", "work", "artifacts"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			return "", err
		}
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(filepath.Join(ws, "work"), 1000, 1000); err != nil {
			return "", err
		}
	}
	return ws, nil
}

func (b *bench) figExecOne(ctx context.Context) error {
	const id, title = "exec-one", "audited exec: create -> exit -> manifest"
	ws, err := b.rawWorkspace()
	if err != nil {
		return b.failed(id, title, err)
	}
	defer os.RemoveAll(ws)
	var bayT, rawT []time.Duration
	for i := -b.reps.ColdWarmup; i < b.reps.Cold; i++ {
		err := legs(ctx, i, nil,
			leg{&bayT, func(ctx context.Context, _ *parts) (time.Duration, error) { return b.bayExec(ctx) }},
			leg{&rawT, func(ctx context.Context, _ *parts) (time.Duration, error) { return b.rawRun(ctx, ws) }})
		if err != nil {
			return b.failed(id, title, fmt.Errorf("repetition %d: %w", i, err))
		}
	}
	f := &benchlib.Figure{ID: id, Title: title, Measured: benchlib.Latency("bay", bayT)}
	f.AddBaseline(benchlib.Latency("raw docker run --rm (Engine API)", rawT))
	f.RatioAtMost(1.2)
	f.Note("bay = POST /v1/sandbox/execs (wait) of `bash -lc %q` on project bench, status checked, then GET .../artifacts (the manifest, one file)", execScript)
	f.Note("baseline = what `docker run --rm` does, through the Engine API: create (same image, entrypoint bash, user 1000, network none, cap-drop ALL, no-new-privileges, 1 CPU, 1 GiB = swap, pids 256, the same three bind mounts, AutoRemove), attach stdout/stderr, start, read the output, wait until removed")
	f.Note("bay's side adds the audit record (three SQLite writes: queued, running, final), the workspace preparation, the output read back from the engine's log, sha256 of the artifacts, manifest.json and meta.json, and the container's removal")
	f.Note("%d repetitions per side after %d unmeasured round(s), sides interleaved in rotating order", b.reps.Cold, b.reps.ColdWarmup)
	b.add(f)
	return nil
}

func (b *bench) figExecBurst(ctx context.Context) error {
	n := b.reps.ExecBurst
	id, title := "exec-burst", fmt.Sprintf("%d audited execs at concurrency %d", n, execConcurrency)
	ws, err := b.rawWorkspace()
	if err != nil {
		return b.failed(id, title, err)
	}
	defer os.RemoveAll(ws)
	// burst runs count executions of run with execConcurrency clients and returns their
	// latencies and the wall time.
	burst := func(count int, run func(context.Context) (time.Duration, error)) ([]time.Duration, time.Duration, error) {
		var mu sync.Mutex
		var lat []time.Duration
		var first error
		var next atomic.Int64
		var wg sync.WaitGroup
		t0 := time.Now()
		for range execConcurrency {
			wg.Go(func() {
				for next.Add(1) <= int64(count) {
					d, err := run(ctx)
					mu.Lock()
					if err != nil && first == nil {
						first = err
					}
					lat = append(lat, d)
					mu.Unlock()
					if err != nil {
						return
					}
				}
			})
		}
		wg.Wait()
		return lat, time.Since(t0), first
	}
	// The sides alternate in blocks (the first side rotating), so that drift in the machine's
	// load hits both alike.
	const block = 20
	var bayLat, rawLat []time.Duration
	var bayWall, rawWall time.Duration
	rawRun := func(ctx context.Context) (time.Duration, error) { return b.rawRun(ctx, ws) }
	for k, done := 0, 0; done < n; k++ {
		m := min(block, n-done)
		for side := range 2 {
			if (side+k)%2 == 0 {
				l, w, err := burst(m, b.bayExec)
				if err != nil {
					return b.failed(id, title, fmt.Errorf("bay: %w", err))
				}
				bayLat, bayWall = append(bayLat, l...), bayWall+w
			} else {
				l, w, err := burst(m, rawRun)
				if err != nil {
					return b.failed(id, title, fmt.Errorf("raw: %w", err))
				}
				rawLat, rawWall = append(rawLat, l...), rawWall+w
			}
		}
		done += m
	}
	bayRate, rawRate := float64(n)/bayWall.Seconds(), float64(n)/rawWall.Seconds()
	f := &benchlib.Figure{ID: id, Title: title, Measured: benchlib.Latency("bay, per exec", bayLat)}
	f.AddBaseline(benchlib.Latency("raw docker run --rm, per run", rawLat))
	f.Breakdown = []benchlib.Series{
		benchlib.Scalar("bay throughput", bayRate, "execs/s"),
		benchlib.Scalar("raw throughput", rawRate, "runs/s"),
		benchlib.Scalar("bay wall time", float64(bayWall.Milliseconds()), "ms"),
		benchlib.Scalar("raw wall time", float64(rawWall.Milliseconds()), "ms"),
	}
	f.AtLeast("throughput relative to raw", bayRate/rawRate, 1/1.2, "x")
	f.Note("%d clients each posting execs one after the other (wait) until %d in all, in blocks of %d alternating with the same blocks of raw `docker run --rm` runs (the first side rotating); bay runs with max_concurrent_execs %d; throughput = executions / summed wall time of the side's blocks; p99 is nearest-rank", execConcurrency, n, block, execConcurrency)
	b.add(f)
	return nil
}
