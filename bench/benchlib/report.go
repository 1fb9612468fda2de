package benchlib

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Series is one measured quantity: repeated samples (Stats) or a single value (Value, Unit).
type Series struct {
	Name  string   `json:"name"`
	Stats *Stats   `json:"stats,omitempty"`
	Value *float64 `json:"value,omitempty"`
	Unit  string   `json:"unit,omitempty"`
	// Ratio is, on a baseline, the figure's measured p50 (or value) divided by this one's.
	Ratio float64 `json:"ratio,omitempty"`
}

// Latency is a Series of latency samples.
func Latency(name string, ds []time.Duration) Series {
	s := Summarize(ds)
	return Series{Name: name, Stats: &s, Unit: "ms"}
}

// Scalar is a Series holding one value.
func Scalar(name string, v float64, unit string) Series {
	return Series{Name: name, Value: &v, Unit: unit}
}

// Central is the series' p50, or its value; NaN when empty.
func (s Series) Central() float64 {
	switch {
	case s.Stats != nil && s.Stats.N > 0:
		return s.Stats.P50
	case s.Value != nil:
		return *s.Value
	}
	return math.NaN()
}

// Check is one target: Got compared with Limit (Got <= Limit when AtMost, else Got >= Limit).
type Check struct {
	What   string  `json:"what"`
	Got    float64 `json:"got"`
	Limit  float64 `json:"limit"`
	Unit   string  `json:"unit,omitempty"`
	AtMost bool    `json:"at_most"`
	Pass   bool    `json:"pass"`
}

func (c Check) String() string {
	op := ">="
	if c.AtMost {
		op = "<="
	}
	return fmt.Sprintf("%s %s %s%s", c.What, op, Num(c.Limit), unitSuffix(c.Unit))
}

// Figure is one row of the report: what was measured, its baselines in the same run, the
// targets and notes (breakdowns, what the baseline is exactly, what dominated).
type Figure struct {
	ID        string   `json:"id"`
	Title     string   `json:"title"`
	Measured  Series   `json:"measured"`
	Baselines []Series `json:"baselines,omitempty"`
	Checks    []Check  `json:"checks,omitempty"`
	// Breakdown holds the parts of the measured time (e.g. create, start, readiness).
	Breakdown []Series `json:"breakdown,omitempty"`
	Notes     []string `json:"notes,omitempty"`
	// Error is set when the figure could not be measured (the run goes on with the others).
	Error string `json:"error,omitempty"`
}

// AddBaseline appends a baseline and computes the figure's ratio to it.
func (f *Figure) AddBaseline(b Series) {
	b.Ratio = Ratio(f.Measured.Central(), b.Central())
	f.Baselines = append(f.Baselines, b)
}

// AtMost adds the target got <= limit.
func (f *Figure) AtMost(what string, got, limit float64, unit string) {
	f.Checks = append(f.Checks, Check{What: what, Got: got, Limit: limit, Unit: unit, AtMost: true, Pass: !math.IsNaN(got) && got <= limit})
}

// AtLeast adds the target got >= limit.
func (f *Figure) AtLeast(what string, got, limit float64, unit string) {
	f.Checks = append(f.Checks, Check{What: what, Got: got, Limit: limit, Unit: unit, Pass: !math.IsNaN(got) && got >= limit})
}

// RatioAtMost adds the target "ratio to the first baseline <= limit".
func (f *Figure) RatioAtMost(limit float64) {
	if len(f.Baselines) == 0 {
		return
	}
	b := f.Baselines[0]
	got := b.Ratio
	if got == 0 {
		got = math.NaN()
	}
	f.AtMost("ratio to "+b.Name, got, limit, "x")
}

// Note appends a formatted note.
func (f *Figure) Note(format string, args ...any) {
	f.Notes = append(f.Notes, fmt.Sprintf(format, args...))
}

// Pass reports whether the figure was measured and met every target.
func (f *Figure) Pass() bool {
	if f.Error != "" {
		return false
	}
	for _, c := range f.Checks {
		if !c.Pass {
			return false
		}
	}
	return true
}

// Report is a whole benchmark run.
type Report struct {
	Title    string    `json:"title"`
	Date     time.Time `json:"date"`
	Quick    bool      `json:"quick"`
	Machine  Machine   `json:"machine"`
	Docker   string    `json:"docker_engine"`
	GitRev   string    `json:"git_revision"`
	Duration string    `json:"duration"`
	// LoadStart and LoadEnd are /proc/loadavg (1, 5, 15 min) when the run began and ended.
	LoadStart string    `json:"load_average_start,omitempty"`
	LoadEnd   string    `json:"load_average_end,omitempty"`
	Figures   []*Figure `json:"figures"`
	// Notes are run-wide remarks (what was started, what was skipped and why).
	Notes []string `json:"notes,omitempty"`
}

// Write stores name.json and name.md in dir and returns the markdown.
func (r *Report) Write(dir, name string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), append(j, '\n'), 0o644); err != nil {
		return "", err
	}
	md := r.Markdown()
	if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(md), 0o644); err != nil {
		return "", err
	}
	return md, nil
}

// Markdown renders the report: a header (date, machine, engine, revision), one table row per
// figure, then each figure's breakdown and notes.
func (r *Report) Markdown() string {
	var b strings.Builder
	mode := "full"
	if r.Quick {
		mode = "quick"
	}
	fmt.Fprintf(&b, "## %s (%s mode)\n\n", r.Title, mode)
	fmt.Fprintf(&b, "- date: %s (run took %s)\n", r.Date.UTC().Format("2006-01-02 15:04 MST"), r.Duration)
	fmt.Fprintf(&b, "- machine: %s\n", r.Machine)
	if r.LoadStart != "" || r.LoadEnd != "" {
		fmt.Fprintf(&b, "- load average (1/5/15 min): %s at start, %s at end (%d cores; a higher load is other work on the machine)\n", orDash(r.LoadStart), orDash(r.LoadEnd), r.Machine.Cores)
	}
	fmt.Fprintf(&b, "- Docker engine: %s\n", r.Docker)
	fmt.Fprintf(&b, "- git revision: %s\n\n", r.GitRev)
	b.WriteString("| figure | measured: min / p50 / p99 / max | baseline(s), same run | ratio (p50) | target | met |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, f := range r.Figures {
		var bases, ratios []string
		for _, s := range f.Baselines {
			bases = append(bases, s.Name+": "+s.Short())
			if s.Ratio > 0 {
				ratios = append(ratios, Num(s.Ratio)+"x")
			} else {
				ratios = append(ratios, "-")
			}
		}
		var targets []string
		for _, c := range f.Checks {
			mark := "ok"
			if !c.Pass {
				mark = "MISSED (" + Num(c.Got) + unitSuffix(c.Unit) + ")"
			}
			targets = append(targets, c.String()+": "+mark)
		}
		measured := f.Measured.Short()
		if f.Error != "" {
			measured = "ERROR: " + cell(f.Error)
		}
		met := "yes"
		if !f.Pass() {
			met = "**no**"
		}
		if len(f.Checks) == 0 && f.Error == "" {
			met = "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", cell(f.Title), measured,
			orDash(strings.Join(bases, "<br>")), orDash(strings.Join(ratios, "<br>")),
			orDash(strings.Join(targets, "<br>")), met)
	}
	b.WriteString("\n")
	for _, f := range r.Figures {
		if len(f.Breakdown) == 0 && len(f.Notes) == 0 {
			continue
		}
		fmt.Fprintf(&b, "**%s**\n\n", f.Title)
		for _, s := range f.Breakdown {
			fmt.Fprintf(&b, "- part %s: %s\n", s.Name, s.Short())
		}
		for _, n := range f.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		b.WriteString("\n")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}

// Short renders a series compactly: "min / p50 / p99 / max unit (n=N)" or "value unit".
func (s Series) Short() string {
	switch {
	case s.Stats != nil && s.Stats.N > 0:
		st := s.Stats
		return fmt.Sprintf("%s / %s / %s / %s %s (n=%d)", Num(st.Min), Num(st.P50), Num(st.P99), Num(st.Max), st.Unit, st.N)
	case s.Value != nil:
		return Num(*s.Value) + unitSuffix(s.Unit)
	}
	return "-"
}

// Num formats a number with about three significant digits.
func Num(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "n/a"
	case a == 0:
		return "0"
	case a < 1:
		return fmt.Sprintf("%.3f", v)
	case a < 10:
		return fmt.Sprintf("%.2f", v)
	case a < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func unitSuffix(u string) string {
	switch u {
	case "", "x":
		return u
	}
	return " " + u
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	return strings.ReplaceAll(s, "\n", " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
