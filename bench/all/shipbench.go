package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/shipyard-dev/shipyard/bench/benchlib"
)

// shipBenchResult is the part of bench/ship's ship-bench.json folded in here (that program
// is owned by the ship engineers; unknown or missing fields are tolerated).
type shipBenchResult struct {
	IdleRSSMiB   float64 `json:"idle_rss_mib"`
	PythonShip   shipLat `json:"python_ship"`
	PythonDirect shipLat `json:"python_direct"`
	PythonRef    shipLat `json:"python_reference_client"` // N 0: not measured
	UploadMBps   float64 `json:"upload_mb_per_s"`
	DownloadMBps float64 `json:"download_mb_per_s"`
	RSSGrowthMiB float64 `json:"rss_growth_mib"`
}

type shipLat struct {
	N     int     `json:"n"`
	MinMS float64 `json:"min_ms"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

func (l shipLat) series(name string) benchlib.Series {
	return benchlib.Series{Name: name, Unit: "ms", Stats: &benchlib.Stats{N: l.N, Unit: "ms", Min: l.MinMS, P50: l.P50MS, P99: l.P99MS, Max: l.MaxMS}}
}

// figShipBench runs bench/ship (ship on the host, no container: its own python round trip
// against the same Jupyter client talking to the kernel directly) and folds in the floor of
// the python round trip, so the ready-python figure can be attributed: bay vs ship vs kernel.
func (b *bench) figShipBench(ctx context.Context) error {
	const id, title = "ship-alone", "python `1+1`: ship on the host vs its kernel directly (bench/ship)"
	root, err := repoRoot()
	if err != nil {
		return b.failed(id, title, err)
	}
	dir := filepath.Join(b.out, "ship")
	args := []string{"run", "./bench/ship", "-out", dir}
	if b.quick {
		args = append(args, "-quick")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	logf, err := os.Create(filepath.Join(b.out, "ship-bench.log"))
	if err != nil {
		return b.failed(id, title, err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		return b.failed(id, title, fmt.Errorf("go run ./bench/ship: %w (see %s)", err, logf.Name()))
	}
	raw, err := os.ReadFile(filepath.Join(dir, "ship-bench.json"))
	if err != nil {
		return b.failed(id, title, err)
	}
	var r shipBenchResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return b.failed(id, title, fmt.Errorf("ship-bench.json: %w", err))
	}
	f := &benchlib.Figure{ID: id, Title: title, Measured: r.PythonShip.series("ship /ipython/exec on the host")}
	f.AddBaseline(r.PythonDirect.series("kernel directly, same Go Jupyter client"))
	f.RatioAtMost(1.3)
	f.Breakdown = []benchlib.Series{
		benchlib.Scalar("ship idle RSS without a kernel", r.IdleRSSMiB, "MiB"),
		benchlib.Scalar("ship upload", r.UploadMBps, "MB/s"),
		benchlib.Scalar("ship download", r.DownloadMBps, "MB/s"),
		benchlib.Scalar("ship RSS growth during the transfer", r.RSSGrowthMiB, "MiB"),
	}
	if r.PythonRef.N > 0 {
		// The floor of any client: what ipykernel itself takes to answer `1+1`.
		f.Breakdown = append([]benchlib.Series{r.PythonRef.series("jupyter_client (Jupyter's Python client) to its own kernel")}, f.Breakdown...)
	}
	f.Note("from `go run ./bench/ship` (ship and ipykernel as host processes, no container, no cgroup limit); its full table is in %s/ship-bench.md", dir)
	b.add(f)
	return nil
}
