// Command lazycreate measures lazy sandbox creation through bay's HTTP API: POST
// /v1/sandboxes with {} (no container is started) against the whole in-process bay on
// loopback (HTTP server, auth, idempotency layer, lifecycle service, SQLite file, the real
// Docker driver). It runs the create twice: with the managed cargo's volume created at create
// time ("eager", one Docker API call per create) and with the volume created at the
// sandbox's first start ("lazy", the create is database work only), and breaks the eager cost
// down by timing Docker volume creation alone.
//
// Targets (lazy mode, the default of bay): throughput >= 1000 creates/s, p50 <= 2 ms.
//
// Usage: go run ./bench/lazycreate -out DIR [-n 3000] [-c 4]
//
// It writes DIR/lazycreate.json and DIR/lazycreate.md and prints the table. Every sandbox and
// volume it creates is deleted.
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/bench/benchlib"
	"github.com/shipyard-dev/shipyard/bench/benchlib/inproc"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/app"
	"github.com/shipyard-dev/shipyard/internal/bay/docker"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lazycreate:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "output directory (required)")
	n := flag.Int("n", 3000, "creates measured per mode")
	conc := flag.Int("c", 4, "concurrent clients")
	eagerN := flag.Int("eager-n", 500, "creates measured in eager-volume mode")
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

	rep := &benchlib.Report{Title: "Lazy sandbox create through the HTTP API", Date: time.Now().UTC(), Machine: benchlib.ReadMachine(),
		GitRev: benchlib.GitRevision(".")}
	rep.Notes = append(rep.Notes, fmt.Sprintf("bay in-process on loopback (HTTP, anonymous auth, idempotency layer, lifecycle service, SQLite file, Docker driver); %d concurrent clients with keep-alive", *conc))

	lazy, err := measure(ctx, *out, true, *n, *conc)
	if err != nil {
		return fmt.Errorf("lazy: %w", err)
	}
	eager, err := measure(ctx, *out, false, *eagerN, *conc)
	if err != nil {
		return fmt.Errorf("eager: %w", err)
	}
	vol, err := volumeCost(ctx, 200)
	if err != nil {
		return fmt.Errorf("volume cost: %w", err)
	}

	f := &benchlib.Figure{ID: "lazy-create", Title: "POST /v1/sandboxes {} (lazy: no container, volume at first start)",
		Measured: benchlib.Latency("lazy create", lazy.lat)}
	f.AddBaseline(benchlib.Latency("eager create (volume created at create time)", eager.lat))
	f.Breakdown = append(f.Breakdown,
		benchlib.Scalar("lazy throughput", lazy.rate, "creates/s"),
		benchlib.Scalar("eager throughput", eager.rate, "creates/s"),
		benchlib.Latency("Docker volume create alone (sequential)", vol))
	f.AtLeast("lazy throughput", lazy.rate, 1000, "creates/s")
	f.AtMost("lazy p50", f.Measured.Stats.P50, 2, "ms")
	f.Note("lazy: %d creates in %s with %d clients; eager: %d creates in %s", len(lazy.lat), lazy.wall.Round(time.Millisecond), *conc, len(eager.lat), eager.wall.Round(time.Millisecond))
	f.Note("the eager create is dominated by the Docker volume create (p50 %.2f ms alone, serialised by the engine); bay therefore creates managed volumes lazily, right before the first container", benchlib.Summarize(vol).P50)
	rep.Figures = append(rep.Figures, f)
	rep.Duration = time.Since(began).Round(time.Second).String()
	md, err := rep.Write(*out, "lazycreate")
	if err != nil {
		return err
	}
	fmt.Println(md)
	if !f.Pass() {
		return errors.New("targets not met")
	}
	return nil
}

type result struct {
	lat  []time.Duration
	wall time.Duration
	rate float64
}

// measure runs one bay with lazy (default) or eager volume creation, warms it up, then times n creates from conc
// clients, and deletes everything it created.
func measure(ctx context.Context, out string, lazy bool, n, conc int) (result, error) {
	mode := map[bool]string{true: "lazy", false: "eager"}[lazy]
	instance := fmt.Sprintf("bench-lazycreate-%d-%s", os.Getpid(), mode)
	config := func(dir string) string {
		return fmt.Sprintf(`database:
  url: "sqlite:///%s/bay.db"
security:
  allow_anonymous: true
gc:
  enabled: false
  instance_id: %q
warm_pool:
  enabled: false
profiles:
  - id: python-default
    image: "ship:latest"
`, dir, instance)
	}
	b, err := inproc.New(inproc.Options{TempPrefix: "lazycreate-", Config: config,
		LogPath: filepath.Join(out, "lazycreate-"+mode+"-bay.log"), LogLevel: slog.LevelWarn})
	if err != nil {
		return result{}, err
	}
	defer b.Close()
	m := b.Main
	m.Tune = func(c *sandbox.Config) { c.EagerVolume = !lazy }
	if err := b.Start(ctx); err != nil {
		return result{}, err
	}
	base := b.URL()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc * 2}, Timeout: time.Minute}

	var mu sync.Mutex
	var ids []string
	create := func() (time.Duration, error) {
		t0 := time.Now()
		resp, err := hc.Post(base+bayapi.PathSandboxes, "application/json", bytes.NewReader([]byte("{}")))
		if err != nil {
			return 0, err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if resp.StatusCode != http.StatusCreated {
			return 0, fmt.Errorf("create: %d %s", resp.StatusCode, body)
		}
		var sb bayapi.SandboxResponse
		if err := json.Unmarshal(body, &sb); err != nil || sb.ID == "" {
			return 0, fmt.Errorf("create: bad body %q: %v", body, err)
		}
		mu.Lock()
		ids = append(ids, sb.ID)
		mu.Unlock()
		return d, nil
	}
	defer cleanup(m, instance, &ids)

	// Warm-up (connections, prepared statements, page cache): untimed.
	if _, err := batch(ctx, min(n/5, 200), conc, create); err != nil {
		return result{}, err
	}
	t0 := time.Now()
	lat, err := batch(ctx, n, conc, create)
	wall := time.Since(t0)
	if err != nil {
		return result{}, err
	}
	return result{lat: lat, wall: wall, rate: float64(len(lat)) / wall.Seconds()}, nil
}

// batch runs fn n times from conc goroutines and returns the latencies.
func batch(ctx context.Context, n, conc int, fn func() (time.Duration, error)) ([]time.Duration, error) {
	var next atomic.Int64
	lat := make([]time.Duration, n)
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				d, err := fn()
				if err != nil {
					errs <- err
					return
				}
				lat[i] = d
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return lat, nil
}

// cleanup deletes every sandbox created (with its managed cargo and volume, if any) and any
// volume left with this run's instance label.
func cleanup(m *app.Main, instance string, ids *[]string) {
	svc := m.Service()
	if svc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	list := *ids
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(list) {
					return
				}
				if _, err := svc.ReclaimSandbox(ctx, bay.Pin{SandboxID: list[i], Reason: bay.ReasonOrphan}); err != nil {
					fmt.Fprintln(os.Stderr, "lazycreate: cleanup:", err)
				}
			}
		}()
	}
	wg.Wait()
	drv := svc.Driver()
	if vols, err := drv.ListVolumes(ctx, map[string]string{bay.LabelInstanceID: instance}); err == nil {
		for _, v := range vols {
			_ = drv.DeleteVolume(ctx, v.Name)
		}
	}
}

// volumeCost times Docker volume create (and removes each volume) n times, sequentially.
func volumeCost(ctx context.Context, n int) ([]time.Duration, error) {
	drv, err := docker.New(docker.DefaultConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer drv.Close()
	var ds []time.Duration
	for i := range n {
		name := fmt.Sprintf("bench-lazycreate-vol-%d-%d", os.Getpid(), i)
		t0 := time.Now()
		ref, err := drv.CreateVolume(ctx, bay.VolumeSpec{Name: name, Labels: map[string]string{bay.LabelManaged: "true"}})
		if err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t0))
		if err := drv.DeleteVolume(ctx, ref); err != nil {
			return nil, err
		}
	}
	return ds, nil
}
