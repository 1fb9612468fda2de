// Package learning is bay's browser skill learning: browser executions recorded with learn
// turn into candidate browser skills, one per run of actionable steps in their trace. Unlike
// the reference, which scores a candidate from its step count, each candidate is evaluated by
// replaying its commands in a fresh sandbox of the same profile: the score is the share of
// replayed steps that succeeded, replay_success the share of whole runs, p95 their duration.
// Passing candidates are released to canary when auto release is on; auto canaries are then
// judged by their health: rolled back, or promoted to stable once their window is complete.
//
// A cycle does bounded work (batch_size executions, batch_size canaries) and runs under a
// lease, so that bays sharing a database never run it twice at once.
package learning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/skillrel"
)

// Names the learner writes.
const (
	LeaseName   = "browser-learning"
	BenchmarkID = "browser-replay-v1"
	// NoSegments is the learn_error of an execution without actionable steps.
	NoSegments = "no_actionable_segments"
	// DefaultReplayRuns is how many times a candidate is replayed.
	DefaultReplayRuns = 10
	// replaySandboxTTL bounds the life of a replay sandbox should its deletion fail.
	replaySandboxTTL = int64(900)
)

// Options configure New.
type Options struct {
	Config             config.BrowserLearningConfig
	AutoReleaseEnabled bool
	// Holder names this bay in the lease (its instance id).
	Holder string
	// ReplayRuns is how many times each candidate is replayed (default DefaultReplayRuns);
	// ReplayTimeout the budget of one run in seconds (default 120).
	ReplayRuns    int
	ReplayTimeout int
	Log           *slog.Logger
}

// Learner runs learning cycles. Create it with New.
type Learner struct {
	store  bay.Store
	lc     *sandbox.Service
	caps   *capability.Service
	skills *skillrel.Service
	o      Options
	log    *slog.Logger
}

// New returns a learner.
func New(store bay.Store, lc *sandbox.Service, caps *capability.Service, skills *skillrel.Service, o Options) *Learner {
	if o.ReplayRuns <= 0 {
		o.ReplayRuns = DefaultReplayRuns
	}
	if o.ReplayTimeout <= 0 {
		o.ReplayTimeout = 120
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Learner{store: store, lc: lc, caps: caps, skills: skills, o: o, log: o.Log.With("component", "learning")}
}

// Run runs a cycle every interval (and at start with run_on_startup) until ctx ends.
func (l *Learner) Run(ctx context.Context) error {
	if !l.o.Config.Enabled {
		<-ctx.Done()
		return nil
	}
	if l.o.Config.RunOnStartup {
		l.tick(ctx)
	}
	t := time.NewTicker(l.o.Config.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			l.tick(ctx)
		}
	}
}

func (l *Learner) tick(ctx context.Context) {
	if _, err := l.RunOnce(ctx); err != nil && ctx.Err() == nil {
		l.log.WarnContext(ctx, "learning cycle failed", "err", err)
	}
}

// Report counts what one cycle did.
type Report struct {
	Leased      bool
	Processed   int // executions turned into candidates (or found without segments)
	Candidates  []string
	Released    []string // canary releases made
	RolledBack  []string // releases rolled back
	Promoted    []string // stable releases made
	Failed      int      // executions whose learning failed
	SkippedRows int
}

// RunOnce runs one cycle under the lease; without the lease it does nothing.
func (l *Learner) RunOnce(ctx context.Context) (*Report, error) {
	rep := &Report{}
	ttl := 2*l.o.Config.Interval + time.Hour
	var ok bool
	if err := l.store.Tx(ctx, func(tx bay.Tx) (err error) {
		ok, err = tx.AcquireLease(ctx, LeaseName, l.o.Holder, l.lc.Now(), ttl)
		return err
	}); err != nil {
		return nil, fmt.Errorf("take the learning lease: %w", err)
	}
	if !ok {
		return rep, nil
	}
	rep.Leased = true
	defer func() {
		dctx, cancel := bay.Detached(ctx, 10*time.Second)
		defer cancel()
		_ = l.store.Tx(dctx, func(tx bay.Tx) error { return tx.ReleaseLease(dctx, LeaseName, l.o.Holder) })
	}()
	ids, err := l.store.(bay.SkillStore).SkillReads().LearningQueue(ctx, l.o.Config.BatchSize)
	if err != nil {
		return rep, fmt.Errorf("read the learning queue: %w", err)
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		l.learn(ctx, id, rep)
	}
	return rep, l.judgeCanaries(ctx, rep)
}

// setStatus writes an execution's learning status (and error, processed time when final).
func (l *Learner) setStatus(ctx context.Context, id, status string, learnErr *string) (*bay.Execution, error) {
	var out *bay.Execution
	err := l.store.Tx(ctx, func(tx bay.Tx) error {
		e, err := tx.GetExecution(ctx, id)
		if err != nil {
			return err
		}
		e.LearnStatus, e.LearnError = &status, learnErr
		if status != "processing" {
			now := l.lc.Now()
			e.LearnProcessedAt = &now
		}
		out = e
		return tx.UpdateExecution(ctx, e)
	})
	return out, err
}

func (l *Learner) learn(ctx context.Context, id string, rep *Report) {
	e, err := l.setStatus(ctx, id, "processing", nil)
	if err != nil {
		l.log.WarnContext(ctx, "learning: cannot claim execution", "execution_id", id, "err", err)
		return
	}
	made, err := l.learnExecution(ctx, e, rep)
	dctx, cancel := bay.Detached(ctx, 10*time.Second)
	defer cancel()
	switch {
	case err != nil:
		msg := err.Error()
		var be *bay.Error
		if errors.As(err, &be) {
			msg = be.Message
		}
		rep.Failed++
		l.log.WarnContext(ctx, "learning failed", "execution_id", id, "err", err)
		_, err = l.setStatus(dctx, id, "error", &msg)
	case made == 0:
		reason := NoSegments
		rep.SkippedRows++
		_, err = l.setStatus(dctx, id, "skipped", &reason)
	default:
		rep.Processed++
		_, err = l.setStatus(dctx, id, "processed", nil)
	}
	if err != nil {
		l.log.WarnContext(ctx, "learning: cannot record the outcome", "execution_id", id, "err", err)
	}
}

// step is one normalised step of a trace.
type step struct {
	Kind     string `json:"kind"`
	Cmd      string `json:"cmd"`
	ExitCode int    `json:"exit_code"`
}

// readOnly are the command prefixes that observe and never act.
var readOnly = []string{"snapshot", "get ", "is ", "wait", "cookies", "storage", "network requests", "tab", "frame", "dialog"}

// steps normalises the execution's trace (an object with steps, a single step object, or a
// list of steps), or falls back to one step from the row itself.
func (l *Learner) steps(ctx context.Context, e *bay.Execution) ([]step, error) {
	if e.PayloadRef != nil {
		b, err := l.skills.GetBlob(ctx, e.Owner, *e.PayloadRef)
		if err != nil {
			return nil, err
		}
		var doc struct {
			Steps []step `json:"steps"`
			step
		}
		var list []step
		if json.Unmarshal(b.Payload, &list) == nil && list != nil {
			return list, nil
		}
		if json.Unmarshal(b.Payload, &doc) == nil {
			if doc.Steps != nil {
				return doc.Steps, nil
			}
			if doc.Cmd != "" {
				return []step{doc.step}, nil
			}
		}
	}
	exit := 1
	if e.Success {
		exit = 0
	}
	return []step{{Kind: "individual_action", Cmd: e.Code, ExitCode: exit}}, nil
}

// Segments are the runs of at least two consecutive steps that succeeded, are individual
// actions and are not read-only.
func Segments(steps []step) [][]string {
	var out [][]string
	var cur []string
	flush := func() {
		if len(cur) >= 2 {
			out = append(out, cur)
		}
		cur = nil
	}
	for _, s := range steps {
		if s.ExitCode == 0 && s.Kind == "individual_action" && !isReadOnly(s.Cmd) {
			cur = append(cur, s.Cmd)
			continue
		}
		flush()
	}
	flush()
	return out
}

func isReadOnly(cmd string) bool {
	c := strings.TrimSpace(cmd)
	for _, p := range readOnly {
		if strings.HasPrefix(c, p) {
			return true
		}
	}
	return false
}

var slugRE = regexp.MustCompile(`[^a-z0-9]+`)

// scenarioKey slugifies a description to at most 64 characters.
func scenarioKey(desc *string) *string {
	if desc == nil {
		return nil
	}
	s := strings.Trim(slugRE.ReplaceAllString(strings.ToLower(*desc), "-"), "-")
	if len(s) > 64 {
		s = strings.TrimRight(s[:64], "-")
	}
	if s == "" {
		return nil
	}
	return &s
}

// skillKey is the first skill:<x> tag of the row, else browser-<sandbox id>.
func skillKey(e *bay.Execution) string {
	if e.Tags != nil {
		for _, t := range strings.Split(*e.Tags, ",") {
			if k, ok := strings.CutPrefix(t, bay.SkillTagPrefix); ok && k != "" {
				return k
			}
		}
	}
	return "browser-" + e.SandboxID
}

// learnExecution makes, evaluates and possibly releases one candidate per segment of e. It
// returns how many candidates it made.
func (l *Learner) learnExecution(ctx context.Context, e *bay.Execution, rep *Report) (int, error) {
	steps, err := l.steps(ctx, e)
	if err != nil {
		return 0, err
	}
	segs := Segments(steps)
	if len(segs) == 0 {
		return 0, nil
	}
	sb, err := l.store.GetSandbox(ctx, e.SandboxID)
	if err != nil {
		return 0, fmt.Errorf("read the source sandbox: %w", err)
	}
	for i, cmds := range segs {
		payload, err := json.Marshal(map[string]any{"skill_type": bay.SkillTypeBrowser, "segment_index": i,
			"source_execution_id": e.ID, "commands": cmds, "steps": steps})
		if err != nil {
			return i, err
		}
		b, err := l.skills.PutBlob(ctx, e.Owner, bay.BlobKindBrowserSegment, payload)
		if err != nil {
			return i, err
		}
		ref := skillrel.Ref(b.ID)
		c, err := l.skills.CreateCandidate(ctx, e.Owner, skillrel.CandidateParams{SkillKey: skillKey(e), SourceExecutionIDs: []string{e.ID},
			ScenarioKey: scenarioKey(e.Description), PayloadRef: &ref, SkillType: bay.SkillTypeBrowser, CreatedBy: bay.SystemAutoCreator})
		if err != nil {
			return i, err
		}
		rep.Candidates = append(rep.Candidates, c.ID)
		passed, err := l.evaluate(ctx, e.Owner, sb.ProfileID, c.ID, cmds)
		if err != nil {
			return i + 1, err
		}
		if passed && l.o.AutoReleaseEnabled {
			end := l.lc.Now().Add(time.Duration(l.o.Config.CanaryWindowHours * float64(time.Hour)))
			v, err := l.skills.Promote(ctx, e.Owner, c.ID, skillrel.PromoteParams{Stage: bay.StageCanary, Auto: true,
				HealthWindowEndAt: &end, PromotedBy: bay.SystemAutoCreator})
			if err != nil {
				return i + 1, err
			}
			rep.Released = append(rep.Released, v.ID)
			l.log.InfoContext(ctx, "browser skill released to canary", "skill_key", v.SkillKey, "release_id", v.ID, "version", v.Version)
		}
	}
	return len(segs), nil
}

// replayReport is the evaluation report of a replayed candidate.
type replayReport struct {
	Runs          int     `json:"runs"`
	Score         float64 `json:"score"`
	ReplaySuccess float64 `json:"replay_success"`
	ErrorRate     float64 `json:"error_rate"`
	Samples       int     `json:"samples"`
	P95Duration   int64   `json:"p95_duration"`
	FirstError    string  `json:"first_error,omitempty"`
}

// evaluate replays cmds ReplayRuns times in a fresh sandbox of profile for owner, records the
// evaluation and says whether it passed.
func (l *Learner) evaluate(ctx context.Context, owner, profile, candidateID string, cmds []string) (bool, error) {
	ttl := replaySandboxTTL
	sb, err := l.lc.CreateSandbox(ctx, owner, sandbox.CreateParams{ProfileID: profile, TTL: &ttl}, nil)
	if err != nil {
		return false, fmt.Errorf("create the replay sandbox: %w", err)
	}
	defer func() {
		dctx, cancel := bay.Detached(ctx, time.Minute)
		defer cancel()
		if err := l.lc.DeleteSandbox(dctx, owner, sb.ID); err != nil {
			l.log.WarnContext(ctx, "learning: cannot delete the replay sandbox", "sandbox_id", sb.ID, "err", err)
		}
	}()
	rep := replayReport{Runs: l.o.ReplayRuns}
	var okSteps, okRuns int
	var durations []int64
	desc := "replay of skill candidate " + candidateID
	tags := "learning:replay"
	for range l.o.ReplayRuns {
		// Each run starts from a blank page, so that runs do not build on each other.
		res, err := l.caps.ExecBrowserBatch(ctx, owner, sb.ID, capability.BrowserBatchParams{
			Commands: append([]string{"open about:blank"}, cmds...), Timeout: l.o.ReplayTimeout, StopOnError: true,
			Description: &desc, Tags: &tags})
		if err != nil {
			return false, fmt.Errorf("replay: %w", err)
		}
		steps := res.Steps[min(1, len(res.Steps)):]
		for _, st := range steps {
			if st.ExitCode == 0 {
				okSteps++
			} else if rep.FirstError == "" {
				rep.FirstError = fmt.Sprintf("%s: %s", st.Cmd, strings.TrimSpace(st.Stderr))
			}
		}
		if res.Success {
			okRuns++
		}
		durations = append(durations, res.ExecutionTimeMS)
	}
	rep.Samples = l.o.ReplayRuns * len(cmds)
	rep.Score = float64(okSteps) / float64(rep.Samples)
	rep.ReplaySuccess = float64(okRuns) / float64(l.o.ReplayRuns)
	rep.ErrorRate = 1 - rep.ReplaySuccess
	sort.Slice(durations, func(i, j int) bool { return durations[i] < durations[j] })
	rep.P95Duration = durations[int(math.Ceil(0.95*float64(len(durations))))-1]
	cfg := l.o.Config
	passed := rep.Score >= cfg.ScoreThreshold && rep.ReplaySuccess >= cfg.ReplaySuccessThreshold && rep.Samples >= cfg.MinSamples
	l.log.InfoContext(ctx, "browser skill candidate replayed", "candidate_id", candidateID, "runs", rep.Runs, "score", rep.Score,
		"replay_success", rep.ReplaySuccess, "p95_ms", rep.P95Duration, "passed", passed, "first_error", rep.FirstError)
	raw, _ := json.Marshal(rep)
	report, bench, score := string(raw), BenchmarkID, rep.Score
	if _, err := l.skills.Evaluate(ctx, owner, candidateID, skillrel.EvaluationParams{Passed: passed, Score: &score,
		BenchmarkID: &bench, Report: &report, EvaluatedBy: bay.SystemAutoCreator}); err != nil {
		return false, err
	}
	return passed, nil
}

// judgeCanaries rolls back unhealthy auto canaries and promotes the healthy ones whose window
// is complete to stable. A rollback without a previous release is logged and the cycle goes on.
func (l *Learner) judgeCanaries(ctx context.Context, rep *Report) error {
	page, err := l.skills.ListReleases(ctx, bay.ReleaseQuery{Stage: bay.StageCanary, ActiveOnly: true, Limit: bayMaxList})
	if err != nil {
		return err
	}
	th := skillrel.Thresholds{SuccessDrop: l.o.Config.SuccessDropThreshold, ErrorRateMultiplier: l.o.Config.ErrorRateMultiplierThreshold}
	judged := 0
	for _, v := range page.Items {
		if v.ReleaseMode != bay.ReleaseModeAuto || judged >= l.o.Config.BatchSize {
			continue
		}
		judged++
		h, err := l.skills.HealthWith(ctx, v, th)
		if err != nil {
			return err
		}
		switch {
		case h.ShouldRollback:
			nv, err := l.skills.Rollback(ctx, v.Owner, v.ID, true)
			if err != nil {
				l.log.WarnContext(ctx, "learning: cannot roll back an unhealthy canary", "release_id", v.ID, "reasons", h.Reasons, "err", err)
				continue
			}
			rep.RolledBack = append(rep.RolledBack, v.ID)
			l.log.InfoContext(ctx, "unhealthy canary rolled back", "release_id", v.ID, "new_release_id", nv.ID, "reasons", h.Reasons)
		case l.o.AutoReleaseEnabled && h.WindowComplete && h.Healthy:
			nv, err := l.skills.Promote(ctx, v.Owner, v.CandidateID, skillrel.PromoteParams{Stage: bay.StageStable, Auto: true,
				AutoPromotedFrom: &v.ID, PromotedBy: bay.SystemAutoCreator})
			if err != nil {
				l.log.WarnContext(ctx, "learning: cannot promote a healthy canary", "release_id", v.ID, "err", err)
				continue
			}
			rep.Promoted = append(rep.Promoted, nv.ID)
		}
	}
	return nil
}

// bayMaxList bounds the canaries read per cycle.
const bayMaxList = 500
