// Package benchlib is the measuring code shared by Shipyard's benchmark programs (bench/all,
// bench/ship, ...): repetition loops, order statistics (min/p50/p99/max), ratios to a
// baseline, target checks, a report rendered as JSON (for machines) and a markdown table (for
// people), the machine header (cores, memory, Docker engine, git revision), RSS readings from
// /proc and container memory from the Engine API, and helpers to start and stop processes.
//
// Timings are wall-clock durations measured by the caller around one whole operation; the
// package never sleeps to measure. Percentiles use the nearest-rank method on the sorted
// samples, so p50/p99 are always observed values (with fewer than 100 samples p99 is the max).
package benchlib

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// Stats summarises repeated measurements of one quantity in Unit (milliseconds for
// latencies).
type Stats struct {
	N    int     `json:"n"`
	Unit string  `json:"unit"`
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Summarize returns the stats of latency samples in milliseconds. No samples gives N == 0.
func Summarize(ds []time.Duration) Stats {
	vs := make([]float64, len(ds))
	for i, d := range ds {
		vs[i] = float64(d) / float64(time.Millisecond)
	}
	return SummarizeValues(vs, "ms")
}

// SummarizeValues returns the stats of values in unit.
func SummarizeValues(vs []float64, unit string) Stats {
	s := Stats{N: len(vs), Unit: unit}
	if len(vs) == 0 {
		return s
	}
	sorted := slices.Clone(vs)
	slices.Sort(sorted)
	sum := 0.0
	for _, v := range sorted {
		sum += v
	}
	s.Min, s.Max = sorted[0], sorted[len(sorted)-1]
	s.P50, s.P99 = Percentile(sorted, 50), Percentile(sorted, 99)
	s.Mean = sum / float64(len(sorted))
	return s
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of sorted values: the
// smallest value such that at least p% of the values are <= it. Empty input gives NaN.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Ratio is a/b, or 0 when b is not positive (no meaningful ratio).
func Ratio(a, b float64) float64 {
	if b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return 0
	}
	return a / b
}

// Repeat calls fn n times (i = 0..n-1) after warmup unmeasured calls (i < 0 for those) and
// returns the durations fn reported. It stops at the first error or when ctx is done, and
// returns the samples collected so far with the error.
func Repeat(ctx context.Context, warmup, n int, fn func(ctx context.Context, i int) (time.Duration, error)) ([]time.Duration, error) {
	for i := -warmup; i < 0; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, err := fn(ctx, i); err != nil {
			return nil, fmt.Errorf("warm-up %d: %w", warmup+i, err)
		}
	}
	out := make([]time.Duration, 0, n)
	for i := range n {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		d, err := fn(ctx, i)
		if err != nil {
			return out, fmt.Errorf("repetition %d: %w", i, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Time measures one call of fn.
func Time(fn func() error) (time.Duration, error) {
	t0 := time.Now()
	err := fn()
	return time.Since(t0), err
}

// MBps is bytes per second in MB/s (10^6 bytes).
func MBps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / d.Seconds()
}

// MiB converts bytes to MiB.
func MiB(bytes int64) float64 { return float64(bytes) / (1 << 20) }
