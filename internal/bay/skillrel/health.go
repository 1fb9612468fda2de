package skillrel

import (
	"context"
	"encoding/json"
	"math"
	"sort"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Thresholds decide when a release is unhealthy.
type Thresholds struct {
	SuccessDrop         float64 // observed success rate below baseline by more than this
	ErrorRateMultiplier float64 // observed error rate above baseline times this
}

// APIThresholds are the thresholds the health endpoint always uses.
var APIThresholds = Thresholds{SuccessDrop: 0.03, ErrorRateMultiplier: 2.0}

// noBaselineErrorMultiplier is the multiplier reported when the baseline has no errors and
// the release has some.
const noBaselineErrorMultiplier = 1000000.0

// Rollback reasons.
const (
	ReasonSuccessRateDrop     = "success_rate_drop"
	ReasonErrorRateRegression = "error_rate_regression"
)

// Metrics are measured (or reported) replay outcomes.
type Metrics struct {
	Samples     int
	SuccessRate float64
	ErrorRate   float64
	P95Duration int64
}

// Health is a release's health over its window against the release before it.
type Health struct {
	Release             *bay.SkillRelease
	WindowStart         time.Time
	WindowEnd           time.Time
	WindowComplete      bool
	Observed            Metrics
	Baseline            Metrics
	SuccessDrop         float64
	ErrorRateMultiplier float64
	Healthy             bool
	ShouldRollback      bool
	Reasons             []string
	Thresholds          Thresholds
}

// measure turns samples into metrics; no samples give zeros.
func measure(ss []bay.ExecSample) Metrics {
	n := len(ss)
	if n == 0 {
		return Metrics{}
	}
	ok := 0
	ds := make([]int64, n)
	for i, x := range ss {
		if x.Success {
			ok++
		}
		ds[i] = x.DurationMS
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	rate := float64(ok) / float64(n)
	return Metrics{Samples: n, SuccessRate: rate, ErrorRate: 1 - rate, P95Duration: ds[int(math.Ceil(0.95*float64(n)))-1]}
}

// Health reports the owner's release health with the API's thresholds.
func (s *Service) Health(ctx context.Context, owner, id string) (*Health, error) {
	v, err := liveRelease(ctx, s.store.SkillReads(), owner, id)
	if err != nil {
		return nil, err
	}
	h, err := s.health(ctx, v, APIThresholds)
	if err != nil {
		return nil, bay.Internal("Failed to compute release health", err)
	}
	return h, nil
}

// HealthWith reports the health of release v with thresholds th (browser learning judges its
// canaries with the configured thresholds).
func (s *Service) HealthWith(ctx context.Context, v *bay.SkillRelease, th Thresholds) (*Health, error) {
	h, err := s.health(ctx, v, th)
	if err != nil {
		return nil, bay.Internal("Failed to compute release health", err)
	}
	return h, nil
}

// health measures the executions tagged release:<id> in the release's window (from its
// promotion to its health window end, 24 hours by default, up to now) against a baseline:
// the previous release (deleted ones included) measured from its promotion to this one's, else
// the previous candidate's latest evaluation report, else a perfect record without samples.
func (s *Service) health(ctx context.Context, v *bay.SkillRelease, th Thresholds) (*Health, error) {
	r := s.store.SkillReads()
	now := s.clock()
	h := &Health{Release: v, WindowStart: v.PromotedAt, Thresholds: th, Reasons: []string{}}
	h.WindowEnd = v.PromotedAt.Add(bay.DefaultHealthHours * time.Hour)
	if v.HealthWindowEndAt != nil {
		h.WindowEnd = *v.HealthWindowEndAt
	}
	h.WindowComplete = !now.Before(h.WindowEnd)
	upTo := now
	if h.WindowComplete {
		upTo = h.WindowEnd
	}
	obs, err := r.ExecutionSamples(ctx, v.Owner, bay.ReleaseTagPrefix+v.ID, h.WindowStart, upTo)
	if err != nil {
		return nil, err
	}
	h.Observed = measure(obs)
	h.Baseline = Metrics{SuccessRate: 1}
	prev, err := r.PreviousRelease(ctx, v.Owner, v.SkillKey, v.Version, true)
	switch {
	case bay.IsNotFound(err):
	case err != nil:
		return nil, err
	default:
		base, err := r.ExecutionSamples(ctx, v.Owner, bay.ReleaseTagPrefix+prev.ID, prev.PromotedAt, v.PromotedAt)
		if err != nil {
			return nil, err
		}
		if len(base) > 0 {
			h.Baseline = measure(base)
		} else if m, ok, err := reportedMetrics(ctx, r, v.Owner, prev.CandidateID); err != nil {
			return nil, err
		} else if ok {
			h.Baseline = m
		}
	}
	h.SuccessDrop = h.Baseline.SuccessRate - h.Observed.SuccessRate
	switch {
	case h.Baseline.ErrorRate > 0:
		h.ErrorRateMultiplier = h.Observed.ErrorRate / h.Baseline.ErrorRate
	case h.Observed.ErrorRate > 0:
		h.ErrorRateMultiplier = noBaselineErrorMultiplier
	default:
		h.ErrorRateMultiplier = 1.0
	}
	if h.Observed.Samples > 0 {
		if h.SuccessDrop > th.SuccessDrop {
			h.Reasons = append(h.Reasons, ReasonSuccessRateDrop)
		}
		if h.ErrorRateMultiplier > th.ErrorRateMultiplier {
			h.Reasons = append(h.Reasons, ReasonErrorRateRegression)
		}
		h.Healthy = len(h.Reasons) == 0
		h.ShouldRollback = !h.Healthy
	}
	return h, nil
}

// reportedMetrics reads the metrics of a candidate's latest evaluation report (a JSON object
// with replay_success, error_rate, samples, p95_duration), clamped to their ranges.
func reportedMetrics(ctx context.Context, r bay.SkillReader, owner, candidateID string) (Metrics, bool, error) {
	ev, err := r.LatestEvaluation(ctx, owner, candidateID)
	if bay.IsNotFound(err) {
		return Metrics{}, false, nil
	}
	if err != nil {
		return Metrics{}, false, err
	}
	if ev.Report == nil {
		return Metrics{}, false, nil
	}
	var rep struct {
		ReplaySuccess *float64 `json:"replay_success"`
		ErrorRate     *float64 `json:"error_rate"`
		Samples       *float64 `json:"samples"`
		P95Duration   *float64 `json:"p95_duration"`
	}
	if json.Unmarshal([]byte(*ev.Report), &rep) != nil || rep.ReplaySuccess == nil {
		return Metrics{}, false, nil
	}
	m := Metrics{SuccessRate: clamp(*rep.ReplaySuccess, 0, 1)}
	m.ErrorRate = 1 - m.SuccessRate
	if rep.ErrorRate != nil {
		m.ErrorRate = clamp(*rep.ErrorRate, 0, 1)
	}
	if rep.Samples != nil {
		m.Samples = int(clamp(*rep.Samples, 0, math.MaxInt32))
	}
	if rep.P95Duration != nil {
		m.P95Duration = int64(clamp(*rep.P95Duration, 0, math.MaxInt32))
	}
	return m, true, nil
}

func clamp(v, lo, hi float64) float64 {
	if math.IsNaN(v) {
		return lo
	}
	return math.Max(lo, math.Min(hi, v))
}
