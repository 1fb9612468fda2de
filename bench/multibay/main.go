// Command multibay measures what several bays on one PostgreSQL give over one: requests per
// second and latency (p50, p99) of a control-plane request mix that starts no container,
// against
//
//   - three bay processes on one PostgreSQL database behind a round-robin proxy,
//   - one bay process on the same database behind the same proxy,
//   - one bay process on its own SQLite file behind the same proxy (the default deployment),
//
// all on this machine, in the same run, each driven by the same N concurrent clients with
// keep-alive. One iteration of a client is six requests on a sandbox of its own: lazy create
// (POST /v1/sandboxes {}: rows only, no container, no volume), GET, list (limit 20), extend_ttl,
// keepalive, DELETE. The sides are measured in rounds (-rounds, each side -d per round, the
// order rotating) so that drift on the shared machine hits every side alike.
//
// PostgreSQL is Debian's server started by internal/testenv/pgtest (Unix socket, fsync off),
// bay the real binary (-bay, default bin/bay: make build) with the Docker driver and GC off.
//
// Usage: go run ./bench/multibay -out DIR [-c 16] [-d 5s] [-rounds 3] [-bay bin/bay]
//
// It writes DIR/multibay.json and DIR/multibay.md (bays' logs beside them) and prints the table.
// Every sandbox it creates is deleted by the mix itself.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/bench/benchlib"
	"github.com/shipyard-dev/shipyard/internal/testenv"
	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
)

const apiKey = "sk-bench-multibay-0123456789abcdef"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "multibay:", err)
		os.Exit(1)
	}
}

// side is one deployment under test: a proxy in front of its bays.
type side struct {
	name  string
	proxy *testenv.RoundRobin
	lat   []time.Duration
	ops   map[string][]time.Duration
	reqs  int
	wall  time.Duration
}

func (s *side) rate() float64 { return float64(s.reqs) / s.wall.Seconds() }

func run() error {
	out := flag.String("out", "", "output directory (required)")
	conc := flag.Int("c", 16, "concurrent clients")
	dur := flag.Duration("d", 5*time.Second, "measuring time per side and round")
	rounds := flag.Int("rounds", 3, "rounds (every side measured once per round, order rotating)")
	bayBin := flag.String("bay", "bin/bay", "bay binary (make build)")
	flag.Parse()
	switch {
	case *out == "":
		return errors.New("-out is required")
	case *conc < 1 || *conc > 1024:
		return errors.New("-c must be 1..1024")
	case *dur < 100*time.Millisecond || *dur > 10*time.Minute:
		return errors.New("-d must be 100ms..10m")
	case *rounds < 1 || *rounds > 100:
		return errors.New("-rounds must be 1..100")
	}
	bin, err := filepath.Abs(*bayBin) // bay runs in a directory of its own
	if err != nil {
		return err
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		return fmt.Errorf("bay binary %s not found: run `make build` first (or pass -bay)", *bayBin)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	rep := &benchlib.Report{Title: "Several bays on one PostgreSQL vs one bay", Date: time.Now().UTC(),
		Machine: benchlib.ReadMachine(), GitRev: benchlib.GitRevision("."), LoadStart: benchlib.LoadAvg()}

	// Bay refuses to start without the engine (its driver pings it); the header names it.
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	if rep.Docker, err = benchlib.DockerVersion(ctx, cli); err != nil {
		return err
	}

	pg, err := pgtest.Start(ctx)
	if err != nil {
		return fmt.Errorf("start postgresql: %w", err)
	}
	defer pg.Stop()
	if err := pg.Exec(ctx, "CREATE DATABASE bench_multibay"); err != nil {
		return err
	}
	dbURL := pg.URL("bench_multibay")

	var procs []*testenv.BayProcess
	defer func() {
		for _, p := range procs {
			_ = p.Stop(20 * time.Second)
		}
	}()
	start := func(name, db string) (string, error) {
		p, err := startBay(ctx, bin, *out, name, db)
		if err != nil {
			return "", err
		}
		procs = append(procs, p)
		return p.URL, nil
	}
	// The first bay on the database migrates it; the others find it migrated.
	var pgURLs []string
	for i := range 3 {
		u, err := start(fmt.Sprintf("pg%d", i), dbURL)
		if err != nil {
			return err
		}
		pgURLs = append(pgURLs, u)
	}
	sqliteURL, err := start("sqlite", "")
	if err != nil {
		return err
	}
	var sides []*side
	for _, s := range []struct {
		name string
		urls []string
	}{{"3 bays, PostgreSQL", pgURLs}, {"1 bay, PostgreSQL", pgURLs[:1]}, {"1 bay, SQLite", []string{sqliteURL}}} {
		p, err := testenv.StartRoundRobin(s.urls...)
		if err != nil {
			return err
		}
		defer p.Close()
		sides = append(sides, &side{name: s.name, proxy: p, ops: map[string][]time.Duration{}})
	}

	// Warm-up (connections, prepared statements, caches): one short untimed pass per side.
	for _, s := range sides {
		if _, _, err := drive(ctx, s.proxy.URL, *conc, min(*dur, time.Second)); err != nil {
			return fmt.Errorf("%s: warm-up: %w", s.name, err)
		}
	}
	for r := range *rounds {
		for k := range sides {
			s := sides[(r+k)%len(sides)]
			t0 := time.Now()
			lat, ops, err := drive(ctx, s.proxy.URL, *conc, *dur)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			s.wall += time.Since(t0)
			for _, o := range ops {
				s.ops[o.op] = append(s.ops[o.op], o.d)
			}
			s.lat = append(s.lat, lat...)
			s.reqs += len(lat)
		}
	}

	three, one, lite := sides[0], sides[1], sides[2]
	tput := &benchlib.Figure{ID: "multibay-throughput", Title: "control-plane mix (lazy create, get, list, extend_ttl, keepalive, delete): 3 bays on one PostgreSQL behind a round-robin proxy",
		Measured: benchlib.Scalar(three.name, three.rate(), "req/s")}
	tput.AddBaseline(benchlib.Scalar(one.name, one.rate(), "req/s"))
	tput.AddBaseline(benchlib.Scalar(lite.name, lite.rate(), "req/s"))
	lat := &benchlib.Figure{ID: "multibay-latency", Title: "latency of one request of the mix, 3 bays on one PostgreSQL",
		Measured: benchlib.Latency(three.name, three.lat)}
	lat.AddBaseline(benchlib.Latency(one.name, one.lat))
	lat.AddBaseline(benchlib.Latency(lite.name, lite.lat))
	for _, s := range sides {
		for _, op := range []string{"create", "get", "list", "extend_ttl", "keepalive", "delete"} {
			lat.Breakdown = append(lat.Breakdown, benchlib.Latency(s.name+": "+op, s.ops[op]))
		}
		tput.Note("%s: %d requests measured in %s; requests served per bay, warm-up included: %v", s.name, s.reqs, s.wall.Round(time.Millisecond), s.proxy.Served())
	}
	tput.Note("%d concurrent clients with keep-alive, %d rounds of %s per side (order rotating); every request goes through the same round-robin proxy (one backend for the single-bay sides)", *conc, *rounds, *dur)
	tput.Note("PostgreSQL %s on a Unix socket, fsync and synchronous_commit off (pgtest); every bay process, the proxy, the clients and PostgreSQL share the machine's %d cores", pg.Version(), rep.Machine.Cores)
	tput.Note("every write transaction of the PostgreSQL store takes one advisory lock per database (internal/bay/postgres, Store.Tx), so the bays' writes are serialised at the database: more bays add read capacity and availability, not write throughput")
	rep.Figures = append(rep.Figures, tput, lat)
	rep.LoadEnd = benchlib.LoadAvg()
	rep.Duration = time.Since(began).Round(time.Second).String()
	md, err := rep.Write(*out, "multibay")
	if err != nil {
		return err
	}
	fmt.Println(md)
	return nil
}

// startBay starts one bay: on database db (a postgres:// URL), or on a SQLite file of its own
// when db is "". Its log goes to out/multibay-<name>-bay.log.
func startBay(ctx context.Context, bin, out, name, db string) (*testenv.BayProcess, error) {
	dir, err := os.MkdirTemp("", "shipyard-bench-multibay-")
	if err != nil {
		return nil, err
	}
	port, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(out, "multibay-"+name+"-bay.log"))
	if err != nil {
		return nil, err
	}
	cfg := testenv.Config{Port: port, DataDir: dir, DatabaseURL: db, APIKey: apiKey,
		InstanceID: fmt.Sprintf("bench-multibay-%d-%s", os.Getpid(), name),
		Driver:     "  image_pull_policy: never\n",
		Extra: `profiles:
  - id: python-default
    image: "ship:base"
    capabilities: [filesystem, shell, python]
    idle_timeout: 3600
`}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	p, err := testenv.StartBay(sctx, testenv.BayOptions{Binary: bin, Dir: dir, Config: cfg.YAML(), URL: cfg.URL(), Log: logf})
	if err != nil {
		return nil, fmt.Errorf("bay %s: %w", name, err)
	}
	return p, nil
}

type opTime struct {
	op string
	d  time.Duration
}

// drive runs conc clients against base for dur; each repeats the six-request mix on a sandbox
// of its own (an iteration begun before dur ends is finished). Any unexpected status fails.
func drive(ctx context.Context, base string, conc int, dur time.Duration) ([]time.Duration, []opTime, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc * 2}, Timeout: time.Minute}
	defer hc.CloseIdleConnections()
	end := time.Now().Add(dur)
	var mu sync.Mutex
	var all []time.Duration
	var ops []opTime
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []opTime
			for time.Now().Before(end) && ctx.Err() == nil {
				got, err := iteration(ctx, hc, base)
				mine = append(mine, got...)
				if err != nil {
					errs <- err
					break
				}
			}
			mu.Lock()
			for _, o := range mine {
				all = append(all, o.d)
			}
			ops = append(ops, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, nil, err
	}
	return all, ops, nil
}

// iteration is one pass of the mix; it returns the time of every request it made.
func iteration(ctx context.Context, hc *http.Client, base string) ([]opTime, error) {
	var out []opTime
	do := func(op, method, path string, body any, want int, into any) error {
		var rd io.Reader
		if body != nil {
			raw, _ := json.Marshal(body)
			rd = bytes.NewReader(raw)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+apiKey)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if err != nil {
			return fmt.Errorf("%s: read body: %w", op, err)
		}
		if resp.StatusCode != want {
			return fmt.Errorf("%s %s: want HTTP %d, got %d %s", method, path, want, resp.StatusCode, raw)
		}
		if into != nil {
			if err := json.Unmarshal(raw, into); err != nil {
				return fmt.Errorf("%s: decode %q: %w", op, raw, err)
			}
		}
		out = append(out, opTime{op, d})
		return nil
	}
	var sb bayapi.SandboxResponse
	if err := do("create", "POST", bayapi.PathSandboxes, map[string]any{"ttl": 3600}, 201, &sb); err != nil {
		return out, err
	}
	if sb.ID == "" {
		return out, errors.New("create: no sandbox id")
	}
	p := bayapi.PathSandboxes + "/" + sb.ID
	var got bayapi.SandboxResponse
	if err := do("get", "GET", p, nil, 200, &got); err != nil {
		return out, err
	}
	if got.ID != sb.ID {
		return out, fmt.Errorf("get %s answered %s", sb.ID, got.ID)
	}
	var list struct {
		Items []bayapi.SandboxResponse `json:"items"`
	}
	if err := do("list", "GET", bayapi.PathSandboxes+"?limit=20", nil, 200, &list); err != nil {
		return out, err
	}
	if !slices.ContainsFunc(list.Items, func(s bayapi.SandboxResponse) bool { return s.ID != "" }) {
		return out, errors.New("list: no sandbox listed while this client holds one")
	}
	steps := []struct {
		op, method, path string
		body             any
		want             int
	}{
		{"extend_ttl", "POST", p + "/extend_ttl", map[string]any{"extend_by": 60}, 200},
		{"keepalive", "POST", p + "/keepalive", nil, 200},
		{"delete", "DELETE", p, nil, 204},
	}
	for _, s := range steps {
		if err := do(s.op, s.method, s.path, s.body, s.want, nil); err != nil {
			return out, err
		}
	}
	return out, nil
}
