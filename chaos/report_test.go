package chaos

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// report holds every figure of one run.
type report struct {
	mu       sync.Mutex
	Mode     string
	Machine  string
	Began    time.Time
	Hostile  hostileFigures
	Tenant   tenantFigures
	Abuse    []abuseRow
	Faults   []faultRow
	Load     loadFigures
	Restart  restartFigures
	Failures []string
}

type hostileFigures struct {
	Inputs      int
	ByStatus    map[int]int
	FiveXX      int // every 5xx, documented ones included
	Status500   int
	NonEnvelope int
	NoAnswer    int // raw requests the server closed without an answer
	Escapes     int
	EscapeTries int
}

type tenantFigures struct {
	Checks int
	Leaks  int
}

type abuseRow struct {
	Name                 string
	BaseP50, BaseP99     time.Duration
	DuringP50, DuringP99 time.Duration
	NeighbourCalls       int
	NeighbourErrors      int
	AbuseAnswer          string
	RecoveredAfter       time.Duration // -1: not within the limit
	RecoveryAnswer       string
}

type faultRow struct {
	Name        string
	FirstAnswer time.Duration
	FirstStatus string
	NextSuccess time.Duration // -1: none within the limit
}

type loadFigures struct {
	Clients    int
	Duration   time.Duration
	Ops        int
	ByCode     map[string]int
	PerOp      map[string][]time.Duration
	FiveXX     int
	Throughput float64
}

type restartFigures struct {
	Sandboxes   int
	Lost        int
	Duplicates  int
	Stale       int // stopped containers of the sandboxes left beside the running one
	BayHealthy  time.Duration
	SlowestBack time.Duration
}

func newReport(mode string) *report {
	return &report{Mode: mode, Began: time.Now(), Machine: machine(),
		Hostile: hostileFigures{ByStatus: map[int]int{}},
		Load:    loadFigures{ByCode: map[string]int{}, PerOp: map[string][]time.Duration{}}}
}

// machine describes the host: cores and load average when the run began.
func machine() string {
	load, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(load))
	if len(f) > 3 {
		f = f[:3]
	}
	return fmt.Sprintf("%d cores, load average %s", runtime.NumCPU(), strings.Join(f, " "))
}

func (r *report) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

// percentile returns the q-quantile (nearest rank) of ds, 0 when empty.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(q*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}

func ms(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func cell(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// markdown renders the report.
func (r *report) markdown() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "## Chaos run (%s), %s, %s, took %v\n\n", r.Mode, r.Began.UTC().Format(time.RFC3339), r.Machine, time.Since(r.Began).Round(time.Second))
	h := r.Hostile
	codes := make([]int, 0, len(h.ByStatus))
	for c := range h.ByStatus {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var bs []string
	for _, c := range codes {
		bs = append(bs, fmt.Sprintf("%d×%d", c, h.ByStatus[c]))
	}
	b.WriteString("| Hostile input | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| inputs tried | %d |\n| answers by status | %s |\n| 5xx (all) | %d |\n| 500 | %d |\n| errors outside the envelope | %d |\n| closed without an answer | %d |\n| escape probes / escapes | %d / %d |\n\n",
		h.Inputs, strings.Join(bs, " "), h.FiveXX, h.Status500, h.NonEnvelope, h.NoAnswer, h.EscapeTries, h.Escapes)
	fmt.Fprintf(&b, "| Cross-tenant | value |\n|---|---|\n| checks (owner B on owner A's ids and lists) | %d |\n| leaks | %d |\n\n", r.Tenant.Checks, r.Tenant.Leaks)
	b.WriteString("| Abuse (inside one sandbox) | neighbour p50 / p99 before | during | neighbour calls / errors | abusive call answered | abuser's next success after | its answer |\n|---|---|---|---|---|---|---|\n")
	for _, a := range r.Abuse {
		fmt.Fprintf(&b, "| %s | %s / %s | %s / %s | %d / %d | %s | %s | %s |\n", a.Name, ms(a.BaseP50), ms(a.BaseP99),
			ms(a.DuringP50), ms(a.DuringP99), a.NeighbourCalls, a.NeighbourErrors, cell(a.AbuseAnswer), ms(a.RecoveredAfter), cell(a.RecoveryAnswer))
	}
	b.WriteString("\n| Fault | first answer after | first answer | next success after |\n|---|---|---|---|\n")
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", f.Name, ms(f.FirstAnswer), cell(f.FirstStatus), ms(f.NextSuccess))
	}
	rs := r.Restart
	fmt.Fprintf(&b, "\n| bay SIGKILL mid-load, restart on the same database | value |\n|---|---|\n| sandboxes before | %d |\n| lost | %d |\n| with two running containers | %d |\n| stopped containers left beside them | %d |\n| bay healthy again after | %s |\n| slowest sandbox answering again | %s |\n\n",
		rs.Sandboxes, rs.Lost, rs.Duplicates, rs.Stale, ms(rs.BayHealthy), ms(rs.SlowestBack))
	l := r.Load
	var cs []string
	for c, n := range l.ByCode {
		cs = append(cs, fmt.Sprintf("%s×%d", c, n))
	}
	sort.Strings(cs)
	fmt.Fprintf(&b, "| Load: %d clients (two owners), %v | value |\n|---|---|\n| operations | %d |\n| throughput | %.1f ops/s |\n| answers by code | %s |\n| 5xx | %d |\n",
		l.Clients, l.Duration, l.Ops, l.Throughput, strings.Join(cs, " "), l.FiveXX)
	ops := make([]string, 0, len(l.PerOp))
	for op := range l.PerOp {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		d := l.PerOp[op]
		fmt.Fprintf(&b, "| %s p50 / p99 (n=%d) | %s / %s |\n", op, len(d), ms(percentile(d, 0.5)), ms(percentile(d, 0.99)))
	}
	if len(r.Failures) > 0 {
		b.WriteString("\nFailures:\n")
		for _, f := range r.Failures {
			fmt.Fprintf(&b, "- %s\n", cell(f))
		}
	}
	return b.String()
}
