// Package execs runs audited one-shot executions: a caller posts one command for a project;
// the service merges its policy (bay.MergeExecPolicy), prepares the project's workspace, runs the
// command in a fresh hardened container without network through the driver (a one-shot
// instance), collects its output and artifacts under caps, and keeps an audit record written
// before the container starts and finalised on every outcome. At most MaxConcurrent run at once;
// a bounded queue, served round-robin between owners, holds the rest.
package execs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// LabelExecID marks the instance of an audited execution.
const LabelExecID = "bay.exec_id"

// Config configures the service.
type Config struct {
	Workspace Workspace
	// Image runs an exec whose skill's manifest names none.
	Image string
	// ContainerRuntime is the container runtime of every exec's container ("" = the platform's
	// default; bay.ContainerRuntimes). A platform that lacks it refuses execs at admission.
	ContainerRuntime string
	// MaxConcurrent execs run at once (default 2); QueueSize more wait (default 16).
	MaxConcurrent int
	QueueSize     int
	// Settings is the operator's layer of the policy merge (the ceilings).
	Settings bay.PolicyOverrides
	// Library resolves an exec's skill_id to the skill's current version (nil = no skills).
	Library Library
	// InstanceID is this bay's instance id, written on records so that its next boot finds them.
	InstanceID string
	// Deployment is the database's deployment id, written as the bay.deployment label ("" =
	// none).
	Deployment string
	// Runtime is the detected path runtime, reported by Health.
	Runtime Runtime
	// GoneAfter is the heartbeat age from which another bay instance of the deployment counts
	// as gone, and its open execs are adopted (Adopt; internal/bay/gc's Scheduler.GoneAfter).
	// 0, or no Deployment, adopts nothing.
	GoneAfter time.Duration
	// AdoptInterval is how often RunAdoption looks for them (default DefaultAdoptInterval).
	AdoptInterval time.Duration
}

// Service runs audited executions.
type Service struct {
	store bay.Store
	drv   bay.Driver
	clock bay.Clock
	log   *slog.Logger
	cfg   Config

	mu      sync.Mutex
	running int
	queued  int
	queues  map[string][]*job // per owner, FIFO
	owners  []string          // owners with queued jobs, in round-robin order
	jobs    map[string]*job   // queued and running, by exec id
	avgRun  time.Duration     // moving average of run times, for retry_after_ms
	wg      sync.WaitGroup
	stopped bool
}

// job is one exec between admission and its outcome.
type job struct {
	rec    *bay.ExecRecord
	env    map[string]string       // the values, never stored
	cancel context.CancelCauseFunc // set while running
	done   chan struct{}           // closed once the record is final
	// reattach is set for an exec a previous bay started: wait for its container, do not create it.
	reattach bool
}

// createTimeout bounds the creation of an exec's container.
const createTimeout = 2 * time.Minute

// errCancelled is the cause of a cancelled exec's context.
var errCancelled = errors.New("cancelled by the caller")

// New returns the service.
func New(store bay.Store, drv bay.Driver, clock bay.Clock, log *slog.Logger, cfg Config) *Service {
	if clock == nil {
		clock = bay.SystemClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 2
	}
	if cfg.QueueSize < 0 {
		cfg.QueueSize = 0
	} else if cfg.QueueSize == 0 {
		cfg.QueueSize = 16
	}
	if cfg.AdoptInterval <= 0 {
		cfg.AdoptInterval = DefaultAdoptInterval
	}
	if cfg.Workspace.UID == 0 {
		cfg.Workspace.UID, cfg.Workspace.GID = 1000, 1000
	}
	return &Service{store: store, drv: drv, clock: clock, log: log.With("component", "execs"), cfg: cfg,
		queues: map[string][]*job{}, jobs: map[string]*job{}, avgRun: time.Second}
}

// Config returns the service's configuration.
func (s *Service) Config() Config { return s.cfg }

// Create admits an exec: it validates the request and merges the policy (nothing is written
// on a refusal), takes a slot or a queue place (a full queue is quota_exceeded with
// retry_after_ms), writes the inputs and the queued audit record, and starts or queues the run.
// With wait it returns once the exec is final or ctx ends (the exec goes on).
func (s *Service) Create(ctx context.Context, owner string, req Request) (*bay.ExecRecord, error) {
	plan, err := s.plan(ctx, owner, req)
	if err != nil {
		return nil, err
	}
	rec := plan.rec
	j := &job{rec: rec, env: plan.env, done: make(chan struct{})}
	if err := s.reserve(j); err != nil {
		return nil, err
	}
	admitted := false
	defer func() {
		if !admitted {
			s.release(j)
			if err := s.cfg.Workspace.Discard(owner, rec.ProjectID, rec.ID); err != nil {
				s.log.Error("exec: remove the directories of an exec not admitted", "exec_id", rec.ID, "err", err)
			}
		}
	}()
	if err := s.cfg.Workspace.Prepare(owner, rec.ProjectID, rec.ID, inputsDir(rec), plan.inputs); err != nil {
		return nil, fmt.Errorf("prepare the workspace of exec %s: %w", rec.ID, err)
	}
	if err := s.store.Tx(ctx, func(tx bay.Tx) error { return tx.InsertExecRecord(ctx, rec) }); err != nil {
		return nil, fmt.Errorf("write the audit record of exec %s: %w", rec.ID, err)
	}
	admitted = true
	s.log.Info("exec admitted", "exec_id", rec.ID, "owner", owner, "project_id", rec.ProjectID, "image", rec.Image)
	out := s.dispatch(j)
	if !req.Wait {
		return out, nil
	}
	select {
	case <-j.done:
	case <-ctx.Done():
	}
	return s.Get(context.WithoutCancel(ctx), owner, rec.ID)
}

// reserve registers j as queued, or refuses when the queue is full.
func (s *Service) reserve(j *job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return bay.Errorf(bay.CodeUnavailable, "bay is shutting down")
	}
	if s.running >= s.cfg.MaxConcurrent && s.queued >= s.cfg.QueueSize {
		retry := s.avgRun * time.Duration(s.queued/s.cfg.MaxConcurrent+1)
		ms := int(max(retry, 100*time.Millisecond) / time.Millisecond)
		return (&bay.Error{Code: bay.CodeQuotaExceeded,
			Message: fmt.Sprintf("%d execs run and %d wait, the most allowed; try again later", s.running, s.queued)}).
			WithDetails(map[string]any{"retry_after_ms": ms, "max_concurrent_execs": s.cfg.MaxConcurrent, "queue_size": s.cfg.QueueSize})
	}
	s.queued++
	s.jobs[j.rec.ID] = j
	return nil
}

// release undoes reserve for a job that was never admitted.
func (s *Service) release(j *job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queued--
	delete(s.jobs, j.rec.ID)
}

// dispatch queues j behind its owner's earlier jobs, starts what the free slots allow, and
// returns a copy of j's record as it stands.
func (s *Service) dispatch(j *job) *bay.ExecRecord {
	s.mu.Lock()
	owner := j.rec.Owner
	if len(s.queues[owner]) == 0 {
		s.owners = append(s.owners, owner)
	}
	s.queues[owner] = append(s.queues[owner], j)
	rec := *j.rec
	s.startLocked()
	s.mu.Unlock()
	return &rec
}

// startLocked starts queued jobs while slots are free, taking owners in turn. Requires s.mu.
func (s *Service) startLocked() {
	for s.running < s.cfg.MaxConcurrent && len(s.owners) > 0 && !s.stopped {
		owner := s.owners[0]
		q := s.queues[owner]
		j := q[0]
		s.queues[owner] = q[1:]
		s.owners = s.owners[1:]
		if len(s.queues[owner]) > 0 {
			s.owners = append(s.owners, owner) // to the back of the ring: the others go first
		} else {
			delete(s.queues, owner)
		}
		s.queued--
		s.launchLocked(j)
	}
}

// launchLocked runs j on a goroutine of its own, holding a slot until its outcome is recorded.
// Requires s.mu.
func (s *Service) launchLocked(j *job) {
	s.running++
	s.jobs[j.rec.ID] = j
	ctx, cancel := context.WithCancelCause(context.Background())
	j.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel(nil)
		started := time.Now()
		s.run(ctx, j)
		s.mu.Lock()
		s.running--
		s.avgRun = (s.avgRun*3 + time.Since(started)) / 4
		delete(s.jobs, j.rec.ID)
		close(j.done)
		s.startLocked()
		s.mu.Unlock()
	}()
}

// Get returns the owner's exec record (not_found for another owner's).
func (s *Service) Get(ctx context.Context, owner, id string) (*bay.ExecRecord, error) {
	rec, err := s.store.GetExecRecord(ctx, id)
	if bay.IsNotFound(err) || (err == nil && rec.Owner != owner) {
		return nil, bay.Errorf(bay.CodeNotFound, "exec %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get exec %s: %w", id, err)
	}
	return rec, nil
}

// List returns one page of the owner's execs (q.Owner is forced) and the total.
func (s *Service) List(ctx context.Context, owner string, q bay.ExecQuery) ([]*bay.ExecRecord, int, error) {
	q.Owner = owner
	list, total, err := s.store.ListExecRecords(ctx, q)
	if err != nil {
		return nil, 0, fmt.Errorf("list execs: %w", err)
	}
	return list, total, nil
}

// Cancel ends an exec: a queued one at once, a running one by killing its container (its run
// records the outcome; Cancel waits for it up to ctx). An exec already final is returned as is.
func (s *Service) Cancel(ctx context.Context, owner, id string) (*bay.ExecRecord, error) {
	rec, err := s.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	j := s.jobs[id]
	if j == nil {
		s.mu.Unlock()
		return rec, nil
	}
	if j.cancel != nil {
		j.cancel(errCancelled)
		s.mu.Unlock()
		select {
		case <-j.done:
		case <-ctx.Done():
		}
		return s.Get(context.WithoutCancel(ctx), owner, id)
	}
	// Still queued: take it out of its owner's queue and finish it here.
	q := s.queues[owner]
	if i := slices.Index(q, j); i >= 0 {
		s.queues[owner] = slices.Delete(q, i, i+1)
		if len(s.queues[owner]) == 0 {
			delete(s.queues, owner)
			s.owners = slices.DeleteFunc(s.owners, func(o string) bool { return o == owner })
		}
		s.queued--
		delete(s.jobs, id)
	}
	s.mu.Unlock()
	j.rec.Status, j.rec.ErrorReason = bay.ExecCancelled, "cancelled before it started"
	s.finish(ctx, j.rec, nil)
	close(j.done)
	return s.Get(context.WithoutCancel(ctx), owner, id)
}

// Stop stops admitting execs and waits (up to ctx) for the running ones; queued ones stay
// queued in the store and are queued again by the next boot's Reconcile.
func (s *Service) Stop(ctx context.Context) {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// run executes one admitted exec and records its outcome whatever happens. The exec counts
// as running, and its timeout runs, from the moment its container exists.
func (s *Service) run(ctx context.Context, j *job) {
	rec := j.rec
	dctx := context.WithoutCancel(ctx)
	if !j.reattach {
		// The create is not interrupted by a cancel: an engine may finish a create whose request
		// was abandoned after bay removed the container, and leak it. The wait below ends at
		// once when a cancel came meanwhile.
		cctx, ccancel := context.WithTimeout(dctx, createTimeout)
		_, err := s.drv.CreateInstance(cctx, s.instanceSpec(rec, j.env))
		ccancel()
		if err != nil {
			s.outcome(dctx, ctx, rec, bay.Exit{}, fmt.Errorf("start the container: %w", err))
			return
		}
		now := s.clock.Now().UTC()
		rec.Status, rec.StartedAt = bay.ExecRunning, &now
		if err := s.store.Tx(dctx, func(tx bay.Tx) error { return update(dctx, tx, rec) }); err != nil {
			s.log.Error("exec: record the start", "exec_id", rec.ID, "err", err)
		}
	}
	timeout := time.Duration(rec.Policy.TimeoutMS)*time.Millisecond - s.clock.Now().Sub(*rec.StartedAt)
	wctx, cancel := context.WithTimeoutCause(ctx, max(timeout, time.Millisecond), context.DeadlineExceeded)
	defer cancel()
	stdout, stderr, err := s.cfg.Workspace.OutputFiles(rec.ID)
	if err != nil {
		s.outcome(dctx, wctx, rec, bay.Exit{}, fmt.Errorf("open the output files: %w", err))
		return
	}
	ow := &cappedWriter{w: stdout, max: rec.Policy.MaxStdoutBytes}
	ew := &cappedWriter{w: stderr, max: rec.Policy.MaxStderrBytes}
	exit, werr := s.drv.WaitInstance(wctx, rec.Instance, ow, ew)
	stdout.Close()
	stderr.Close()
	if ow.err != nil || ew.err != nil {
		s.log.Error("exec: write the output", "exec_id", rec.ID, "err", errors.Join(ow.err, ew.err))
	}
	rec.StdoutTruncated, rec.StderrTruncated = ow.truncated, ew.truncated
	s.outcome(dctx, wctx, rec, exit, werr)
}

// outcome classifies how the run ended, collects the artifacts, removes the container and
// finalises the record.
func (s *Service) outcome(ctx, wctx context.Context, rec *bay.ExecRecord, exit bay.Exit, err error) {
	if s.adoptedElsewhere(ctx, rec) {
		return // its container and files are the adopter's now
	}
	cause := context.Cause(wctx)
	code := exit.Code
	switch {
	case errors.Is(cause, errCancelled):
		rec.Status, rec.ErrorReason = bay.ExecCancelled, "cancelled by the caller"
	case errors.Is(cause, context.DeadlineExceeded):
		rec.Status, rec.ErrorReason = bay.ExecTimedOut, fmt.Sprintf("ran longer than timeout_ms (%d)", rec.Policy.TimeoutMS)
	case bay.IsNotFound(err):
		rec.Status, rec.ErrorReason = bay.ExecLost, "the container disappeared"
	case err != nil:
		s.log.Error("exec failed to run", "exec_id", rec.ID, "err", err)
		rec.Status, rec.ErrorReason = bay.ExecFailed, "the container could not be run: "+safeReason(err, rec.Image)
	case exit.OOMKilled:
		rec.Status, rec.ErrorReason, rec.ExitCode = bay.ExecFailed, fmt.Sprintf("killed for exceeding memory_mb (%d)", rec.Policy.MemoryMB), &code
	case exit.Code != 0:
		rec.Status, rec.ErrorReason, rec.ExitCode = bay.ExecFailed, fmt.Sprintf("exit code %d", exit.Code), &code
	default:
		rec.Status, rec.ExitCode = bay.ExecSucceeded, &code
	}
	if rec.Status == bay.ExecCancelled || rec.Status == bay.ExecTimedOut {
		if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			rec.ExitCode = &code
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if derr := s.drv.DestroyInstance(rctx, rec.Instance); derr != nil {
		s.log.Error("exec: remove the container", "exec_id", rec.ID, "err", derr)
	}
	s.finish(ctx, rec, func(m Manifest) {
		if len(m.Dropped) > 0 {
			rec.Status = bay.ExecFailed
			rec.ErrorReason = fmt.Sprintf("artifacts over the limits: %d file(s) dropped (%s), %d kept (%d bytes)",
				len(m.Dropped), m.DropReason, len(m.Files), m.TotalBytes)
		}
	})
}

// finish collects the artifacts (when the exec's directory exists), sets the end time and
// writes the final record. adjust sees the manifest before meta.json and the record are written.
func (s *Service) finish(ctx context.Context, rec *bay.ExecRecord, adjust func(Manifest)) {
	if s.adoptedElsewhere(ctx, rec) {
		return // its files are the adopter's to collect
	}
	now := s.clock.Now().UTC()
	rec.EndedAt = &now
	if rec.StartedAt != nil {
		rec.DurationMS = now.Sub(*rec.StartedAt).Milliseconds()
	}
	_, err := s.cfg.Workspace.Collect(rec.Owner, rec.ProjectID, rec.ID, rec.Policy.MaxOutputBytes,
		min(rec.Policy.MaxArtifactsBytesTotal, rec.Policy.MaxOutputsBytesTotal), func(m Manifest) any {
			if adjust != nil {
				adjust(m)
			}
			return s.meta(rec, m)
		})
	if err != nil {
		s.log.Error("exec: collect the artifacts", "exec_id", rec.ID, "err", err)
		if rec.Status == bay.ExecSucceeded {
			rec.Status, rec.ErrorReason = bay.ExecFailed, "the artifacts could not be collected"
		}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = s.store.Tx(wctx, func(tx bay.Tx) error { return update(wctx, tx, rec) })
	if errors.Is(err, errAdopted) {
		s.log.Warn("exec: another bay instance adopted the exec meanwhile; its outcome stands, not this one's", "exec_id", rec.ID, "err", err)
		return
	}
	if err != nil {
		s.log.Error("exec: finalise the audit record", "exec_id", rec.ID, "status", rec.Status, "err", err)
		return
	}
	s.log.Info("exec finished", "exec_id", rec.ID, "status", rec.Status, "exit_code", rec.ExitCode, "duration_ms", rec.DurationMS)
}

// errAdopted: the stored record names another bay instance than the one writing it. That
// instance adopted the exec while this one was taken for gone (its heartbeat lapsed over a
// stall; adopt.go), and only the adopter writes the record from then on.
var errAdopted = errors.New("another bay instance adopted the exec")

// adoptedElsewhere reports (and logs) whether the stored record names another bay instance than
// rec does: that one adopted the exec, and this bay leaves its container, its files and its
// record alone. A failed read answers false; the record's write checks again (update).
func (s *Service) adoptedElsewhere(ctx context.Context, rec *bay.ExecRecord) bool {
	cur, err := s.store.GetExecRecord(context.WithoutCancel(ctx), rec.ID)
	if err != nil || cur.BayInstance == rec.BayInstance {
		return false
	}
	s.log.WarnContext(ctx, "exec: another bay instance adopted the exec meanwhile; its outcome stands, not this one's",
		"exec_id", rec.ID, "adopted_by", cur.BayInstance)
	return true
}

// update writes rec in tx unless the stored record names another bay instance than rec does
// (errAdopted): a bay never overwrites an exec that another one adopted.
func update(ctx context.Context, tx bay.Tx, rec *bay.ExecRecord) error {
	cur, err := tx.GetExecRecord(ctx, rec.ID)
	if err != nil {
		return err
	}
	if cur.BayInstance != rec.BayInstance {
		return fmt.Errorf("exec %s is bay instance %s's, not %s's: %w", rec.ID, cur.BayInstance, rec.BayInstance, errAdopted)
	}
	return tx.UpdateExecRecord(ctx, rec)
}

// meta is meta.json: the record's facts with the mounts as the engine was given them.
func (s *Service) meta(rec *bay.ExecRecord, m Manifest) any {
	type mount struct {
		Source   string `json:"source"`
		Target   string `json:"target"`
		ReadOnly bool   `json:"read_only"`
	}
	var mounts []mount
	for _, mt := range s.mounts(rec) {
		mounts = append(mounts, mount{mt.Source, mt.Target, mt.ReadOnly})
	}
	return map[string]any{
		"exec_id": rec.ID, "project_id": rec.ProjectID, "task_id": rec.TaskID, "conversation_id": rec.ConversationID,
		"skill_id": rec.SkillID, "skill_version": rec.SkillVersion, "image": rec.Image, "cmd": rec.Cmd, "args": rec.Args, "cwd": rec.Cwd,
		"env_keys": rec.EnvKeys, "policy_snapshot": rec.Policy, "status": rec.Status, "exit_code": rec.ExitCode,
		"error_reason": rec.ErrorReason, "stdout_truncated": rec.StdoutTruncated, "stderr_truncated": rec.StderrTruncated,
		"created_at": rec.CreatedAt, "started_at": rec.StartedAt, "ended_at": rec.EndedAt, "duration_ms": rec.DurationMS,
		"docker_mounts": mounts, "network": "none", "user": "1000:1000", "runtime": cmp.Or(s.cfg.ContainerRuntime, "default"),
		"artifacts": map[string]any{"files": len(m.Files), "total_bytes": m.TotalBytes, "dropped": len(m.Dropped)},
	}
}

// instanceSpec is the exec's one-shot container: no network, uid 1000, the container runtime
// of the configuration, the policy's limits,
// the three workspace mounts and, for a skill's exec, its version read-only at /skills/<id>.
func (s *Service) instanceSpec(rec *bay.ExecRecord, env map[string]string) bay.InstanceSpec {
	return bay.InstanceSpec{
		Name: rec.Instance,
		Labels: bay.WithDeployment(map[string]string{
			bay.LabelOwner: rec.Owner, LabelExecID: rec.ID, bay.LabelInstanceID: s.cfg.InstanceID,
		}, s.cfg.Deployment),
		Network: bay.NetworkPolicy{Mode: bay.NetworkNone},
		Runtime: s.cfg.ContainerRuntime,
		Containers: []bay.ContainerSpec{{
			Name: "exec", RuntimeType: "exec", Image: rec.Image, Env: maps.Clone(env), User: "1000:1000",
			Command: append([]string{rec.Cmd}, rec.Args...), WorkDir: rec.Cwd,
			Limits: bay.Limits{
				NanoCPUs:    int64(rec.Policy.CPUCores * 1e9),
				MemoryBytes: rec.Policy.MemoryMB << 20,
				PidsLimit:   rec.Policy.Pids,
			},
			Mounts: s.mounts(rec),
		}},
	}
}

// cappedWriter keeps the first max bytes and marks the rest truncated: the process is never
// blocked or killed for its output. A failing file is logged once by the caller (err).
type cappedWriter struct {
	w         io.Writer
	max, n    int64
	truncated bool
	err       error
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	keep := p
	if room := max(c.max-c.n, 0); int64(len(p)) > room {
		keep, c.truncated = p[:room], true
	}
	if len(keep) > 0 && c.err == nil {
		n, err := c.w.Write(keep)
		c.n += int64(n)
		c.err = err
	}
	return len(p), nil
}

// safeReason is a client-safe one-line cause: a missing image by name, otherwise the kind of
// failure without engine internals.
func safeReason(err error, image string) string {
	switch {
	case strings.Contains(err.Error(), "not found locally"):
		return fmt.Sprintf("image %s is not present on the engine", image)
	case bay.ErrorCode(err) != bay.CodeInternal:
		return bay.ErrorCode(err)
	}
	return "engine error (see the bay log)"
}
