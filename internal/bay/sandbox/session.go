package sandbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shipyard-dev/shipyard/api/gullapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/runtime"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
)

// errRetry makes ensureSlow re-read the state and decide again (another writer changed it).
var errRetry = errors.New("state changed, retry")

// errSessionGone means the session row was deleted (stop / delete) while it was starting.
var errSessionGone = errors.New("session removed while starting")

// EnsureRunning returns the ready current session of a sandbox, starting one when needed
// (lazy start, auto-resume after stop, idle GC or a crash), and refreshes the sandbox's
// idle_expires_at and last_active_at. It does not check the owner (callers do).
//
// Errors: not_found (missing or deleted sandbox), sandbox_expired, validation_error (profile
// no longer configured), session_not_ready
// (503: another instance is starting it; readiness timeout "Runtime failed to become ready";
// stopped while starting), internal_error (engine failure; the session is left "failed" with no
// container).
func (s *Service) EnsureRunning(ctx context.Context, sandboxID string) (*bay.Session, error) {
	sb, err := s.store.GetSandbox(ctx, sandboxID)
	if err != nil {
		if bay.IsNotFound(err) {
			return nil, bay.ErrSandboxNotFound(sandboxID)
		}
		return nil, bay.Internal("Failed to load sandbox", err)
	}
	return s.EnsureSession(ctx, sb)
}

// EnsureSession is EnsureRunning for a sandbox row the caller has just read (capability calls
// read it to check the owner: one read less per call). The slow path re-reads it.
func (s *Service) EnsureSession(ctx context.Context, sb *bay.Sandbox) (*bay.Session, error) {
	return s.EnsureSessionFor(ctx, sb, "")
}

// EnsureSessionFor is EnsureSession for a call served by the session's container named
// container: while a session of several containers starts, it returns as soon as that one is
// ready, with the session still "starting" (its other containers may not run yet: the caller
// uses only this one). The start goes on, and fails and is undone as a whole if another
// container fails. container "" waits for every container, as EnsureSession does.
func (s *Service) EnsureSessionFor(ctx context.Context, sb *bay.Sandbox, container string) (*bay.Session, error) {
	sandboxID := sb.ID
	if sb.DeletedAt != nil {
		return nil, bay.ErrSandboxNotFound(sandboxID)
	}
	now := s.now()
	if sb.Expired(now) {
		return nil, bay.ErrExpired(sb, "sandbox is expired")
	}
	// Fast path: a ready session whose container was seen alive very recently.
	if cur, err := s.currentSession(ctx, s.store, sb); err == nil && cur != nil && cur.Ready() && s.probeFresh(cur.ID, now) {
		if !s.recentlyTouched(sb, now) {
			if err := s.touch(ctx, sandboxID); err != nil {
				return nil, err
			}
		}
		return cur, nil
	}
	sess, err := s.starts.do(ctx, sandboxID, container, func(publish func(*bay.Session)) (*bay.Session, error) {
		// Detached: the start finishes (or cleans up) even if every waiting caller leaves; a
		// stop or delete of the sandbox cancels it (cancelStart).
		cctx, cancel := bay.Detached(ctx, s.cfg.ReadinessTimeout+2*time.Minute)
		defer cancel()
		s.startsMu.Lock()
		s.startCancels[sandboxID] = cancel
		s.startsMu.Unlock()
		defer func() {
			s.startsMu.Lock()
			delete(s.startCancels, sandboxID)
			s.startsMu.Unlock()
		}()
		sess, err := s.ensureSlow(cctx, sandboxID, publish)
		if err != nil && errors.Is(cctx.Err(), context.Canceled) && bay.ErrorCode(err) != bay.CodeSessionNotReady {
			// cancelStart ended the start (a stop, delete or reclaim of the sandbox's compute,
			// such as restart recovery of a session a dead bay left starting) wherever it was,
			// possibly while it discarded the old session: the caller may retry, as after a stop
			// during the container start, rather than read a timeout.
			return nil, fmt.Errorf("%w: %w", errStartCancelled, errStoppedWhileStarting(sandboxID))
		}
		return sess, err
	})
	if err != nil {
		if errors.Is(err, errStartCancelled) || bay.ErrorCode(err) == bay.CodeSessionNotReady {
			// A start ended by a delete is a missing sandbox to every caller waiting on it.
			if cur, gerr := s.store.GetSandbox(ctx, sandboxID); gerr == nil && cur.DeletedAt != nil {
				return nil, bay.ErrSandboxNotFound(sandboxID)
			}
		}
		return nil, err
	}
	if err := s.touch(ctx, sandboxID); err != nil {
		return nil, err
	}
	return sess, nil
}

// touch sets idle_expires_at = now + profile idle timeout and last_active_at = now.
func (s *Service) touch(ctx context.Context, sandboxID string) error {
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		sb, err := tx.GetSandbox(ctx, sandboxID)
		if err != nil {
			return err
		}
		if sb.DeletedAt != nil {
			return bay.ErrSandboxNotFound(sandboxID)
		}
		now := s.now()
		sb.LastActiveAt = now
		if p := s.Profile(sb.ProfileID); p != nil && p.IdleTimeout > 0 && sb.CurrentSessionID != "" {
			t := now.Add(p.IdleTimeout)
			sb.IdleExpiresAt = &t
		}
		return tx.UpdateSandbox(ctx, sb)
	})
	if err != nil {
		if bay.IsNotFound(err) {
			return bay.ErrSandboxNotFound(sandboxID)
		}
		return bay.Classify(err, "Failed to refresh sandbox activity")
	}
	return nil
}

// recentlyTouched reports whether the row the caller just read already carries the activity a
// touch would write, give or take touchSlack(idle timeout): back-to-back calls then cost no
// write transaction. The idle deadline is never more than that slack short of the last call.
func (s *Service) recentlyTouched(sb *bay.Sandbox, now time.Time) bool {
	p := s.Profile(sb.ProfileID)
	if p == nil || p.IdleTimeout <= 0 || sb.IdleExpiresAt == nil {
		return false
	}
	slack := touchSlack(p.IdleTimeout)
	return now.Sub(sb.LastActiveAt) < slack && sb.IdleExpiresAt.After(now.Add(p.IdleTimeout-slack))
}

// touchSlack is how stale an idle deadline may be left: 1/20 of the idle timeout, at most 1 s.
func touchSlack(idle time.Duration) time.Duration { return min(time.Second, idle/20) }

// Touch refreshes a sandbox's idle deadline (the terminal proxy calls it while open).
func (s *Service) Touch(ctx context.Context, sandboxID string) error { return s.touch(ctx, sandboxID) }

// ensureSlow runs under the per-sandbox single flight; publish is told of a starting session
// some of whose containers are ready (startSession).
func (s *Service) ensureSlow(ctx context.Context, id string, publish func(*bay.Session)) (*bay.Session, error) {
	for attempt := 0; attempt < 5; attempt++ {
		sb, err := s.store.GetSandbox(ctx, id)
		if err != nil {
			if bay.IsNotFound(err) {
				return nil, bay.ErrSandboxNotFound(id)
			}
			return nil, bay.Internal("Failed to load sandbox", err)
		}
		if sb.DeletedAt != nil {
			return nil, bay.ErrSandboxNotFound(id)
		}
		now := s.now()
		if sb.Expired(now) {
			return nil, bay.ErrExpired(sb, "sandbox is expired")
		}
		prof := s.Profile(sb.ProfileID)
		if prof == nil {
			return nil, bay.Errorf(bay.CodeValidation, "Invalid profile: %s", sb.ProfileID)
		}
		cur, err := s.currentSession(ctx, s.store, sb)
		if err != nil {
			return nil, err
		}
		if cur != nil {
			switch {
			case cur.Ready():
				alive, err := s.probe(ctx, cur)
				if err != nil {
					return nil, err
				}
				if alive {
					return cur, nil
				}
				s.log.InfoContext(ctx, "runtime container is gone, rebuilding the session", "sandbox_id", id, "session_id", cur.ID)
				if _, err := s.discardSession(ctx, id, cur, ReasonDead); err != nil {
					return nil, err
				}
				continue
			case cur.ObservedState == bay.SessionStarting || cur.ObservedState == bay.SessionPending:
				// A start by an earlier incarnation of this bay will never finish: rebuild it now
				// rather than wait for restart recovery, which runs beside the listener.
				if cur.InstanceID != s.bootID && !cur.FromEarlierBoot(s.cfg.InstanceID, s.bootID) && !s.staleStart(cur, now) {
					// Another bay on this database is starting it.
					return nil, bay.ErrNotReady("Session is starting", id, true)
				}
				s.log.WarnContext(ctx, "discarding a stale starting session", "sandbox_id", id, "session_id", cur.ID, "instance", cur.InstanceID)
				if _, err := s.discardSession(ctx, id, cur, bay.ReasonStaleStart); err != nil {
					return nil, err
				}
				continue
			default: // failed, stopped, stopping: rebuild
				if _, err := s.discardSession(ctx, id, cur, ReasonDead); err != nil {
					return nil, err
				}
				continue
			}
		}
		sess, err := s.createSessionRow(ctx, id, prof)
		if errors.Is(err, errRetry) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return s.startSession(ctx, sb, prof, sess, publish)
	}
	return nil, bay.ErrNotReady("Session state is changing, retry", id, true)
}

// newRuntimeToken is a session's runtime secret: 256 random bits, hex.
func newRuntimeToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// staleStart reports whether a starting session is older than the readiness bound + margin.
func (s *Service) staleStart(cur *bay.Session, now time.Time) bool {
	started := cur.CreatedAt
	if cur.StartedAt != nil {
		started = *cur.StartedAt
	}
	return now.Sub(started) > s.cfg.ReadinessTimeout+s.cfg.StaleStartMargin
}

// createSessionRow inserts a starting session and makes it current, if the sandbox still has
// no current session (else errRetry).
func (s *Service) createSessionRow(ctx context.Context, id string, prof *bay.Profile) (*bay.Session, error) {
	var sess *bay.Session
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		sb, err := tx.GetSandbox(ctx, id)
		if err != nil {
			return err
		}
		if sb.DeletedAt != nil {
			return bay.ErrSandboxNotFound(id)
		}
		if sb.CurrentSessionID != "" {
			if _, err := tx.GetSession(ctx, sb.CurrentSessionID); err == nil {
				return errRetry
			} else if !bay.IsNotFound(err) {
				return err
			}
		}
		now := s.now()
		sess = &bay.Session{
			ID:            bay.NewID(bay.PrefixSession),
			SandboxID:     id,
			ProfileID:     prof.ID,
			DesiredState:  bay.SessionRunning,
			ObservedState: bay.SessionStarting,
			InstanceID:    s.bootID,
			CreatedAt:     now,
			StartedAt:     &now,
			RuntimeToken:  newRuntimeToken(),
		}
		if err := tx.InsertSession(ctx, sess); err != nil {
			return err
		}
		sb.CurrentSessionID = sess.ID
		return tx.UpdateSandbox(ctx, sb)
	})
	if err != nil {
		if errors.Is(err, errRetry) || bay.IsConflict(err) {
			return nil, errRetry
		}
		if bay.IsNotFound(err) {
			return nil, bay.ErrSandboxNotFound(id)
		}
		return nil, bay.Classify(err, "Failed to create session")
	}
	return sess, nil
}

// startSession creates the session's instance (every container of the profile, all or
// nothing), records its containers, and waits for every runtime to answer in parallel. Any
// failure destroys the instance (detached context) and marks the session failed.
//
// The driver may return before every container was started (bay.InstanceSpec.LateStart): the
// session stays "starting" until all of them are ready, and each time one of several becomes
// ready, publish (nil: none) gets a copy of the session with the ready ones marked, so that a
// call served by such a container need not wait for the others (EnsureSessionFor).
func (s *Service) startSession(ctx context.Context, sb *bay.Sandbox, prof *bay.Profile, sess *bay.Session, publish func(*bay.Session)) (*bay.Session, error) {
	log := s.log.With("sandbox_id", sb.ID, "session_id", sess.ID)
	began := time.Now()
	cargo, err := s.store.GetCargo(ctx, sb.CargoID)
	if err != nil {
		s.failSession(ctx, sess)
		if bay.IsNotFound(err) {
			return nil, bay.ErrCargoNotFound(sb.CargoID)
		}
		return nil, bay.Internal("Failed to load cargo", err)
	}
	ref, err := s.cargos.EnsureVolume(ctx, cargo)
	if err != nil {
		if s.failSession(ctx, sess) {
			return nil, errStoppedWhileStarting(sb.ID)
		}
		return nil, err
	}
	tVolume := time.Now()
	s.destroyOtherInstances(ctx, sb.ID, bay.InstanceName(sess.ID))
	tOthers := time.Now()
	spec := s.instanceSpec(sb, prof, sess, ref)
	if err := s.addSkillMounts(ctx, sb, prof, &spec); err != nil {
		if s.failSession(ctx, sess) {
			return nil, errStoppedWhileStarting(sb.ID)
		}
		return nil, bay.Internal("Failed to resolve the sandbox's skills", err)
	}
	inst, err := s.driver.CreateInstance(ctx, spec)
	if err != nil {
		return nil, s.createFailed(ctx, log, sb.ID, sess, err)
	}
	tInstance := time.Now()
	containers := sessionContainers(prof, inst)
	if err := s.updateSession(ctx, sess.ID, func(cur *bay.Session) { cur.Containers = containers }); err != nil {
		s.destroyInstance(ctx, sess)
		return nil, s.startAborted(ctx, sb.ID, sess, err)
	}
	sess.Containers = containers
	tRecorded := time.Now()
	if len(containers) < 2 {
		publish = nil // a single container's readiness is the session's
	}
	if names, err := s.waitAllReady(ctx, sess, inst.Late, publish); err != nil {
		if errors.Is(err, errLateStart) {
			return nil, s.createFailed(ctx, log, sb.ID, sess, err)
		}
		if s.failSession(ctx, sess) {
			return nil, errStoppedWhileStarting(sb.ID)
		}
		log.WarnContext(ctx, "runtime failed to become ready", "containers", names, "err", err)
		msg := "Runtime failed to become ready"
		if len(containers) > 1 {
			msg = "Containers not ready: [" + strings.Join(names, ", ") + "]"
		}
		e := bay.ErrNotReady(msg, sb.ID, true)
		e.Err = err
		return nil, e
	}
	now := s.now()
	containers = sess.Containers // with the endpoints of the containers started late
	for i := range containers {
		containers[i].Status = containerReady
	}
	err = s.updateSession(ctx, sess.ID, func(cur *bay.Session) {
		cur.Containers = containers
		cur.ObservedState = bay.SessionRunning
		cur.LastObservedAt = &now
	})
	if err != nil {
		s.destroyInstance(ctx, sess)
		return nil, s.startAborted(ctx, sb.ID, sess, err)
	}
	sess.Containers, sess.ObservedState, sess.LastObservedAt = containers, bay.SessionRunning, &now
	s.markProbed(sess.ID, now)
	// The steps' durations say where a slow start spent its time.
	log.InfoContext(ctx, "session ready", "instance", inst.Name, "containers", len(containers), "endpoint", sess.Primary().Endpoint, "startup_ms", time.Since(began).Milliseconds(),
		"volume_ms", tVolume.Sub(began).Milliseconds(), "previous_instances_ms", tOthers.Sub(tVolume).Milliseconds(),
		"instance_ms", tInstance.Sub(tOthers).Milliseconds(), "record_ms", tRecorded.Sub(tInstance).Milliseconds(),
		"ready_ms", time.Since(tRecorded).Milliseconds())
	return sess, nil
}

// createFailed fails the session whose instance could not be created or started (also late)
// and returns the error for the callers.
func (s *Service) createFailed(ctx context.Context, log *slog.Logger, sandboxID string, sess *bay.Session, err error) error {
	if s.failSession(ctx, sess) {
		return errStoppedWhileStarting(sandboxID)
	}
	log.ErrorContext(ctx, "create runtime instance failed", "err", err)
	var be *bay.Error
	if errors.As(err, &be) {
		switch be.Code {
		case bay.CodeUnavailable:
			// The platform (or the host firewall sandboxes need) is not available: its own
			// safe message says why.
			return bay.Errorf(bay.CodeUnavailable, "%s", be.Message).WithCause(err)
		case bay.CodeValidation:
			// The driver refused what the profile or the request asks for (a runtime the
			// platform lacks, a policy the runtime cannot enforce) before making anything:
			// the caller's 400, with the driver's safe message and details.
			return bay.Errorf(bay.CodeValidation, "%s", be.Message).WithDetails(be.Details).WithCause(err)
		}
	}
	return bay.Internal("Failed to start the runtime containers", err)
}

// destroyOtherInstances destroys every instance of the sandbox but keep: a sandbox runs one
// instance at a time, and one may still be shutting down (a stop gives runtimes seconds to
// exit, possibly on another bay) or be left by a bay that died mid-start. Errors are logged:
// the start goes on, and orphan GC finds what is left.
func (s *Service) destroyOtherInstances(ctx context.Context, sandboxID, keep string) {
	list, err := s.driver.ListInstances(ctx, map[string]string{bay.LabelSandboxID: sandboxID})
	if err != nil {
		s.log.WarnContext(ctx, "list the sandbox's instances before a start", "sandbox_id", sandboxID, "err", err)
		return
	}
	for _, inst := range list {
		if inst.Name == keep {
			continue
		}
		dctx, cancel := bay.Detached(ctx, s.cfg.StopTimeout)
		if err := s.driver.DestroyInstance(dctx, inst.Name); err != nil {
			s.log.WarnContext(ctx, "destroy a previous instance before a start", "sandbox_id", sandboxID, "instance", inst.Name, "err", err)
		}
		cancel()
	}
}

// sessionContainers are the instance's containers as the session records them, with the
// profile's capabilities of each; the primary first.
func sessionContainers(prof *bay.Profile, inst bay.Instance) []bay.SessionContainer {
	out := make([]bay.SessionContainer, 0, len(inst.Containers))
	for _, c := range inst.Containers {
		caps := []string{}
		for i := range prof.Containers {
			if prof.Containers[i].Name == c.Name {
				caps = append(caps, prof.Containers[i].Capabilities...)
			}
		}
		slices.Sort(caps)
		out = append(out, bay.SessionContainer{Name: c.Name, ContainerID: c.ID, Endpoint: c.Endpoint,
			Status: "created", RuntimeType: c.RuntimeType, Capabilities: caps})
	}
	return out
}

// errStartCancelled marks a start ended because its sandbox was stopped or deleted.
var errStartCancelled = errors.New("start cancelled by a stop or delete")

// cancelStart ends this process's start of the sandbox, if one runs: it was stopped or
// deleted, and nobody is to wait out a readiness timeout for a session that no longer exists.
func (s *Service) cancelStart(sandboxID string) {
	s.startsMu.Lock()
	cancel := s.startCancels[sandboxID]
	s.startsMu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// containerReady is the Status of a session container whose runtime answered.
const containerReady = "running"

// errLateStart marks the failure of the containers the driver started after CreateInstance
// returned (bay.Instance.Late): a failed create, not a runtime that did not become ready.
var errLateStart = errors.New("late container start failed")

// waitAllReady waits for every container's runtime in parallel; it returns the names of those
// that did not become ready and the first error. A container that late (the driver's late
// start, nil: none) still starts is waited for first: its endpoint is then set in
// sess.Containers; should that start fail (errLateStart), the other waits end at once, as the
// driver has removed the instance. Each container that becomes ready is marked so
// (containerReady) and, when publish is not nil, a copy of sess is published; once every
// container the driver started first is ready, the late start begins (Late.Begin). It gives up as
// soon as the session row is gone (a stop or delete, possibly by another bay), checked every
// second.
func (s *Service) waitAllReady(ctx context.Context, sess *bay.Session, late *bay.LateStart, publish func(*bay.Session)) ([]string, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if _, err := s.store.GetSession(ctx, sess.ID); bay.IsNotFound(err) {
				cancel(errStartCancelled)
				return
			}
		}
	}()
	var mu sync.Mutex // guards sess.Containers and early while the waits run
	// early counts the containers the driver started before returning whose runtimes are not
	// ready yet; once they all are, the late start may begin.
	early := 0
	if late != nil {
		for _, c := range sess.Containers {
			if c.Endpoint != "" {
				early++
			}
		}
	}
	errs := make([]error, len(sess.Containers))
	var wg sync.WaitGroup
	for i, c := range sess.Containers {
		wg.Go(func() {
			isLate := c.Endpoint == "" && late != nil
			if isLate {
				full, err := late.Wait(ctx)
				if err != nil {
					errs[i] = fmt.Errorf("%w: %w", errLateStart, err)
					cancel(errs[i])
					return
				}
				if j := slices.IndexFunc(full.Containers, func(ic bay.InstanceContainer) bool { return ic.Name == c.Name }); j >= 0 {
					c.Endpoint, c.ContainerID = full.Containers[j].Endpoint, full.Containers[j].ID
				}
				mu.Lock()
				sess.Containers[i].Endpoint, sess.Containers[i].ContainerID = c.Endpoint, c.ContainerID
				mu.Unlock()
			}
			ep := sess.AuthorizedURL(c.Endpoint)
			if errs[i] = s.waitReady(ctx, c.RuntimeType, ep); errs[i] != nil {
				return
			}
			// Read the runtime's description now, while it answers for sure: capability
			// calls check it from the cache instead of asking a runtime that may be busy.
			if rc, err := s.runtimes.For(c.RuntimeType); err == nil {
				_, _ = rc.Describe(ctx, ep)
			}
			mu.Lock()
			defer mu.Unlock()
			sess.Containers[i].Status = containerReady
			if publish != nil {
				publish(sess)
			}
			if late != nil && !isLate {
				if early--; early == 0 {
					late.Begin()
				}
			}
		})
	}
	wg.Wait()
	var names []string
	var first error
	for i, err := range errs {
		if err != nil {
			names = append(names, sess.Containers[i].Name)
			first = cmp.Or(first, err)
		}
	}
	if cause := context.Cause(ctx); errors.Is(cause, errLateStart) {
		first = cause // the cause, not the waits it ended
	}
	if first != nil && errors.Is(context.Cause(ctx), errStartCancelled) {
		first = fmt.Errorf("%w: %w", errStartCancelled, first)
	}
	return names, first
}

func errStoppedWhileStarting(sandboxID string) error {
	return bay.ErrNotReady("Sandbox was stopped while its session was starting", sandboxID, true)
}

// startAborted classifies a failure to persist start progress.
func (s *Service) startAborted(ctx context.Context, sandboxID string, sess *bay.Session, err error) error {
	if errors.Is(err, errSessionGone) || s.failSession(ctx, sess) {
		// The row is gone: a stop or delete (which also cancels this start) came first.
		return errStoppedWhileStarting(sandboxID)
	}
	return bay.Classify(err, "Failed to record session state")
}

// updateSession applies fn to the stored session in a Tx; a missing row is errSessionGone.
func (s *Service) updateSession(ctx context.Context, id string, fn func(*bay.Session)) error {
	return s.store.Tx(ctx, func(tx bay.Tx) error {
		cur, err := tx.GetSession(ctx, id)
		if err != nil {
			if bay.IsNotFound(err) {
				return errSessionGone
			}
			return err
		}
		fn(cur)
		return tx.UpdateSession(ctx, cur)
	})
}

// failSession destroys the session's instance on a detached context, then marks the session
// failed with no containers. The failed session stays current (the sandbox shows "failed")
// until the next EnsureRunning rebuilds it. It reports whether the session row was gone
// (stopped or deleted meanwhile): the failure is then a consequence of the stop.
func (s *Service) failSession(ctx context.Context, sess *bay.Session) (gone bool) {
	s.destroyInstance(ctx, sess)
	dctx, cancel := bay.Detached(ctx, 10*time.Second)
	defer cancel()
	err := s.updateSession(dctx, sess.ID, func(cur *bay.Session) {
		cur.ObservedState = bay.SessionFailed
		cur.Containers = nil
	})
	if errors.Is(err, errSessionGone) {
		return true
	}
	if err != nil {
		s.log.ErrorContext(ctx, "mark session failed", "session_id", sess.ID, "err", err)
	}
	return false
}

// destroyInstance destroys the session's instance on a detached, bounded context and forgets
// what is cached about it; errors are logged (orphan GC finds leftovers by label).
func (s *Service) destroyInstance(ctx context.Context, sess *bay.Session) {
	s.forget(sess)
	dctx, cancel := bay.Detached(ctx, s.cfg.StopTimeout)
	defer cancel()
	if err := s.driver.DestroyInstance(dctx, bay.InstanceName(sess.ID)); err != nil {
		s.log.ErrorContext(ctx, "destroy instance", "session_id", sess.ID, "err", err)
	}
}

// forget drops the caches about a session: its liveness probe and its runtimes' descriptions.
func (s *Service) forget(sess *bay.Session) {
	s.forgetProbe(sess.ID)
	for _, c := range sess.Containers {
		if rc, err := s.runtimes.For(c.RuntimeType); err == nil && c.Endpoint != "" {
			rc.ForgetEndpoint(c.Endpoint)
		}
	}
}

// waitReady polls ship's /health every 10 ms for the first 2 s (ship is usually healthy 30-60
// ms after the container started, and a coarser step showed up as whole-step delays in cold
// starts), then with a backoff doubling up to 250 ms, until it answers 200 or ReadinessTimeout
// passes.
func (s *Service) waitReady(ctx context.Context, runtimeType, endpoint string) error {
	rc, err := s.runtimes.For(runtimeType)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadinessTimeout)
	defer cancel()
	const (
		fastStep   = 10 * time.Millisecond
		fastPeriod = 2 * time.Second
		maxStep    = 250 * time.Millisecond
	)
	began := time.Now()
	delay := fastStep
	var last error
	for {
		hctx, hcancel := context.WithTimeout(ctx, shipclient.HealthTimeout)
		err := rc.Health(hctx, endpoint)
		hcancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, runtime.ErrForeign) {
			return fmt.Errorf("readiness wait for %s: %w", runtimeType, err)
		}
		last = err
		if time.Since(began) >= fastPeriod {
			delay = min(2*delay, maxStep)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("readiness wait for %s: %w (last: %v)", runtimeType, ctx.Err(), last)
		case <-t.C:
		}
	}
}

// ---- liveness probe ----

func (s *Service) probeFresh(sessionID string, now time.Time) bool {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	t, ok := s.probed[sessionID]
	return ok && now.Sub(t) < s.cfg.ProbeCacheTTL && !now.Before(t)
}

func (s *Service) markProbed(sessionID string, now time.Time) {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if len(s.probed) > 10000 {
		clear(s.probed)
	}
	s.probed[sessionID] = now
}

func (s *Service) forgetProbe(sessionID string) {
	s.probeMu.Lock()
	delete(s.probed, sessionID)
	s.probeMu.Unlock()
}

// probe inspects the session's instance: every container the session recorded must still be
// there and running (a dead sidecar makes the whole session dead, so it is rebuilt). A driver
// failure trusts the database (alive).
func (s *Service) probe(ctx context.Context, sess *bay.Session) (bool, error) {
	now := s.now()
	if s.probeFresh(sess.ID, now) {
		return true, nil
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	inst, err := s.driver.InspectInstance(pctx, bay.InstanceName(sess.ID))
	if err != nil {
		if bay.IsNotFound(err) {
			return false, nil
		}
		s.log.WarnContext(ctx, "liveness probe failed, trusting the database", "session_id", sess.ID, "err", err)
		return true, nil
	}
	for _, want := range sess.Containers {
		if sess.ObservedState != bay.SessionRunning && want.Status != containerReady {
			continue // still starting (a session published while its other containers start)
		}
		i := slices.IndexFunc(inst.Containers, func(c bay.InstanceContainer) bool { return c.Name == want.Name })
		if i < 0 || inst.Containers[i].State != bay.ContainerRunning {
			return false, nil
		}
	}
	s.markProbed(sess.ID, now)
	return true, nil
}

// RuntimeUnreachable is told that a call to a session's runtime could not connect: the next
// call re-probes the instance instead of trusting the cache.
func (s *Service) RuntimeUnreachable(sess *bay.Session, err error) {
	if errors.Is(err, runtime.ErrUnreachable) {
		s.forgetProbe(sess.ID)
	}
}

// Reprobe inspects the session's instance now, not trusting the probe cache, and reports
// whether every container of the session still runs (a driver failure trusts the database).
func (s *Service) Reprobe(ctx context.Context, sess *bay.Session) bool {
	s.forgetProbe(sess.ID)
	alive, _ := s.probe(ctx, sess)
	return alive
}

// WatchDeaths follows the platform's reports of dead runtime containers until ctx ends: a
// session whose container died is re-checked by the next call instead of being trusted for the
// rest of its probe cache (a call right after "docker kill" would otherwise meet a dead
// address). A failed event stream is watched again after a pause.
func (s *Service) WatchDeaths(ctx context.Context) error {
	for ctx.Err() == nil {
		err := s.driver.WatchDeaths(ctx, map[string]string{bay.LabelManaged: "true"}, func(instance string) {
			if id, ok := bay.SessionOfInstance(instance); ok {
				s.forgetProbe(id)
			}
		})
		if err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "watching runtime deaths failed; watching again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}
	return nil
}

// ---- destroy ----

// DiscardDead discards a session whose runtime was found dead or stuck: its instance is
// destroyed and its row deleted, so the next call starts a new one.
func (s *Service) DiscardDead(ctx context.Context, sandboxID string, sess *bay.Session) error {
	_, err := s.discardSession(ctx, sandboxID, sess, ReasonDead)
	return err
}

// discardSession destroys a session's instance and deletes its row, clearing
// current_session_id if it still points at it. It reports whether the row was still there.
func (s *Service) discardSession(ctx context.Context, sandboxID string, sess *bay.Session, reason bay.Reason) (bool, error) {
	s.destroyInstance(ctx, sess)
	existed := false
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		if _, err := tx.GetSession(ctx, sess.ID); err == nil {
			existed = true
		}
		if err := tx.DeleteSession(ctx, sess.ID); err != nil {
			return err
		}
		sb, err := tx.GetSandbox(ctx, sandboxID)
		if err != nil {
			return err
		}
		if sb.CurrentSessionID == sess.ID {
			sb.CurrentSessionID = ""
			return tx.UpdateSandbox(ctx, sb)
		}
		return nil
	})
	if err != nil {
		return false, bay.Classify(err, "Failed to discard session")
	}
	s.log.InfoContext(ctx, "session discarded", "sandbox_id", sandboxID, "session_id", sess.ID, "reason", string(reason))
	return existed, nil
}

// ReclaimCompute destroys every session of pin.SandboxID (rows and containers) and clears its
// current session and idle deadline, if pin.Holds for the sandbox re-read in the acting
// transaction (for bay.ReasonStaleStart the pinned session must also still be starting). It
// reports whether it acted; a sandbox that is gone or changed is (false, nil). The GC calls it.
func (s *Service) ReclaimCompute(ctx context.Context, pin bay.Pin) (bool, error) {
	acted, err := s.destroySessions(ctx, pin.SandboxID, func(tx bay.Tx, sb *bay.Sandbox) (bool, error) {
		if !pin.Holds(sb, s.now()) {
			return false, nil
		}
		if pin.Reason == bay.ReasonStaleStart {
			sess, err := tx.GetSession(ctx, pin.SessionID)
			if err != nil {
				if bay.IsNotFound(err) {
					return false, nil
				}
				return false, err
			}
			return sess.ObservedState == bay.SessionStarting, nil
		}
		return true, nil
	}, pin.Reason)
	if bay.IsNotFound(err) {
		return false, nil
	}
	return acted, err
}

// destroySessions implements stop and the reclaims: in one Tx, if check passes, delete every
// session row and clear current_session_id and idle_expires_at; then remove the containers.
func (s *Service) destroySessions(ctx context.Context, sandboxID string, check func(bay.Tx, *bay.Sandbox) (bool, error), reason bay.Reason) (bool, error) {
	var sessions []*bay.Session
	acted := false
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		sb, err := tx.GetSandbox(ctx, sandboxID)
		if err != nil {
			return err
		}
		if check != nil {
			ok, err := check(tx, sb)
			if err != nil || !ok {
				return err
			}
		}
		acted = true
		sessions, err = tx.ListSessions(ctx, bay.SessionQuery{SandboxID: sandboxID})
		if err != nil {
			return err
		}
		for _, ss := range sessions {
			if err := tx.DeleteSession(ctx, ss.ID); err != nil {
				return err
			}
		}
		if sb.CurrentSessionID != "" || sb.IdleExpiresAt != nil {
			sb.CurrentSessionID = ""
			sb.IdleExpiresAt = nil
			return tx.UpdateSandbox(ctx, sb)
		}
		return nil
	})
	if err != nil {
		if bay.IsNotFound(err) {
			return false, bay.ErrSandboxNotFound(sandboxID)
		}
		return false, bay.Classify(err, "Failed to stop sessions")
	}
	if !acted {
		return false, nil
	}
	s.cancelStart(sandboxID)
	s.removeSandboxInstances(ctx, sandboxID, sessions)
	if len(sessions) > 0 {
		s.log.InfoContext(ctx, "sessions destroyed", "sandbox_id", sandboxID, "sessions", len(sessions), "reason", string(reason))
	}
	return true, nil
}

// removeSandboxInstances destroys, in parallel and within StopTimeout, the instances of the
// given sessions and any other instance labelled with the sandbox id (one being created by a
// concurrent start). It reports whether every destruction is known to have finished.
func (s *Service) removeSandboxInstances(ctx context.Context, sandboxID string, sessions []*bay.Session) (done bool) {
	dctx, cancel := bay.Detached(ctx, s.cfg.StopTimeout)
	defer cancel()
	names := map[string]bool{}
	for _, ss := range sessions {
		s.forget(ss)
		names[bay.InstanceName(ss.ID)] = true
	}
	done = true
	if list, err := s.driver.ListInstances(dctx, map[string]string{bay.LabelSandboxID: sandboxID}); err == nil {
		for _, i := range list {
			names[i.Name] = true
		}
	} else {
		s.log.WarnContext(ctx, "list sandbox instances", "sandbox_id", sandboxID, "err", err)
		done = false
	}
	var failed atomic.Bool
	var wg sync.WaitGroup
	for name := range names {
		wg.Go(func() {
			if err := s.driver.DestroyInstance(dctx, name); err != nil {
				failed.Store(true)
				s.log.ErrorContext(ctx, "destroy instance", "sandbox_id", sandboxID, "instance", name, "err", err)
			}
		})
	}
	wg.Wait()
	return done && !failed.Load()
}

// ---- instance spec ----

// instanceSpec builds the session's instance: one container per profile container, the
// primary first, each with the profile's and its own environment, the proxy settings, the
// session's runtime token, and the labels orphan GC relies on (the real owner and bay's
// creation time among them). BAY_PROFILE_ENV is not passed: ship hands its own environment on
// to the shell and the kernel.
func (s *Service) instanceSpec(sb *bay.Sandbox, prof *bay.Profile, sess *bay.Session, volumeRef string) bay.InstanceSpec {
	var mounts []bay.Mount
	if s.cfg.SkillsRoot != "" {
		for _, name := range prof.Skills {
			mounts = append(mounts, bay.Mount{Source: filepath.Join(s.cfg.SkillsRoot, name), Target: "/skills/" + name, ReadOnly: true})
		}
	}
	spec := bay.InstanceSpec{
		Name: bay.InstanceName(sess.ID),
		Labels: bay.WithDeployment(map[string]string{
			bay.LabelOwner:      sb.Owner,
			bay.LabelSandboxID:  sb.ID,
			bay.LabelSessionID:  sess.ID,
			bay.LabelCargoID:    sb.CargoID,
			bay.LabelProfileID:  prof.ID,
			bay.LabelInstanceID: s.cfg.InstanceID,
			bay.LabelManaged:    "true",
			bay.LabelCreatedAt:  s.now().Format(time.RFC3339),
		}, s.cfg.Deployment),
		VolumeRef: volumeRef,
		MountPath: shipapi.DefaultWorkspace,
		Network:   effectiveNetwork(sb, prof),
		Runtime:   prof.Runtime,
		// The containers that start first serve calls while the others start (startSession),
		// and those start only once the first are ready (waitAllReady calls Late.Begin): a
		// start beside Chromium's launch slowed both on two cores. The hold cannot outlast the
		// first runtimes' readiness wait, after which the session fails and ends the start.
		LateStart:     true,
		LateStartHold: s.cfg.ReadinessTimeout,
	}
	primary := prof.Primary()
	order := []*bay.ContainerProfile{primary}
	for i := range prof.Containers {
		if &prof.Containers[i] != primary {
			order = append(order, &prof.Containers[i])
		}
	}
	profileKeys := slices.Sorted(maps.Keys(prof.Env))
	for _, c := range order {
		env := config.ContainerEnv(prof, c)
		if sess.RuntimeToken != "" {
			// Each runtime reads the token from its own variable: a container never holds
			// another runtime's (ship hides SHIP_AUTH_TOKEN from user code, not GULL_AUTH_TOKEN).
			if name, ok := tokenEnv[cmp.Or(c.RuntimeType, bay.RuntimeShip)]; ok {
				env[name] = sess.RuntimeToken
			}
		}
		env["BAY_SESSION_ID"] = sess.ID
		env["BAY_SANDBOX_ID"] = sb.ID
		env["BAY_WORKSPACE_PATH"] = shipapi.DefaultWorkspace
		env["BAY_CONTAINER_NAME"] = c.Name
		if len(profileKeys) > 0 {
			env[EnvProfileEnvKeys] = strings.Join(profileKeys, ",")
		}
		seccomp := bay.SeccompDefault
		if c.ChromiumSandbox {
			seccomp = bay.SeccompUserNamespaces
			env[gullapi.EnvChromiumSandbox] = "1"
		}
		port := c.RuntimePort
		if port == 0 {
			port = shipapi.DefaultPort
		}
		if name, ok := portEnv[cmp.Or(c.RuntimeType, bay.RuntimeShip)]; ok {
			// The runtime listens where bay reaches it, also when a profile pairs two
			// runtimes of one type (they share the sandbox's network namespace).
			env[name] = strconv.Itoa(port)
		}
		spec.Containers = append(spec.Containers, bay.ContainerSpec{
			Name:        c.Name,
			RuntimeType: cmp.Or(c.RuntimeType, bay.RuntimeShip),
			Image:       s.cfg.ImageBuilds.Image(c.Image),
			Env:         env,
			Port:        port,
			Limits: bay.Limits{
				NanoCPUs:    int64(c.Resources.CPUs * 1e9),
				MemoryBytes: c.Resources.MemoryBytes,
				PidsLimit:   prof.PidsLimit,
				TmpBytes:    prof.TmpBytes,
			},
			User:    s.cfg.User,
			Mounts:  mounts,
			Seccomp: seccomp,
			// Chromium is the slowest of the runtimes to become ready (0.5-1 s against
			// ship's tens of milliseconds): its container starts before the others.
			StartFirst: c.RuntimeType == bay.RuntimeGull,
		})
	}
	return spec
}

// tokenEnv is the variable each runtime type reads its token from.
var tokenEnv = map[string]string{bay.RuntimeShip: shipapi.EnvAuthToken, bay.RuntimeGull: gullapi.EnvAuthToken}

// portEnv is the variable each runtime type reads its port from.
var portEnv = map[string]string{bay.RuntimeShip: shipapi.EnvPort, bay.RuntimeGull: gullapi.EnvPort}

// EnvProfileEnvKeys lists (comma-separated) the keys of the profile's environment, so that the
// runtime can write them to /workspace/.bay_env.sh for tools that read them from a login shell.
const EnvProfileEnvKeys = "SHIP_PROFILE_ENV_KEYS"
