package benchlib

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	vs := make([]float64, 100)
	for i := range vs {
		vs[i] = float64(i + 1) // 1..100
	}
	for _, c := range []struct{ p, want float64 }{{50, 50}, {99, 99}, {100, 100}, {1, 1}, {0, 1}} {
		if got := Percentile(vs, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := Percentile([]float64{3, 7, 9}, 50); got != 7 {
		t.Errorf("p50 of 3 values = %v, want 7", got)
	}
	if got := Percentile([]float64{3, 7, 9}, 99); got != 9 {
		t.Errorf("p99 of 3 values = %v, want the max", got)
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("empty input must give NaN")
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond})
	if s.N != 3 || s.Min != 1 || s.P50 != 2 || s.Max != 3 || s.Mean != 2 || s.Unit != "ms" {
		t.Fatalf("unexpected stats %+v", s)
	}
	if z := Summarize(nil); z.N != 0 {
		t.Fatalf("empty stats %+v", z)
	}
}

func TestRepeatStopsAtFirstError(t *testing.T) {
	calls := 0
	ds, err := Repeat(context.Background(), 2, 5, func(_ context.Context, i int) (time.Duration, error) {
		calls++
		if i == 3 {
			return 0, errors.New("boom")
		}
		return time.Duration(i+1) * time.Millisecond, nil
	})
	if err == nil || !strings.Contains(err.Error(), "repetition 3") {
		t.Fatalf("want the error of repetition 3, got %v", err)
	}
	if len(ds) != 3 || calls != 2+4 {
		t.Fatalf("samples %v calls %d", ds, calls)
	}
}

func TestFigureChecksAndRatio(t *testing.T) {
	f := &Figure{ID: "x", Title: "x", Measured: Latency("bay", []time.Duration{100 * time.Millisecond})}
	f.AddBaseline(Latency("raw", []time.Duration{80 * time.Millisecond}))
	f.RatioAtMost(1.15)
	f.AtMost("p50", f.Measured.Central(), 400, "ms")
	if got := f.Baselines[0].Ratio; got != 1.25 {
		t.Fatalf("ratio %v, want 1.25", got)
	}
	if f.Checks[0].Pass || !f.Checks[1].Pass || f.Pass() {
		t.Fatalf("checks %+v", f.Checks)
	}
	g := &Figure{ID: "y", Title: "y", Measured: Scalar("up", 250, "MB/s")}
	g.AtLeast("throughput", 250, 200, "MB/s")
	if !g.Pass() {
		t.Fatal("250 >= 200 must pass")
	}
}

func TestReportWrite(t *testing.T) {
	dir := t.TempDir()
	f := &Figure{ID: "x", Title: "cold | create", Measured: Latency("bay", []time.Duration{time.Second})}
	f.AtMost("p50", 1000, 400, "ms")
	f.Note("dominated by %s", "readiness")
	r := &Report{Title: "t", Date: time.Unix(0, 0), Machine: ReadMachine(), Docker: "20.10", GitRev: "abc",
		Figures: []*Figure{f, {ID: "e", Title: "broken", Error: "engine down"}}}
	md, err := r.Write(dir, "out")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cold \\| create", "MISSED (1000 ms)", "ERROR: engine down", "dominated by readiness", "git revision: abc"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(raw, &back); err != nil || len(back.Figures) != 2 || back.Figures[0].Checks[0].Pass {
		t.Fatalf("json round trip: %v %+v", err, back)
	}
}

func TestProcRSS(t *testing.T) {
	if RSS(os.Getpid()) <= 0 || HWM(os.Getpid()) < RSS(os.Getpid())/2 {
		t.Fatal("cannot read our own RSS from /proc")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	stop := PeakRSS(cmd.Process.Pid, time.Millisecond)
	if peak := stop(); peak <= 0 {
		t.Fatalf("peak RSS of sleep: %d", peak)
	}
}
