package sandbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
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
// no longer configured), capability_not_supported (multi-container profile), session_not_ready
// (503: another instance is starting it; readiness timeout "Runtime failed to become ready";
// stopped while starting), internal_error (engine failure; the session is left "failed" with no
// container).
func (s *Service) EnsureRunning(ctx context.Context, sandboxID string) (*bay.Session, error) {
	sb, err := s.store.GetSandbox(ctx, sandboxID)
	if err != nil {
		if bay.IsNotFound(err) {
			return nil, notFoundSandbox(sandboxID)
		}
		return nil, internal("Failed to load sandbox", err)
	}
	return s.ensureRunning(ctx, sb)
}

// ensureRunning is EnsureRunning for a sandbox row the caller has just read (capability calls
// read it to check the owner: one read less per call). The slow path re-reads it.
func (s *Service) ensureRunning(ctx context.Context, sb *bay.Sandbox) (*bay.Session, error) {
	sandboxID := sb.ID
	if sb.DeletedAt != nil {
		return nil, notFoundSandbox(sandboxID)
	}
	now := s.now()
	if sb.Expired(now) {
		return nil, expiredErr(sb)
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
	sess, err := s.starts.do(ctx, sandboxID, func() (*bay.Session, error) {
		// Detached: the start finishes (or cleans up) even if every waiting caller leaves.
		cctx, cancel := detached(ctx, s.cfg.ReadinessTimeout+2*time.Minute)
		defer cancel()
		return s.ensureSlow(cctx, sandboxID)
	})
	if err != nil {
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
			return notFoundSandbox(sandboxID)
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
			return notFoundSandbox(sandboxID)
		}
		return classify(err, "Failed to refresh sandbox activity")
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

// ensureSlow runs under the per-sandbox single flight.
func (s *Service) ensureSlow(ctx context.Context, id string) (*bay.Session, error) {
	for attempt := 0; attempt < 5; attempt++ {
		sb, err := s.store.GetSandbox(ctx, id)
		if err != nil {
			if bay.IsNotFound(err) {
				return nil, notFoundSandbox(id)
			}
			return nil, internal("Failed to load sandbox", err)
		}
		if sb.DeletedAt != nil {
			return nil, notFoundSandbox(id)
		}
		now := s.now()
		if sb.Expired(now) {
			return nil, expiredErr(sb)
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
				s.log.Info("runtime container is gone, rebuilding the session", "sandbox_id", id, "session_id", cur.ID)
				if _, err := s.discardSession(ctx, id, cur, ReasonDead); err != nil {
					return nil, err
				}
				continue
			case cur.ObservedState == bay.SessionStarting || cur.ObservedState == bay.SessionPending:
				// A start by an earlier incarnation of this bay will never finish: rebuild it now
				// rather than wait for restart recovery, which runs beside the listener.
				if cur.InstanceID != s.bootID && !cur.FromEarlierBoot(s.cfg.InstanceID, s.bootID) && !s.staleStart(cur, now) {
					// Another bay on this database is starting it.
					return nil, notReady("Session is starting", id, true)
				}
				s.log.Warn("discarding a stale starting session", "sandbox_id", id, "session_id", cur.ID, "instance", cur.InstanceID)
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
		return s.startSession(ctx, sb, prof, sess)
	}
	return nil, notReady("Session state is changing, retry", id, true)
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
			return notFoundSandbox(id)
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
			RuntimeType:   prof.Primary().RuntimeType,
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
			return nil, notFoundSandbox(id)
		}
		return nil, classify(err, "Failed to create session")
	}
	return sess, nil
}

// startSession creates and starts the container of a starting session and waits for ship.
// Any failure removes the container (detached context) and marks the session failed.
func (s *Service) startSession(ctx context.Context, sb *bay.Sandbox, prof *bay.Profile, sess *bay.Session) (*bay.Session, error) {
	log := s.log.With("sandbox_id", sb.ID, "session_id", sess.ID)
	began := time.Now()
	cargo, err := s.store.GetCargo(ctx, sb.CargoID)
	if err != nil {
		s.failSession(ctx, sess, "")
		if bay.IsNotFound(err) {
			return nil, notFoundCargo(sb.CargoID)
		}
		return nil, internal("Failed to load cargo", err)
	}
	ref, err := s.ensureVolume(ctx, cargo)
	if err != nil {
		if s.failSession(ctx, sess, "") {
			return nil, errStoppedWhileStarting(sb.ID)
		}
		return nil, err
	}
	if prof.MultiContainer() {
		return s.startMulti(ctx, sb, prof, sess, ref)
	}
	spec := s.containerSpec(sb, prof, prof.Primary(), sess, ref)
	cid, err := s.driver.CreateContainer(ctx, spec)
	if err != nil {
		if s.failSession(ctx, sess, cid) {
			return nil, errStoppedWhileStarting(sb.ID)
		}
		log.Error("create runtime container failed", "err", err)
		return nil, internal("Failed to create the runtime container", fmt.Errorf("create container %s: %w", spec.Name, err))
	}
	if err := s.updateSession(ctx, sess.ID, func(cur *bay.Session) { cur.ContainerID = cid }); err != nil {
		s.removeContainer(ctx, cid)
		return nil, s.startAborted(ctx, sb.ID, sess, err)
	}
	sess.ContainerID = cid
	endpoint, err := s.driver.StartContainer(ctx, cid)
	if err != nil {
		if s.failSession(ctx, sess, cid) {
			return nil, errStoppedWhileStarting(sb.ID)
		}
		log.Error("start runtime container failed", "err", err)
		return nil, internal("Failed to start the runtime container", fmt.Errorf("start container %s: %w", cid, err))
	}
	if err := s.waitReady(ctx, endpoint); err != nil {
		if s.failSession(ctx, sess, cid) {
			return nil, errStoppedWhileStarting(sb.ID)
		}
		log.Warn("runtime failed to become ready", "endpoint", endpoint, "err", err)
		e := notReady("Runtime failed to become ready", sb.ID, true)
		e.Err = err
		return nil, e
	}
	now := s.now()
	err = s.updateSession(ctx, sess.ID, func(cur *bay.Session) {
		cur.Endpoint = endpoint
		cur.ObservedState = bay.SessionRunning
		cur.LastObservedAt = &now
	})
	if err != nil {
		s.removeContainer(ctx, cid)
		return nil, s.startAborted(ctx, sb.ID, sess, err)
	}
	sess.Endpoint, sess.ObservedState, sess.LastObservedAt = endpoint, bay.SessionRunning, &now
	s.markProbed(sess.ID, now)
	log.Info("session ready", "container_id", cid, "endpoint", endpoint, "startup_ms", time.Since(began).Milliseconds())
	return sess, nil
}

func errStoppedWhileStarting(sandboxID string) error {
	return notReady("Sandbox was stopped while its session was starting", sandboxID, true)
}

// startAborted classifies a failure to persist start progress.
func (s *Service) startAborted(ctx context.Context, sandboxID string, sess *bay.Session, err error) error {
	if errors.Is(err, errSessionGone) {
		return errStoppedWhileStarting(sandboxID)
	}
	s.failSession(ctx, sess, "")
	return classify(err, "Failed to record session state")
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

// failSession removes the container (if any) on a detached context, then marks the session
// failed with no container and no endpoint. The failed session stays current (the sandbox
// shows "failed") until the next EnsureRunning rebuilds it. It reports whether the session
// row was gone (stopped or deleted meanwhile): the failure is then a consequence of the stop.
func (s *Service) failSession(ctx context.Context, sess *bay.Session, containerID string) (gone bool) {
	if containerID != "" {
		s.removeContainer(ctx, containerID)
	}
	dctx, cancel := detached(ctx, 10*time.Second)
	defer cancel()
	err := s.updateSession(dctx, sess.ID, func(cur *bay.Session) {
		cur.ObservedState = bay.SessionFailed
		cur.ContainerID = ""
		cur.Endpoint = ""
		cur.Containers = nil
	})
	if errors.Is(err, errSessionGone) {
		return true
	}
	if err != nil {
		s.log.Error("mark session failed", "session_id", sess.ID, "err", err)
	}
	return false
}

// removeContainer force-removes a container on a detached, bounded context; errors are logged
// (orphan GC finds leftovers by label).
func (s *Service) removeContainer(ctx context.Context, id string) {
	if id == "" {
		return
	}
	dctx, cancel := detached(ctx, s.cfg.StopTimeout)
	defer cancel()
	if err := s.driver.RemoveContainer(dctx, id); err != nil {
		s.log.Error("remove container", "container_id", id, "err", err)
	}
}

// waitReady polls ship's /health every 10 ms for the first 2 s (ship is usually healthy 30-60
// ms after the container started, and a coarser step showed up as whole-step delays in cold
// starts), then with a backoff doubling up to 250 ms, until it answers 200 or ReadinessTimeout
// passes.
func (s *Service) waitReady(ctx context.Context, endpoint string) error {
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
		err := s.healthCheck(hctx, endpoint)
		hcancel()
		if err == nil {
			return nil
		}
		last = err
		if time.Since(began) >= fastPeriod {
			delay = min(2*delay, maxStep)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("readiness wait for %s: %w (last: %v)", endpoint, ctx.Err(), last)
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

// probe inspects the session's containers: every one of them must be running (a dead
// sidecar makes the whole session dead, so it is rebuilt). A driver failure trusts the
// database (alive).
func (s *Service) probe(ctx context.Context, sess *bay.Session) (bool, error) {
	now := s.now()
	if s.probeFresh(sess.ID, now) {
		return true, nil
	}
	ids := []string{sess.ContainerID}
	if len(sess.Containers) > 0 {
		ids = ids[:0]
		for _, c := range sess.Containers {
			ids = append(ids, c.ContainerID)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, id := range ids {
		if id == "" {
			return false, nil
		}
		info, err := s.driver.InspectContainer(pctx, id)
		if err != nil {
			if bay.IsNotFound(err) {
				return false, nil
			}
			s.log.Warn("liveness probe failed, trusting the database", "session_id", sess.ID, "err", err)
			return true, nil
		}
		if info.State != bay.ContainerRunning {
			return false, nil
		}
	}
	s.markProbed(sess.ID, now)
	return true, nil
}

// runtimeUnreachable is called when a call to ship could not connect: the next capability call
// re-probes the container instead of trusting the cache.
func (s *Service) runtimeUnreachable(sess *bay.Session, err error) {
	if errors.Is(err, shipclient.ErrUnreachable) {
		s.forgetProbe(sess.ID)
	}
}

// ---- destroy ----

// discardSession removes a session's container and row, clearing current_session_id if it
// still points at it. It reports whether the row was still there.
func (s *Service) discardSession(ctx context.Context, sandboxID string, sess *bay.Session, reason bay.Reason) (bool, error) {
	s.removeSessionResources(ctx, sess)
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
		return false, classify(err, "Failed to discard session")
	}
	s.log.Info("session discarded", "sandbox_id", sandboxID, "session_id", sess.ID, "reason", string(reason))
	return existed, nil
}

// DestroySessions removes every session (rows and containers) of a sandbox and clears
// current_session_id and idle_expires_at, but only if the sandbox's current session is still
// pinnedSessionID (GC actions are pinned to the session they were decided on; pass "" to
// require that the sandbox has no current session). It reports whether it acted; a changed
// session is not an error (false, nil). A missing sandbox is not_found.
func (s *Service) DestroySessions(ctx context.Context, sandboxID, pinnedSessionID string, reason bay.Reason) (bool, error) {
	return s.destroySessions(ctx, sandboxID, func(_ bay.Tx, sb *bay.Sandbox) (bool, error) {
		return sb.DeletedAt == nil && sb.CurrentSessionID == pinnedSessionID, nil
	}, reason)
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
			return false, notFoundSandbox(sandboxID)
		}
		return false, classify(err, "Failed to stop sessions")
	}
	if !acted {
		return false, nil
	}
	s.removeSandboxContainers(ctx, sandboxID, sessions)
	if len(sessions) > 0 {
		s.log.Info("sessions destroyed", "sandbox_id", sandboxID, "sessions", len(sessions), "reason", string(reason))
	}
	return true, nil
}

// removeSandboxContainers removes, in parallel and within StopTimeout, the containers of the
// given sessions and any other container labelled with the sandbox id (one being created by a
// concurrent start). It reports whether every removal is known to have finished.
func (s *Service) removeSandboxContainers(ctx context.Context, sandboxID string, sessions []*bay.Session) (done bool) {
	dctx, cancel := detached(ctx, s.cfg.StopTimeout)
	defer cancel()
	ids := map[string]bool{}
	for _, ss := range sessions {
		s.forgetProbe(ss.ID)
		if ss.Endpoint != "" {
			s.ship.ForgetEndpoint(ss.Endpoint)
		}
		if ss.ContainerID != "" {
			ids[ss.ContainerID] = true
		}
		for _, c := range ss.Containers {
			if c.ContainerID != "" {
				ids[c.ContainerID] = true
			}
		}
	}
	done = true
	if list, err := s.driver.ListContainers(dctx, map[string]string{bay.LabelSandboxID: sandboxID}); err == nil {
		for _, c := range list {
			ids[c.ID] = true
		}
	} else {
		s.log.Warn("list sandbox containers", "sandbox_id", sandboxID, "err", err)
		done = false
	}
	var failed atomic.Bool
	var wg sync.WaitGroup
	for id := range ids {
		wg.Go(func() {
			if err := s.driver.RemoveContainer(dctx, id); err != nil {
				failed.Store(true)
				s.log.Error("remove container", "sandbox_id", sandboxID, "container_id", id, "err", err)
			}
		})
	}
	wg.Wait()
	for _, ss := range sessions {
		if len(ss.Containers) > 0 {
			s.removeNetwork(dctx, networkName(ss.ID))
		}
	}
	return done && !failed.Load()
}

// ---- container spec ----

// containerSpec builds the primary container of a session (contract 6.7, with the real owner,
// our bay.created_at label, a non-root user and no BAY_PROFILE_ENV: ship passes its own
// environment on to the shell and the kernel).
func (s *Service) containerSpec(sb *bay.Sandbox, prof *bay.Profile, c *bay.ContainerProfile, sess *bay.Session, volumeRef string) bay.ContainerSpec {
	env := map[string]string{}
	maps.Copy(env, prof.Env)
	maps.Copy(env, c.Env)
	maps.Copy(env, config.ProxyEnv(cmp.Or(c.Proxy, prof.Proxy, s.cfg.Proxy)))
	if sess.RuntimeToken != "" {
		env[shipapi.EnvAuthToken] = sess.RuntimeToken
	}
	env["BAY_SESSION_ID"] = sess.ID
	env["BAY_SANDBOX_ID"] = sb.ID
	env["BAY_WORKSPACE_PATH"] = shipapi.DefaultWorkspace

	port := c.RuntimePort
	if port == 0 {
		port = shipapi.DefaultPort
	}
	var mounts []bay.Mount
	if s.cfg.SkillsRoot != "" {
		for _, name := range prof.Skills {
			mounts = append(mounts, bay.Mount{Source: filepath.Join(s.cfg.SkillsRoot, name), Target: "/skills/" + name, ReadOnly: true})
		}
	}
	return bay.ContainerSpec{
		Name:     bay.ContainerName(sess.ID),
		Image:    c.Image,
		Hostname: "sandbox",
		Env:      env,
		Labels: map[string]string{
			bay.LabelOwner:       sb.Owner,
			bay.LabelSandboxID:   sb.ID,
			bay.LabelSessionID:   sess.ID,
			bay.LabelCargoID:     sb.CargoID,
			bay.LabelProfileID:   prof.ID,
			bay.LabelRuntimePort: strconv.Itoa(port),
			bay.LabelInstanceID:  s.cfg.InstanceID,
			bay.LabelManaged:     "true",
			bay.LabelCreatedAt:   s.now().Format(time.RFC3339),
		},
		VolumeRef:   volumeRef,
		MountPath:   shipapi.DefaultWorkspace,
		Mounts:      mounts,
		RuntimePort: port,
		NanoCPUs:    int64(c.Resources.CPUs * 1e9),
		MemoryBytes: c.Resources.MemoryBytes,
		PidsLimit:   prof.PidsLimit,
		User:        s.cfg.User,
	}
}
