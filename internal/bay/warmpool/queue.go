package warmpool

import (
	"context"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Enqueue queues a warm sandbox for warm-up and reports whether it was queued: it is started
// and then made available. A sandbox claimed by the time a worker picks it up is skipped. A
// sandbox already queued or being warmed is not queued twice; a full queue drops per
// DropPolicy. It never blocks.
func (p *Pool) Enqueue(sandboxID string) bool {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	if p.stopped || p.queued[sandboxID] {
		return false
	}
	if len(p.queue) >= p.cfg.QueueSize {
		p.dropped++
		if p.cfg.DropPolicy != DropOldest {
			p.log.Warn("warm-up queue full, dropping the new warm-up", "sandbox_id", sandboxID, "dropped_total", p.dropped)
			return false
		}
		old := p.queue[0]
		p.queue = p.queue[1:]
		delete(p.queued, old)
		p.log.Warn("warm-up queue full, dropping the oldest warm-up", "sandbox_id", old, "dropped_total", p.dropped)
	}
	p.queue = append(p.queue, sandboxID)
	p.queued[sandboxID] = true
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return true
}

// QueueLen returns the number of queued warm-ups (not counting those being warmed).
func (p *Pool) QueueLen() int {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	return len(p.queue)
}

// retryAt queues sandboxID again after d (a backoff), unless the pool stops first.
func (p *Pool) retryAt(sandboxID string, d time.Duration) {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	if p.stopped {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		p.qmu.Lock()
		delete(p.timers, t)
		p.qmu.Unlock()
		p.Enqueue(sandboxID)
	})
	p.timers[t] = struct{}{}
}

func (p *Pool) next(ctx context.Context) (string, bool) {
	for {
		p.qmu.Lock()
		if len(p.queue) > 0 {
			id := p.queue[0]
			p.queue = p.queue[1:]
			more := len(p.queue) > 0
			p.qmu.Unlock()
			if more { // let another worker pick the next one
				select {
				case p.wake <- struct{}{}:
				default:
				}
			}
			return id, true
		}
		p.qmu.Unlock()
		select {
		case <-ctx.Done():
			return "", false
		case <-p.wake:
		}
	}
}

func (p *Pool) worker(ctx context.Context) {
	defer p.wg.Done()
	for {
		id, ok := p.next(ctx)
		if !ok {
			return
		}
		p.warm(ctx, id)
		p.qmu.Lock()
		delete(p.queued, id)
		p.qmu.Unlock()
	}
}

// warm performs one warm-up.
func (p *Pool) warm(ctx context.Context, id string) {
	cctx, cancel := p.call(ctx)
	sb, err := p.store.GetSandbox(cctx, id)
	cancel()
	if err != nil {
		if !bay.IsNotFound(err) {
			p.log.WarnContext(ctx, "warm-up: load sandbox", "sandbox_id", id, "err", err)
		}
		return
	}
	if sb.DeletedAt != nil {
		return
	}
	if !sb.IsWarm {
		return // claimed meanwhile: its first call starts it
	}
	pc, ok := p.profiles[sb.ProfileID]
	if !ok || sb.WarmState != bay.WarmPending {
		return
	}
	now := p.now()
	if sb.WarmNextAttemptAt != nil && now.Before(*sb.WarmNextAttemptAt) {
		p.retryAt(id, sb.WarmNextAttemptAt.Sub(now))
		return
	}

	wctx, wcancel := context.WithTimeout(ctx, p.cfg.WarmupTimeout)
	sess, err := p.lc.EnsureRunning(wctx, id)
	if err == nil && p.cfg.Prime != nil {
		err = p.cfg.Prime(wctx, sess)
	}
	wcancel()
	if ctx.Err() != nil {
		return // shutting down: the next run retries it
	}
	if err == nil {
		p.ready(ctx, sb, pc)
		return
	}
	p.failed(ctx, sb, pc, err)
}

// ready makes a warmed sandbox available (if nobody changed its warm state meanwhile).
func (p *Pool) ready(ctx context.Context, sb *bay.Sandbox, pc ProfileConfig) {
	made := false
	err := p.update(ctx, sb.ID, func(cur *bay.Sandbox) bool {
		if !cur.IsWarm || cur.WarmState != bay.WarmPending {
			return false
		}
		now := p.now()
		rotate := now.Add(pc.RotateTTL)
		cur.WarmState = bay.WarmAvailable
		cur.WarmReadyAt, cur.WarmRotateAt = &now, &rotate
		cur.WarmAttempts, cur.WarmNextAttemptAt = 0, nil
		made = true
		return true
	})
	switch {
	case err != nil:
		// The next maintenance pass sees it pending and warms it again (a no-op start).
		p.log.WarnContext(ctx, "warm-up: mark available", "sandbox_id", sb.ID, "err", err)
	case made:
		p.log.InfoContext(ctx, "warm sandbox available", "sandbox_id", sb.ID, "profile", sb.ProfileID)
	}
}

// failed records a failed warm-up: backoff, or after MaxAttempts deletion (the next pass
// creates a replacement).
func (p *Pool) failed(ctx context.Context, sb *bay.Sandbox, pc ProfileConfig, cause error) {
	var attempts int
	var next time.Duration
	var updated *bay.Sandbox
	err := p.update(ctx, sb.ID, func(cur *bay.Sandbox) bool {
		if !cur.IsWarm || cur.WarmState != bay.WarmPending {
			return false
		}
		cur.WarmAttempts++
		attempts = cur.WarmAttempts
		next = pc.Backoff(attempts)
		t := p.now().Add(next)
		cur.WarmNextAttemptAt = &t
		updated = cur // UpdateSandbox sets its new version
		return true
	})
	if err != nil {
		p.log.WarnContext(ctx, "warm-up: record failure", "sandbox_id", sb.ID, "err", err)
		return
	}
	if attempts == 0 {
		return // claimed, retired or deleted meanwhile
	}
	if attempts >= pc.MaxAttempts {
		p.log.WarnContext(ctx, "warm-up failed too often, replacing the warm sandbox", "sandbox_id", sb.ID,
			"attempts", attempts, "err", cause)
		p.reclaim(ctx, bay.Pin{SandboxID: sb.ID, Version: updated.Version, Reason: bay.ReasonWarmupFailed})
		return
	}
	p.log.InfoContext(ctx, "warm-up failed, retrying", "sandbox_id", sb.ID, "attempts", attempts, "retry_in", next, "err", cause)
	p.retryAt(sb.ID, next)
}
