// Package gc is bay's garbage collector: it reclaims the compute of idle sandboxes, deletes
// expired sandboxes, and removes cargos, volumes, containers and session networks that nothing
// refers to any more. Unlike the reference's GC, a task's selection decides what runs (not
// only what is reported), a decision is pinned to the session it was made on, and several
// bays on one database never run a task at once.
//
// Tasks, in the order a cycle runs them:
//
//   - idle_session: sandboxes (not warm, not deleted) whose idle deadline passed lose their
//     compute; files are kept and the next call rebuilds a session. Sessions stuck in
//     "starting" for longer than the readiness bound (their bay died mid-start) are destroyed
//     by the same task.
//   - expired_sandbox: sandboxes whose TTL passed are deleted with their managed cargo.
//   - orphan_cargo: managed cargos whose sandbox is soft-deleted, missing, or was never written
//     (a create that failed half-way), older than the grace period; and volumes labelled
//     bay.managed=true with a bay.cargo_id that has no row, owned by this instance, older than
//     the grace period; then, where the driver keeps copies of read-only mounts
//     (bay.SnapshotCollector: the Kubernetes driver's skill ConfigMaps), those of this
//     deployment that no instance mounts and that were last used longer than the grace
//     period ago.
//   - orphan_container: containers that provably belong to this bay instance (strict labels and
//     name) whose session is unknown to the database, older than the grace period; then, by the
//     same rules, the leaked networks of multi-container sessions ("bay_net_<session_id>"). A
//     network still in use is skipped.
//
// Adoption: bay instance ids come and go (on Kubernetes each replica's is its Pod's name), so
// orphan_container and orphan_cargo also collect what a bay instance of the same deployment
// (the bay.deployment label: the database's id) left when it went away: its instance id's
// heartbeat (written with its instance lease, internal/bay/lease) is older than the grace
// period (and DeadInstanceFloor), its instance is older than the grace period too, and no live
// session row refers to it (the session is unknown, stopped or failed). A live bay's
// instances, and anything of another deployment or without the label, are never adopted.
// Heartbeat rows of ids gone for ForgetInstanceAfter that label nothing any more are deleted.
//
// Every decision is taken on a snapshot and pinned (bay.Pin): the lifecycle service re-checks
// it in the transaction that acts, so a sandbox revived meanwhile is left alone. Several bays
// sharing one database never run the same task at once: each task runs under the lease
// "gc:<task>"; a task whose lease is held elsewhere is skipped and reported. Every outbound call
// is bounded by a per-call timeout.
package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/lease"
)

// DeadInstanceFloor is the least heartbeat age at which another bay instance counts as gone,
// whatever OrphanGrace says: three instance lease TTLs, so a live bay (renewing every
// lease.InstanceRenew) is never taken for a dead one over a short stall.
const DeadInstanceFloor = 3 * lease.InstanceTTL

// ForgetInstanceAfter is how long a gone bay instance's heartbeat row is kept once nothing is
// labelled with its id any more.
const ForgetInstanceAfter = 7 * 24 * time.Hour

// Task names (the wire names of api/bayapi).
const (
	TaskIdleSession     = bayapi.GCIdleSession
	TaskExpiredSandbox  = bayapi.GCExpiredSandbox
	TaskOrphanCargo     = bayapi.GCOrphanCargo
	TaskOrphanContainer = bayapi.GCOrphanContainer
)

// AllTasks lists every task in the order a cycle runs them.
var AllTasks = []string{TaskIdleSession, TaskExpiredSandbox, TaskOrphanCargo, TaskOrphanContainer}

// Lifecycle is what GC needs from the lifecycle service (internal/bay/sandbox), the only code
// that sequences Store writes and Driver calls for live sandboxes. Both methods re-read the
// sandbox in the transaction that acts and act only if pin.Holds(sandbox, now); they report
// whether they acted. A sandbox that is gone or no longer matches is (false, nil), not an error.
type Lifecycle interface {
	// ReclaimCompute destroys every session of pin.SandboxID (rows and containers) and clears
	// its current session and idle deadline; TTL and cargo are untouched. Used with ReasonIdle
	// and, for a session stuck in "starting", ReasonStaleStart (then the implementation also
	// checks that the session row pin.SessionID is still starting).
	ReclaimCompute(ctx context.Context, pin bay.Pin) (bool, error)
	// ReclaimSandbox deletes the sandbox: sessions destroyed, row soft-deleted, managed cargo
	// (volume and row) removed. Used with ReasonTTL here.
	ReclaimSandbox(ctx context.Context, pin bay.Pin) (bool, error)
}

// Config configures the collector. Zero durations take the defaults noted.
type Config struct {
	// Enabled runs the background loop; RunOnce works regardless.
	Enabled bool
	// RunOnStartup runs a cycle as soon as Run starts; otherwise the first runs after Interval.
	RunOnStartup bool
	// Interval between cycles (default 300 s).
	Interval time.Duration
	// InstanceID is this bay's instance id, the bay.instance_id label of everything it creates
	// and the holder of GC leases (default "bay").
	InstanceID string
	// Deployment is the database's deployment id (the bay.deployment label of what every bay
	// on it creates). With it, orphan_container and orphan_cargo also adopt the leftovers of
	// bay instances of this deployment that are gone (heartbeat lapsed); "" = only this
	// instance's own.
	Deployment string
	// BootID identifies this process on the session rows it starts ("<instance_id>/<random>",
	// the lifecycle service's boot id). At startup, sessions of this instance left "starting"
	// under another boot id are destroyed at once. "" = rely on StaleStartAfter only.
	BootID string
	// Tasks switches each task by name; a task missing from the map is disabled.
	Tasks map[string]bool
	// OrphanGrace: containers, networks, volumes and never-attached cargos younger than this are
	// never collected (default 300 s), so a create in flight is not mistaken for an orphan.
	// Another bay instance counts as gone once its heartbeat is older than this too (and at
	// least DeadInstanceFloor).
	OrphanGrace time.Duration
	// OrphanContainerDryRun makes orphan_container only report what it would remove.
	OrphanContainerDryRun bool
	// StaleStartAfter: a session "starting" for longer is a crash leftover (default 90 s: the
	// readiness bound plus a margin; use the service's ReadinessTimeout + StaleStartMargin).
	StaleStartAfter time.Duration
	// CallTimeout bounds each driver and store call (default 30 s).
	CallTimeout time.Duration
	// ReclaimTimeout bounds each lifecycle call, which removes containers (default 2 min).
	ReclaimTimeout time.Duration
	// LeaseTTL is how long a task lease is held at most; a task is cancelled before its lease
	// could expire (default 10 min).
	LeaseTTL time.Duration
	// BatchSize bounds the rows read per query page (default 200).
	BatchSize int
	// Observe, when set, is told every task's result of a cycle that is not a dry run
	// (metrics). It must not block.
	Observe func(TaskResult)
}

// DefaultConfig returns the defaults: enabled, run on startup, every 300 s, all tasks but
// orphan_container.
func DefaultConfig() Config {
	c := Config{
		Enabled:      true,
		RunOnStartup: true,
		Tasks: map[string]bool{
			TaskIdleSession: true, TaskExpiredSandbox: true, TaskOrphanCargo: true, TaskOrphanContainer: false,
		},
	}
	c.applyDefaults()
	return c
}

func (c *Config) applyDefaults() {
	if c.Interval <= 0 {
		c.Interval = 300 * time.Second
	}
	if c.InstanceID == "" {
		c.InstanceID = "bay"
	}
	if c.OrphanGrace <= 0 {
		c.OrphanGrace = 300 * time.Second
	}
	if c.StaleStartAfter <= 0 {
		c.StaleStartAfter = 90 * time.Second
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 30 * time.Second
	}
	if c.ReclaimTimeout <= 0 {
		c.ReclaimTimeout = 2 * time.Minute
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 10 * time.Minute
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 200
	}
	tasks := make(map[string]bool, len(AllTasks))
	for k, v := range c.Tasks {
		tasks[k] = v
	}
	c.Tasks = tasks
}

// RunOptions select what one cycle does.
type RunOptions struct {
	// Tasks names the tasks to run (in the fixed cycle order, whether enabled or not); nil or
	// empty = every enabled task. An unknown name is a validation error.
	Tasks []string
	// DryRun reports what would be removed and removes nothing.
	DryRun bool
}

// TaskResult is the outcome of one task. Its JSON is api/bayapi.GCTaskResult plus Note.
type TaskResult struct {
	TaskName     string   `json:"task_name"`
	CleanedCount int      `json:"cleaned_count"`
	SkippedCount int      `json:"skipped_count"`
	Errors       []string `json:"errors"`
	// WouldClean lists what a dry run would remove.
	WouldClean []string `json:"would_clean,omitempty"`
	// Note says why the task did not run ("lease held by another bay instance").
	Note string `json:"note,omitempty"`
}

// RunResult is the outcome of one cycle; its JSON is a superset of api/bayapi.GCRunResponse.
type RunResult struct {
	Results      []TaskResult `json:"results"`
	TotalCleaned int          `json:"total_cleaned"`
	TotalErrors  int          `json:"total_errors"`
	DurationMS   int64        `json:"duration_ms"`
}

// Wire returns r as the api/bayapi response type.
func (r RunResult) Wire() bayapi.GCRunResponse {
	out := bayapi.GCRunResponse{
		Results:      make([]bayapi.GCTaskResult, 0, len(r.Results)),
		TotalCleaned: r.TotalCleaned, TotalErrors: r.TotalErrors, DurationMS: r.DurationMS,
	}
	for _, t := range r.Results {
		out.Results = append(out.Results, bayapi.GCTaskResult{
			TaskName: t.TaskName, CleanedCount: t.CleanedCount, SkippedCount: t.SkippedCount,
			Errors: t.Errors, WouldClean: t.WouldClean,
		})
	}
	return out
}

// NoteLeaseHeld is TaskResult.Note of a task skipped because another bay holds its lease.
const NoteLeaseHeld = "skipped: lease held by another bay instance"

// ErrRunning is returned by RunOnce while another cycle is in flight (code gc_running, 423).
var ErrRunning = &bay.Error{Code: bay.CodeGCRunning, Message: "GC is already running. Please wait for the current cycle to complete."}

// Scheduler runs GC cycles: in the background (Run) and on demand (RunOnce). One cycle runs at
// a time per Scheduler; leases keep several bays apart. Create it with New.
type Scheduler struct {
	store bay.Store
	drv   bay.Driver
	lc    Lifecycle
	clock bay.Clock
	log   *slog.Logger
	cfg   Config

	running sync.Mutex // held for the whole of a cycle (TryLock: RunOnce refuses to queue)

	mu      sync.Mutex // guards the fields below
	lastRun *time.Time
	last    *RunResult
}

// New returns a scheduler. clock nil = bay.SystemClock; log nil = discard.
func New(store bay.Store, drv bay.Driver, lc Lifecycle, clock bay.Clock, log *slog.Logger, cfg Config) *Scheduler {
	cfg.applyDefaults()
	if clock == nil {
		clock = bay.SystemClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{store: store, drv: drv, lc: lc, clock: clock, cfg: cfg,
		log: log.With("component", "gc", "instance_id", cfg.InstanceID)}
}

// Config returns the effective configuration.
func (s *Scheduler) Config() Config { return s.cfg }

// GoneAfter is the heartbeat age from which another bay instance of the deployment counts as
// gone: OrphanGrace, and at least DeadInstanceFloor. The exec service adopts the open execs of
// such an instance by the same rule (internal/bay/execs).
func (s *Scheduler) GoneAfter() time.Duration { return max(s.cfg.OrphanGrace, DeadInstanceFloor) }

// Run runs cycles until ctx ends, then returns nil. With RunOnStartup the first cycle runs at
// once, otherwise after one Interval. Whether or not the loop is enabled, Run first recovers
// sessions stuck in "starting" by a previous incarnation of this instance (restart recovery).
// A tick that finds a manual cycle in flight is skipped. Errors are logged, never fatal.
func (s *Scheduler) Run(ctx context.Context) error {
	if n, err := s.RecoverStaleStarts(ctx); err != nil {
		s.log.WarnContext(ctx, "restart recovery incomplete", "recovered", n, "err", err)
	} else if n > 0 {
		s.log.InfoContext(ctx, "restart recovery: destroyed sessions left starting by a dead bay", "count", n)
	}
	if !s.cfg.Enabled {
		<-ctx.Done()
		return nil
	}
	if s.cfg.RunOnStartup {
		s.tick(ctx)
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.tick(ctx)
		}
	}
}

func (s *Scheduler) tick(ctx context.Context) {
	res, err := s.RunOnce(ctx, RunOptions{})
	switch {
	case errors.Is(err, ErrRunning):
		s.log.DebugContext(ctx, "gc tick skipped: a cycle is in flight")
	case err != nil:
		if ctx.Err() == nil {
			s.log.ErrorContext(ctx, "gc cycle failed", "err", err)
		}
	case res.TotalCleaned > 0 || res.TotalErrors > 0:
		s.log.InfoContext(ctx, "gc cycle", "cleaned", res.TotalCleaned, "errors", res.TotalErrors, "duration_ms", res.DurationMS)
	}
}

// RunOnce runs one cycle of the selected tasks (opts.Tasks really selects what runs) and
// returns their results in the fixed cycle order. It returns ErrRunning (gc_running) if a cycle
// is in flight and a validation_error for an unknown task name. Task failures are reported in
// the results, not as an error.
func (s *Scheduler) RunOnce(ctx context.Context, opts RunOptions) (RunResult, error) {
	tasks, err := s.selectTasks(opts.Tasks)
	if err != nil {
		return RunResult{}, err
	}
	if !s.running.TryLock() {
		return RunResult{}, ErrRunning
	}
	defer s.running.Unlock()

	began := time.Now()
	res := RunResult{Results: []TaskResult{}}
	for _, name := range tasks {
		if ctx.Err() != nil {
			break
		}
		tr := s.runTask(ctx, name, opts.DryRun)
		if s.cfg.Observe != nil && !opts.DryRun {
			s.cfg.Observe(tr)
		}
		res.Results = append(res.Results, tr)
		res.TotalCleaned += tr.CleanedCount
		res.TotalErrors += len(tr.Errors)
	}
	res.DurationMS = time.Since(began).Milliseconds()

	now := s.now()
	s.mu.Lock()
	s.lastRun = &now
	s.last = &res
	s.mu.Unlock()
	return res, ctx.Err()
}

func (s *Scheduler) selectTasks(names []string) ([]string, error) {
	if len(names) == 0 {
		var out []string
		for _, t := range AllTasks {
			if s.cfg.Tasks[t] {
				out = append(out, t)
			}
		}
		return out, nil
	}
	for _, n := range names {
		if !slices.Contains(AllTasks, n) {
			return nil, bay.Errorf(bay.CodeValidation, "unknown GC task %q (known: %v)", n, AllTasks).
				WithDetails(map[string]any{"task": n, "known": AllTasks})
		}
	}
	var out []string
	for _, t := range AllTasks {
		if slices.Contains(names, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// runTask runs one task under its lease.
func (s *Scheduler) runTask(ctx context.Context, name string, dryRun bool) TaskResult {
	tr := TaskResult{TaskName: name, Errors: []string{}}
	leaseName := "gc:" + name
	ok, err := lease.Acquire(ctx, s.store, leaseName, s.cfg.InstanceID, s.now(), s.cfg.LeaseTTL, s.cfg.CallTimeout)
	if err != nil {
		tr.Errors = append(tr.Errors, "acquire lease: "+err.Error())
		return tr
	}
	if !ok {
		tr.Note = NoteLeaseHeld
		s.log.InfoContext(ctx, "gc task skipped: lease held elsewhere", "task", name)
		return tr
	}
	defer lease.Release(ctx, s.store, leaseName, s.cfg.InstanceID, s.cfg.CallTimeout, s.log)

	// Finish well before the lease could expire, so two bays never overlap on one task.
	tctx, cancel := context.WithTimeout(ctx, s.cfg.LeaseTTL*9/10)
	defer cancel()
	run := &taskRun{s: s, res: &tr, dry: dryRun, now: s.now(), log: s.log.With("task", name)}
	switch name {
	case TaskIdleSession:
		run.idleSessions(tctx)
	case TaskExpiredSandbox:
		run.expiredSandboxes(tctx)
	case TaskOrphanCargo:
		run.orphanCargos(tctx)
	case TaskOrphanContainer:
		run.dry = run.dry || s.cfg.OrphanContainerDryRun
		run.orphanContainers(tctx)
	}
	if err := tctx.Err(); err != nil && ctx.Err() == nil {
		tr.Errors = append(tr.Errors, fmt.Sprintf("task stopped: %v", err))
	}
	return tr
}

// Status reports the scheduler's configuration and state (GET /v1/admin/gc/status).
func (s *Scheduler) Status() bayapi.GCStatusResponse {
	st := bayapi.GCStatusResponse{
		Enabled:         s.cfg.Enabled,
		IsRunning:       s.IsRunning(),
		InstanceID:      s.cfg.InstanceID,
		IntervalSeconds: int(s.cfg.Interval / time.Second),
		Tasks:           map[string]bayapi.GCTaskStatus{},
	}
	for _, t := range AllTasks {
		st.Tasks[t] = bayapi.GCTaskStatus{Enabled: s.cfg.Tasks[t]}
	}
	s.mu.Lock()
	st.LastRunAt = bayapi.TimePtr(s.lastRun)
	s.mu.Unlock()
	return st
}

// IsRunning reports whether a cycle is in flight.
func (s *Scheduler) IsRunning() bool {
	if s.running.TryLock() {
		s.running.Unlock()
		return false
	}
	return true
}

// LastResult returns the result of the last completed cycle (nil before the first).
func (s *Scheduler) LastResult() *RunResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func (s *Scheduler) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }
