package capability

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/runtime"
)

// How a capability call notices a runtime that stopped answering while the call waits on it
// (a frozen process answers nothing, so only a deadline would end the call): after
// Config.WatchdogDelay the runtime's health is checked every Config.WatchdogEvery, each check
// bounded by that period, and watchdogMisses failures in a row end the call. A runtime busy
// running user code still answers its health checks; a stopped one misses them all, so with
// the defaults (2 s, 2 s) the call ends about 8 s after the freeze instead of at its own
// timeout.
const watchdogMisses = 3

// errRuntimeFrozen ends a call whose runtime stopped answering its health checks.
var errRuntimeFrozen = errors.New("the runtime stopped answering its health checks")

// callOpts say how a capability call may be recovered.
type callOpts struct {
	// resend: the call may be sent again to a replacement runtime when it never reached the
	// first one (a stream already consumed may not).
	resend bool
	// watch: the call is watched for a runtime that freezes (not for calls whose result is a
	// stream that outlives the call).
	watch bool
}

// invoke resolves the runtime serving capability and runs call against its authorized
// endpoint. It makes runtime faults heal within the call:
//
//   - a runtime that is gone (its container killed or dead) is found out at once: the session is
//     discarded and, when the request never reached the runtime and opts.resend allows, sent
//     again to a freshly started session, so the caller gets its answer;
//   - a runtime that stops answering (frozen) ends the call after the watchdog's misses, and
//     its session is discarded so that the next call gets a new one;
//   - otherwise the answer is 503 session_not_ready with retry_after_ms, at once: the call may
//     have run in part, so it is not repeated behind the caller's back.
//
// Errors that the runtime answered (4xx, its own failures) are returned unchanged.
func (s *Service) invoke(ctx context.Context, owner, id, capability string, opts callOpts,
	call func(ctx context.Context, ep string) error) (*bay.Sandbox, *bay.Session, error) {
	for attempt := 0; ; attempt++ {
		sb, sess, c, ep, err := s.target(ctx, owner, id, capability)
		if err != nil {
			return nil, nil, err
		}
		if opts.watch {
			err = s.watched(ctx, c, ep, call)
		} else {
			err = call(ctx, ep)
		}
		if err == nil || !s.runtimeFault(ctx, sess, c, ep, err) {
			return sb, sess, err
		}
		s.log.WarnContext(ctx, "runtime fault during a call; replacing the session", "sandbox_id", sb.ID, "session_id", sess.ID,
			"container", c.Name, "err", err)
		if derr := s.lc.DiscardDead(ctx, sb.ID, sess); derr != nil {
			return nil, nil, derr
		}
		if attempt == 0 && opts.resend && errors.Is(err, runtime.ErrNotSent) && ctx.Err() == nil {
			continue
		}
		e := bay.ErrNotReady("The sandbox's runtime failed during the call and is being replaced; retry", sb.ID, true)
		e.Err = err
		return nil, nil, e
	}
}

// runtimeFault reports whether err means the runtime behind the call is gone or stuck, as
// opposed to an answer of the runtime or the caller giving up.
func (s *Service) runtimeFault(ctx context.Context, sess *bay.Session, c *bay.SessionContainer, ep string, err error) bool {
	if ctx.Err() != nil {
		return false // the caller left; that says nothing about the runtime
	}
	if errors.Is(err, errRuntimeFrozen) {
		return true
	}
	unreachable := errors.Is(err, runtime.ErrUnreachable)
	if !unreachable && bay.ErrorCode(err) != bay.CodeTimeout {
		return false
	}
	if !s.lc.Reprobe(ctx, sess) {
		return true
	}
	// The container runs: is the runtime in it answering?
	rc, rerr := s.lc.Runtime(c.RuntimeType)
	if rerr != nil {
		return false
	}
	hctx, cancel := context.WithTimeout(ctx, s.cfg.WatchdogEvery)
	defer cancel()
	return rc.Health(hctx, ep) != nil
}

// watched runs call while a watchdog checks the runtime's health; a runtime that misses
// watchdogMisses checks in a row cancels the call, which then fails with errRuntimeFrozen.
func (s *Service) watched(ctx context.Context, c *bay.SessionContainer, ep string, call func(context.Context, string) error) error {
	rc, err := s.lc.Runtime(c.RuntimeType)
	if err != nil {
		return call(ctx, ep)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	defer close(done)
	go func() {
		every := s.cfg.WatchdogEvery
		t := time.NewTimer(s.cfg.WatchdogDelay)
		defer t.Stop()
		misses := 0
		for {
			select {
			case <-done:
				return
			case <-wctx.Done():
				return
			case <-t.C:
			}
			began := time.Now()
			hctx, hcancel := context.WithTimeout(wctx, every)
			herr := rc.Health(hctx, ep)
			hcancel()
			if herr == nil {
				misses = 0
			} else if misses++; misses >= watchdogMisses {
				cancel(fmt.Errorf("%w (%d checks, last: %v)", errRuntimeFrozen, misses, herr))
				return
			}
			// Checks start every watchdogEvery, however long the last one took.
			t.Reset(max(0, every-time.Since(began)))
		}
	}()
	err = call(wctx, ep)
	if cause := context.Cause(wctx); errors.Is(cause, errRuntimeFrozen) {
		return cause
	}
	return err
}
