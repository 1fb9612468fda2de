// Package jobs is bay's side of jobs: long-running commands a sandbox's runtime (ship) starts,
// watches and keeps the output of (internal/ship/jobs). Bay keeps one row per job, follows the
// job until it ends (a watcher per running job, resumed when bay starts), records the end in the
// execution history, and reads the output from ship for its clients.
//
// A job belongs to the session whose runtime runs it. When that session ends while the job runs
// (the sandbox was stopped, deleted or expired, or its runtime died and was replaced), the
// job's processes are gone with it: the job is lost, with the reason. While it runs, the watcher
// calls the runtime every poll interval, and every call refreshes the sandbox's idle deadline:
// a running job keeps its sandbox from the idle timeout, never from its TTL.
package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/lease"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
)

// Runtime reaches the runtime of a sandbox (internal/bay/sandbox.Service.CallRuntime): call
// runs against the authorized endpoint of the owner's sandbox container serving capability,
// starting its compute when needed; it returns the id of the session called.
type Runtime interface {
	CallRuntime(ctx context.Context, owner, sandboxID, capability string, call func(ctx context.Context, endpoint string) error) (sessionID string, err error)
}

// Ship is the jobs API of the runtime (internal/bay/shipclient.Client).
type Ship interface {
	StartJob(ctx context.Context, endpoint string, req shipapi.StartJobRequest) (*shipapi.JobInfo, error)
	GetJob(ctx context.Context, endpoint, id string) (*shipapi.JobInfo, error)
	CancelJob(ctx context.Context, endpoint, id string) (*shipapi.JobInfo, error)
	JobOutput(ctx context.Context, endpoint, id string, offs [3]int64, wait time.Duration, maxBytes int) (*shipapi.JobOutputResponse, error)
}

// Config configures a Service.
type Config struct {
	// MaxDuration bounds a job's timeout and is the timeout of a job that gives none
	// (jobs.max_duration; default 24 h).
	MaxDuration time.Duration
	// PollInterval is how often a watcher asks the runtime about a running job (default 2 s).
	// It must stay well below the profiles' idle timeouts: each poll refreshes the idle deadline.
	PollInterval time.Duration
	// Holder names this bay in the leases of the jobs it watches (its boot id; default a new
	// id). Bays sharing a database must have different holders.
	Holder string
	Now    func() time.Time
	Log    *slog.Logger
}

// Watch leases: one bay of those sharing a database polls each running job. Its watcher holds
// the lease "job-watch/<job id>" and renews it at every poll; the other bays' watchers find it
// held and wait, trying again every lease TTL, so one of them takes the job over within about
// two lease TTLs of its holder dying. Every bay adopts the running jobs it does not watch yet
// every adoptPolls poll intervals, so a job started on a bay that died is watched too.
const (
	leaseTTLPolls = 3               // the lease lasts this many poll intervals,
	minLeaseTTL   = 5 * time.Second // and at least this long: a busy holder keeps it
	adoptPolls    = 10              // running jobs are adopted every so many poll intervals
)

// leaseTTL is how long a watch lease lasts.
func (s *Service) leaseTTL() time.Duration { return max(leaseTTLPolls*s.cfg.PollInterval, minLeaseTTL) }

// WatchLease is the name of the lease of a job's watcher: the bay holding it polls the job,
// the others leave it alone.
func WatchLease(jobID string) string { return "job-watch/" + jobID }

// Service starts, follows and cancels jobs.
type Service struct {
	rt    Runtime
	ship  Ship
	store bay.Store
	cfg   Config
	log   *slog.Logger

	ctx    context.Context // ends the watchers
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	live map[string]*shipapi.JobInfo // guarded by mu: what the runtime last said of each watched job
	// watched are the jobs this bay has a watcher of (holding their lease or waiting for it);
	// guarded by mu.
	watched map[string]bool
}

// New returns a Service; Resume starts the watchers of the jobs the store has running.
func New(rt Runtime, ship Ship, store bay.Store, cfg Config) *Service {
	if cfg.MaxDuration <= 0 {
		cfg.MaxDuration = 24 * time.Hour
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Holder == "" {
		cfg.Holder = bay.NewID("bay")
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{rt: rt, ship: ship, store: store, cfg: cfg, log: cfg.Log.With("component", "jobs"),
		ctx: ctx, cancel: cancel, live: map[string]*shipapi.JobInfo{}, watched: map[string]bool{}}
}

// MaxDuration is the longest timeout a job may have.
func (s *Service) MaxDuration() time.Duration { return s.cfg.MaxDuration }

// capability is the capability a job of kind needs: the container serving it runs the job.
func capability(kind string) string {
	if kind == bayapi.JobKindPython {
		return bayapi.CapPython
	}
	return bayapi.CapShell
}

// StartParams are the inputs of Start (validated by the caller but for the timeout's bound).
type StartParams struct {
	Kind        string
	Command     string // the command line, or the Python code
	Cwd         *string
	Env         map[string]string
	Timeout     time.Duration // 0: MaxDuration
	Description *string
	Tags        *string
	// OutputPaths are the workspace paths whose created or changed files are the job's
	// artifacts (default the workspace).
	OutputPaths []string
	// IdempotencyKey names the job for retries: a start with a key already used for the same
	// sandbox returns that job (running or ended) and starts nothing.
	IdempotencyKey string
}

// keyedID is the id of the job started with an idempotency key: derived from owner, sandbox
// and key, so every retry (on any bay) names the same job, and ship, which starts nothing
// under an id it has, never runs it twice.
func keyedID(owner, sandboxID, key string) string {
	h := sha256.Sum256([]byte(owner + "\x00" + sandboxID + "\x00" + key))
	return bay.PrefixJob + "-" + hex.EncodeToString(h[:6])
}

// sameStart reports whether a retry asks for the job j is.
func sameStart(j *bay.Job, p StartParams) bool {
	cwd := func(c *string) string {
		if c == nil {
			return "."
		}
		return *c
	}
	return j.Kind == p.Kind && j.Command == p.Command && cwd(j.Cwd) == cwd(p.Cwd) && j.TimeoutSeconds == int64(p.Timeout.Seconds())
}

// replay returns the job a retry names, or nil when there is none yet.
func (s *Service) replay(ctx context.Context, owner, sandboxID, id string, p StartParams) (*bay.Job, error) {
	j, err := s.store.GetJob(ctx, id)
	switch {
	case bay.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, bay.Errorf(bay.CodeInternal, "Failed to read the job").WithCause(err)
	case j.Owner != owner || j.SandboxID != sandboxID || !sameStart(j, p):
		return nil, bay.Errorf(bay.CodeConflict, "Idempotency-Key was used for another job start").
			WithDetails(map[string]any{"key": p.IdempotencyKey, "hint": "use a new key for a different request", "job_id": j.ID})
	}
	return s.withLive(j), nil
}

// Start starts a job in the owner's sandbox (starting its compute when needed) and records it.
// replayed is true when an idempotency key named a job started before, which is returned.
func (s *Service) Start(ctx context.Context, owner, sandboxID string, p StartParams) (j *bay.Job, replayed bool, err error) {
	if p.Timeout <= 0 {
		p.Timeout = s.cfg.MaxDuration
	}
	if p.Timeout > s.cfg.MaxDuration {
		return nil, false, bay.Errorf(bay.CodeValidation, "timeout must be at most %d seconds (jobs.max_duration)", int64(s.cfg.MaxDuration.Seconds()))
	}
	id := bay.NewID(bay.PrefixJob)
	if p.IdempotencyKey != "" {
		if _, err := s.owned(ctx, owner, sandboxID); err != nil {
			return nil, false, err
		}
		id = keyedID(owner, sandboxID, p.IdempotencyKey)
		if j, err := s.replay(ctx, owner, sandboxID, id, p); j != nil || err != nil {
			return j, j != nil, err
		}
	}
	req := shipapi.StartJobRequest{ID: id, Kind: p.Kind, Cwd: p.Cwd, Env: p.Env, TimeoutSeconds: p.Timeout.Seconds(), OutputPaths: p.OutputPaths}
	if p.Kind == bayapi.JobKindPython {
		req.Code = p.Command
	} else {
		req.Command = p.Command
	}
	var info *shipapi.JobInfo
	sessID, err := s.rt.CallRuntime(ctx, owner, sandboxID, capability(p.Kind), func(ctx context.Context, ep string) (err error) {
		info, err = s.ship.StartJob(ctx, ep, req)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	started := unixTime(info.StartedAt)
	j = &bay.Job{
		ID: id, Owner: owner, SandboxID: sandboxID, SessionID: sessID, Kind: p.Kind, Command: p.Command, Cwd: p.Cwd,
		TimeoutSeconds: int64(p.Timeout.Seconds()), Description: p.Description, Tags: p.Tags,
		Status: bay.JobRunning, CreatedAt: s.cfg.Now(), StartedAt: &started,
	}
	// The job runs: record it even if the caller left meanwhile. This bay takes its watch lease
	// in the same transaction: another bay that lists the running jobs before this one's
	// watcher first runs must find it watched, not adopt it.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = s.store.Tx(dctx, func(tx bay.Tx) error {
		if err := tx.InsertJob(dctx, j); err != nil {
			return err
		}
		_, err := tx.AcquireLease(dctx, WatchLease(id), s.cfg.Holder, s.cfg.Now(), s.leaseTTL())
		return err
	})
	if err != nil && bay.IsConflict(err) && p.IdempotencyKey != "" {
		// A concurrent retry recorded it first (ship ran it once for both).
		j, err = s.replay(dctx, owner, sandboxID, id, p)
		return j, true, err
	}
	if err != nil {
		// A job nobody can see must not run on.
		_, _ = s.rt.CallRuntime(dctx, owner, sandboxID, capability(p.Kind), func(ctx context.Context, ep string) error {
			_, err := s.ship.CancelJob(ctx, ep, id)
			return err
		})
		return nil, false, bay.Errorf(bay.CodeInternal, "Failed to record the job").WithCause(err)
	}
	s.log.Info("job started", "job_id", id, "sandbox_id", sandboxID, "session_id", sessID, "kind", p.Kind)
	s.setLive(id, info)
	if info.Status != shipapi.JobRunning {
		// A keyed job ship ran before bay recorded it (bay stopped in between) and that ended.
		j, err = s.finish(dctx, id, info, "")
		return j, false, err
	}
	s.spawn(j)
	return s.withLive(j), false, nil
}

// owned returns the owner's live sandbox, or not_found.
func (s *Service) owned(ctx context.Context, owner, sandboxID string) (*bay.Sandbox, error) {
	sb, err := s.store.GetSandbox(ctx, sandboxID)
	if err != nil && !bay.IsNotFound(err) {
		return nil, bay.Errorf(bay.CodeInternal, "Failed to read the sandbox").WithCause(err)
	}
	if err != nil || sb.Owner != owner || sb.DeletedAt != nil {
		return nil, bay.Errorf(bay.CodeNotFound, "Sandbox not found: %s", sandboxID)
	}
	return sb, nil
}

// ownedJob returns the job of the owner's sandbox, or not_found.
func (s *Service) ownedJob(ctx context.Context, owner, sandboxID, jobID string) (*bay.Sandbox, *bay.Job, error) {
	sb, err := s.owned(ctx, owner, sandboxID)
	if err != nil {
		return nil, nil, err
	}
	j, err := s.store.GetJob(ctx, jobID)
	if err != nil && !bay.IsNotFound(err) {
		return nil, nil, bay.Errorf(bay.CodeInternal, "Failed to read the job").WithCause(err)
	}
	if err != nil || j.Owner != owner || j.SandboxID != sandboxID {
		return nil, nil, bay.Errorf(bay.CodeNotFound, "Job not found: %s", jobID)
	}
	return sb, j, nil
}

// Get returns a job, with the byte counts the runtime last reported while it runs.
func (s *Service) Get(ctx context.Context, owner, sandboxID, jobID string) (*bay.Job, error) {
	_, j, err := s.ownedJob(ctx, owner, sandboxID, jobID)
	if err != nil {
		return nil, err
	}
	return s.withLive(j), nil
}

// List returns one page of the sandbox's jobs, newest first, and the total count.
func (s *Service) List(ctx context.Context, owner, sandboxID string, statuses []string, limit, offset int) ([]*bay.Job, int, error) {
	if _, err := s.owned(ctx, owner, sandboxID); err != nil {
		return nil, 0, err
	}
	q := bay.JobQuery{Owner: owner, SandboxID: sandboxID, Statuses: statuses, Limit: limit, Offset: offset}
	js, total, err := s.store.ListJobs(ctx, q)
	if err != nil {
		return nil, 0, bay.Errorf(bay.CodeInternal, "Failed to list jobs").WithCause(err)
	}
	for i, j := range js {
		js[i] = s.withLive(j)
	}
	return js, total, nil
}

// Cancel terminates a running job's process group (SIGTERM, then SIGKILL after ship's grace
// period) and returns it ended; an ended job is returned as it is.
func (s *Service) Cancel(ctx context.Context, owner, sandboxID, jobID string) (*bay.Job, error) {
	sb, j, err := s.ownedJob(ctx, owner, sandboxID, jobID)
	if err != nil || bay.JobFinal(j.Status) {
		return j, err
	}
	if sb.CurrentSessionID != j.SessionID {
		return s.finish(ctx, j.ID, nil, sessionGone)
	}
	var info *shipapi.JobInfo
	sessID, err := s.rt.CallRuntime(ctx, owner, sandboxID, capability(j.Kind), func(ctx context.Context, ep string) (err error) {
		info, err = s.ship.CancelJob(ctx, ep, j.ID)
		return err
	})
	switch {
	case err == nil && sessID == j.SessionID:
		return s.finish(ctx, j.ID, info, "")
	case err == nil || shipclient.IsJobUnknown(err):
		return s.finish(ctx, j.ID, nil, runtimeForgot)
	}
	return nil, err
}

// Reasons of lost jobs.
const (
	sessionGone    = "the sandbox's session that ran the job ended while it ran (the sandbox was stopped, or its runtime died and was replaced): the job's processes are gone"
	sandboxDeleted = "the sandbox was deleted (or expired) while the job ran"
	runtimeForgot  = "the sandbox's runtime no longer knows the job: it restarted on a fresh filesystem (its container was replaced) while the job ran"
)

// Output reads the job's output from the offsets, waiting at most wait for new bytes. The
// output lives with the session that ran the job: once that session ended, out is nil (and the
// job, if it ran, is recorded lost).
func (s *Service) Output(ctx context.Context, owner, sandboxID, jobID string, offsets [2]int64, wait time.Duration) (j *bay.Job, out *shipapi.JobOutputResponse, err error) {
	j, out, _, err = s.output(ctx, owner, sandboxID, jobID, offsets, wait)
	return j, out, err
}

// output is Output that also returns the runtime endpoint it read from ("" when none).
func (s *Service) output(ctx context.Context, owner, sandboxID, jobID string, offsets [2]int64, wait time.Duration) (j *bay.Job, out *shipapi.JobOutputResponse, endpoint string, err error) {
	sb, j, err := s.ownedJob(ctx, owner, sandboxID, jobID)
	if err != nil {
		return nil, nil, "", err
	}
	if sb.CurrentSessionID != j.SessionID {
		if !bay.JobFinal(j.Status) {
			j, err = s.finish(ctx, j.ID, nil, sessionGone)
		}
		return j, nil, "", err
	}
	sessID, err := s.rt.CallRuntime(ctx, owner, sandboxID, capability(j.Kind), func(ctx context.Context, ep string) (err error) {
		endpoint = ep
		out, err = s.ship.JobOutput(ctx, ep, j.ID, [3]int64{offsets[0], offsets[1]}, wait, 0)
		return err
	})
	switch {
	case err == nil && sessID != j.SessionID, shipclient.IsJobUnknown(err):
		if !bay.JobFinal(j.Status) {
			j, err = s.finish(ctx, j.ID, nil, runtimeForgot)
		}
		return j, nil, "", err
	case err != nil:
		return nil, nil, "", err
	}
	j, err = s.observed(ctx, j, out)
	return j, out, endpoint, err
}

// observed records what a read of the output said of the job: its end, or its byte counts.
func (s *Service) observed(ctx context.Context, j *bay.Job, out *shipapi.JobOutputResponse) (*bay.Job, error) {
	if out.Job.Status != shipapi.JobRunning && !bay.JobFinal(j.Status) {
		return s.finish(ctx, j.ID, &out.Job, "")
	}
	s.setLive(j.ID, &out.Job)
	return s.withLive(j), nil
}

// Follower reads one job's output for one client, again and again: the first read goes the
// whole way (owner, sandbox, session, runtime), the next ones straight to the runtime endpoint
// it found, until an error sends a read the whole way again (the session may have changed).
type Follower struct {
	s                       *Service
	owner, sandboxID, jobID string
	endpoint                string
	job                     *bay.Job
}

// Follower returns a Follower of the job.
func (s *Service) Follower(owner, sandboxID, jobID string) *Follower {
	return &Follower{s: s, owner: owner, sandboxID: sandboxID, jobID: jobID}
}

// Read is Service.Output.
func (f *Follower) Read(ctx context.Context, offsets [2]int64, wait time.Duration) (*bay.Job, *shipapi.JobOutputResponse, error) {
	if f.endpoint != "" && f.job != nil && !bay.JobFinal(f.job.Status) {
		out, err := f.s.ship.JobOutput(ctx, f.endpoint, f.jobID, [3]int64{offsets[0], offsets[1]}, wait, 0)
		if err == nil {
			j, err := f.s.observed(ctx, f.job, out)
			if err == nil {
				f.job = j
			}
			return j, out, err
		}
		if ctx.Err() != nil {
			return nil, nil, err
		}
		f.endpoint = ""
	}
	j, out, ep, err := f.s.output(ctx, f.owner, f.sandboxID, f.jobID, offsets, wait)
	f.job, f.endpoint = j, ep
	return j, out, err
}

func unixTime(secs float64) time.Time {
	return time.UnixMilli(int64(secs * 1e3)).UTC()
}

func (s *Service) setLive(id string, info *shipapi.JobInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, watched := s.live[id]; watched || info.Status == shipapi.JobRunning {
		s.live[id] = info
	}
}

// withLive returns j with the byte counts the runtime last reported, while it runs.
func (s *Service) withLive(j *bay.Job) *bay.Job {
	if bay.JobFinal(j.Status) {
		return j
	}
	s.mu.Lock()
	info := s.live[j.ID]
	s.mu.Unlock()
	if info == nil {
		return j
	}
	c := *j
	c.StdoutBytes, c.StderrBytes = info.Stdout.Bytes, info.Stderr.Bytes
	c.StdoutTruncated, c.StderrTruncated = info.Stdout.Truncated, info.Stderr.Truncated
	return &c
}

// finish records the end of a job, from the runtime's final description (info) or as lost
// with reason, and its entry in the execution history. A job already ended is left as it is.
func (s *Service) finish(ctx context.Context, id string, info *shipapi.JobInfo, lostReason string) (*bay.Job, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var out *bay.Job
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		j, err := tx.GetJob(ctx, id)
		if err != nil {
			return err
		}
		out = j
		if bay.JobFinal(j.Status) {
			return nil
		}
		now := s.cfg.Now()
		if info != nil {
			j.Status, j.ExitCode, j.Reason = info.Status, info.ExitCode, info.Reason
			j.StdoutBytes, j.StderrBytes = info.Stdout.Bytes, info.Stderr.Bytes
			j.StdoutTruncated, j.StderrTruncated = info.Stdout.Truncated, info.Stderr.Truncated
			j.ArtifactsNote = info.ArtifactsNote
			for _, a := range info.CreatedArtifacts {
				j.Artifacts = append(j.Artifacts, bay.Artifact{Path: a.Path, Size: a.Size, SHA256: a.SHA256, Change: a.Change})
			}
			if info.EndedAt != nil {
				now = unixTime(*info.EndedAt)
			}
		} else {
			j.Status, j.Reason = bay.JobLost, lostReason
			s.mu.Lock()
			if l := s.live[id]; l != nil {
				j.StdoutBytes, j.StderrBytes = l.Stdout.Bytes, l.Stderr.Bytes
				j.StdoutTruncated, j.StderrTruncated = l.Stdout.Truncated, l.Stderr.Truncated
			}
			s.mu.Unlock()
		}
		j.EndedAt = &now
		if err := tx.UpdateJob(ctx, j); err != nil {
			return err
		}
		return tx.InsertExecution(ctx, historyEntry(j))
	})
	if err != nil {
		return nil, bay.Errorf(bay.CodeInternal, "Failed to record the end of the job").WithCause(err)
	}
	s.mu.Lock()
	delete(s.live, id)
	s.mu.Unlock()
	s.log.Info("job ended", "job_id", id, "sandbox_id", out.SandboxID, "status", out.Status, "reason", out.Reason)
	return out, nil
}

// historyEntry is the execution-history row of an ended job: its kind as exec type, tagged
// "job", its reason (or exit code) as error.
func historyEntry(j *bay.Job) *bay.Execution {
	var ms int64
	if j.StartedAt != nil && j.EndedAt != nil {
		ms = j.EndedAt.Sub(*j.StartedAt).Milliseconds()
	}
	e := &bay.Execution{
		ID: bay.NewID(bay.PrefixExecution), Owner: j.Owner, SandboxID: j.SandboxID, SessionID: j.SessionID,
		ExecType: j.Kind, Code: j.Command, Success: j.Status == bay.JobSucceeded, ExecutionTimeMS: ms,
		Description: j.Description, CreatedAt: *j.EndedAt,
	}
	if e.Description == nil {
		d := "job " + j.ID
		e.Description = &d
	}
	if !e.Success {
		msg := fmt.Sprintf("job %s", j.Status)
		switch {
		case j.Reason != "":
			msg += ": " + j.Reason
		case j.ExitCode != nil:
			msg += fmt.Sprintf(": exit code %d", *j.ExitCode)
		}
		e.Error = &msg
	}
	tags := "job"
	if j.Tags != nil && *j.Tags != "" {
		seen := false
		for t := range strings.SplitSeq(*j.Tags, ",") {
			seen = seen || strings.TrimSpace(t) == "job"
		}
		if tags = *j.Tags; !seen {
			tags += ",job"
		}
	}
	e.Tags = &tags
	return e
}

// Resume starts a watcher for every job the store has running (bay starting: the jobs ran on
// without it), then adopts the running jobs it does not watch yet every adoptPolls poll
// intervals (those another bay started and watched until it died), until Close.
func (s *Service) Resume(ctx context.Context) error {
	n, err := s.adopt(ctx)
	if err != nil {
		return fmt.Errorf("resume jobs: %w", err)
	}
	if n > 0 {
		s.log.Info("watching the jobs that ran on while bay was away", "jobs", n)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(adoptPolls * s.cfg.PollInterval)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
			}
			if _, err := s.adopt(s.ctx); err != nil && s.ctx.Err() == nil {
				s.log.Warn("job watch: cannot list the running jobs", "err", err)
			}
		}
	}()
	return nil
}

// adopt starts a watcher for every running job without one on this bay; n counts them.
func (s *Service) adopt(ctx context.Context) (n int, err error) {
	js, _, err := s.store.ListJobs(ctx, bay.JobQuery{Statuses: []string{bay.JobStarting, bay.JobRunning}})
	if err != nil {
		return 0, err
	}
	for _, j := range js {
		if s.spawn(j) {
			n++
		}
	}
	return n, nil
}

// spawn starts the watcher of j unless this bay has one; it reports whether it started one.
func (s *Service) spawn(j *bay.Job) bool {
	s.mu.Lock()
	if s.watched[j.ID] {
		s.mu.Unlock()
		return false
	}
	s.watched[j.ID] = true
	if _, ok := s.live[j.ID]; !ok {
		s.live[j.ID] = &shipapi.JobInfo{Status: shipapi.JobRunning}
	}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.forget(j.ID)
		t := time.NewTicker(s.cfg.PollInterval)
		defer t.Stop()
		for {
			held, ended := s.watch(j)
			if ended {
				return
			}
			wait := t.C
			if !held {
				// Another bay watches it: try again once its lease could have lapsed.
				wait = time.After(s.leaseTTL())
			}
			select {
			case <-s.ctx.Done():
				return
			case <-wait:
			}
		}
	}()
	return true
}

// forget drops what this bay knew of a job it no longer watches.
func (s *Service) forget(id string) {
	s.mu.Lock()
	delete(s.live, id)
	delete(s.watched, id)
	s.mu.Unlock()
}

// watch takes (or renews) j's watch lease and, holding it, checks the job once: held says
// whether this bay holds the lease, ended whether the job ended (its lease is then released).
func (s *Service) watch(j *bay.Job) (held, ended bool) {
	name := WatchLease(j.ID)
	ok, err := lease.Acquire(s.ctx, s.store, name, s.cfg.Holder, s.cfg.Now(), s.leaseTTL(), 30*time.Second)
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn("job watch: cannot take the job's lease", "job_id", j.ID, "err", err)
		}
		return true, false // retry at the next poll
	}
	if !ok {
		cur, err := s.store.GetJob(s.ctx, j.ID)
		return false, err == nil && bay.JobFinal(cur.Status)
	}
	if ended = s.check(j); ended {
		lease.Release(s.ctx, s.store, name, s.cfg.Holder, 10*time.Second, s.log)
	}
	return true, ended
}

// check asks about a running job once and records its end; it reports whether the job ended.
func (s *Service) check(j *bay.Job) bool {
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	cur, err := s.store.GetJob(ctx, j.ID)
	if err == nil && bay.JobFinal(cur.Status) {
		return true
	}
	sb, err := s.store.GetSandbox(ctx, j.SandboxID)
	switch {
	case bay.IsNotFound(err) || err == nil && sb.DeletedAt != nil:
		return s.ended(s.finish(ctx, j.ID, nil, sandboxDeleted))
	case err != nil:
		s.log.Warn("job watch: cannot read the sandbox", "job_id", j.ID, "err", err)
		return false
	case sb.CurrentSessionID != j.SessionID:
		return s.ended(s.finish(ctx, j.ID, nil, sessionGone))
	}
	var info *shipapi.JobInfo
	sessID, err := s.rt.CallRuntime(ctx, j.Owner, j.SandboxID, capability(j.Kind), func(ctx context.Context, ep string) (err error) {
		info, err = s.ship.GetJob(ctx, ep, j.ID)
		return err
	})
	switch {
	case err == nil && sessID != j.SessionID, shipclient.IsJobUnknown(err):
		return s.ended(s.finish(ctx, j.ID, nil, runtimeForgot))
	case bay.ErrorCode(err) == bay.CodeSandboxExpired || bay.ErrorCode(err) == bay.CodeNotFound:
		return s.ended(s.finish(ctx, j.ID, nil, sandboxDeleted))
	case err != nil:
		if !errors.Is(err, context.Canceled) {
			s.log.Warn("job watch: the runtime did not answer", "job_id", j.ID, "err", err)
		}
		return false
	case info.Status != shipapi.JobRunning:
		return s.ended(s.finish(ctx, j.ID, info, ""))
	}
	s.setLive(j.ID, info)
	return false
}

func (s *Service) ended(_ *bay.Job, err error) bool {
	if err != nil {
		s.log.Warn("job watch: cannot record the end", "err", err)
		return false
	}
	return true
}

// Close stops the watchers (the jobs run on; the next bay resumes watching them).
func (s *Service) Close() {
	s.cancel()
	s.wg.Wait()
}
