// Package warmpool keeps pre-started ("warm") sandboxes per profile so that a create without a
// cargo gets a running sandbox at once. Unlike the reference's pool, a claimed sandbox gets a
// fresh idle deadline, a failed warm-up never holds a slot for ever, and a bay only ever
// removes its own warm sandboxes.
//
// For every profile with a pool size > 0 the pool keeps that many warm sandboxes (owner
// "warm-pool", IsWarm, managed cargo, no TTL) either warming up (WarmState "") or available.
// A maintenance pass, every Interval and right after each claim, per profile and under the
// lease "warm:<profile>" (so two bays sharing a database never fill the same deficit twice):
//
//  1. reconciles available ones: a warm sandbox whose container died goes back to warming;
//  2. rotates available ones older than RotateTTL (retiring, then deleted);
//  3. re-queues warming ones whose backoff elapsed, adopting those of a bay that died;
//  4. creates the deficit and queues each for warm-up;
//  5. deletes retiring ones, and retires the surplus when the size shrank.
//
// Warm-ups run on a bounded queue with a fixed number of workers. A failed warm-up is retried
// with exponential backoff (WarmAttempts, WarmNextAttemptAt); after MaxAttempts failures the
// sandbox is deleted and replaced by the next pass, so a broken one never holds a slot for ever.
//
// Claims are done by the lifecycle service in its create transaction (Tx.ClaimWarmSandbox, a
// fresh idle deadline, the caller's TTL); the pool implements the service's WarmClaimer
// (WarmPoolEnabled, Claimed) and refills after every claim. Warm sandboxes are invisible to
// list and to idle/expiry GC (the store's queries filter IsWarm).
//
// On shutdown the pool deletes nothing unless CleanupOnShutdown is set, and then only the warm
// sandboxes this instance created (WarmInstanceID); after a restart they are reconciled and
// reused.
package warmpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/lease"
)

// Lifecycle is what the pool needs from the lifecycle service (internal/bay/sandbox).
type Lifecycle interface {
	// CreateWarmSandbox creates a warm sandbox of profileID for instanceID: a managed cargo
	// (and its volume) and a sandbox row with Owner bay.OwnerWarmPool, IsWarm true, WarmState
	// bay.WarmPending, WarmInstanceID instanceID, no TTL and no session. It never claims.
	CreateWarmSandbox(ctx context.Context, profileID, instanceID string) (*bay.Sandbox, error)
	// EnsureRunning starts (or verifies) the sandbox's session and waits until it is ready.
	EnsureRunning(ctx context.Context, sandboxID string) (*bay.Session, error)
	// ReclaimSandbox deletes the sandbox if pin.Holds for it re-read in the acting
	// transaction; it reports whether it acted.
	ReclaimSandbox(ctx context.Context, pin bay.Pin) (bool, error)
}

// ProfileConfig is one profile's pool.
type ProfileConfig struct {
	ProfileID string
	// Size is the number of warm sandboxes to keep; 0 = no pool.
	Size int
	// RotateTTL: an available warm sandbox older than this is replaced (default 1800 s).
	RotateTTL time.Duration
	// IdleTimeout of the profile: a claim gets idle deadline now+IdleTimeout (default 1800 s).
	IdleTimeout time.Duration
	// MaxAttempts failed warm-ups before the sandbox is deleted and replaced (default 3).
	MaxAttempts int
	// BackoffBase and BackoffMax shape the retry delay: base·2^(attempts-1), capped
	// (defaults 200 ms and 5 s).
	BackoffBase time.Duration
	BackoffMax  time.Duration
}

// Config configures the pool. Zero values take the defaults noted.
type Config struct {
	// Enabled: when false, Run keeps no pool.
	Enabled bool
	// InstanceID is this bay's instance id: holder of the warm leases, WarmInstanceID of the
	// warm sandboxes it creates (default "bay").
	InstanceID string
	// Interval between maintenance passes (default 30 s).
	Interval time.Duration
	// RunOnStartup fills the pools as Run starts; otherwise Run only reconciles existing warm
	// sandboxes at start and fills after one Interval.
	RunOnStartup bool
	// Workers warm up sandboxes concurrently (default 2); QueueSize bounds the queue
	// (default 256); DropPolicy is "drop_newest" (default) or "drop_oldest" when it is full.
	Workers    int
	QueueSize  int
	DropPolicy string
	// Profiles lists the pools; entries with Size 0 are ignored.
	Profiles []ProfileConfig
	// CleanupOnShutdown deletes this instance's warm sandboxes when Run returns (default
	// false: they are kept and reused after a restart).
	CleanupOnShutdown bool
	// Prime, when set, runs after a warm sandbox's session is ready and before it is made
	// available (e.g. one python exec so the kernel is started before the first claim); an
	// error counts as a failed warm-up.
	Prime func(ctx context.Context, sess *bay.Session) error
	// WarmupTimeout bounds one warm-up (EnsureRunning, then Prime) (default 3 min).
	WarmupTimeout time.Duration
	// AdoptAfter: a warming sandbox of another instance untouched for this long belongs to a
	// dead bay and is adopted (default 10 min).
	AdoptAfter time.Duration
	// CallTimeout bounds each store and driver call (default 30 s); ReclaimTimeout each
	// deletion (default 2 min); LeaseTTL each profile's maintenance lease (default 2 min).
	CallTimeout    time.Duration
	ReclaimTimeout time.Duration
	LeaseTTL       time.Duration
}

func (c *Config) applyDefaults() {
	if c.InstanceID == "" {
		c.InstanceID = "bay"
	}
	if c.Interval <= 0 {
		c.Interval = 30 * time.Second
	}
	if c.Workers <= 0 {
		c.Workers = 2
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 256
	}
	if c.DropPolicy == "" {
		c.DropPolicy = DropNewest
	}
	if c.WarmupTimeout <= 0 {
		c.WarmupTimeout = 3 * time.Minute
	}
	if c.AdoptAfter <= 0 {
		c.AdoptAfter = 10 * time.Minute
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 30 * time.Second
	}
	if c.ReclaimTimeout <= 0 {
		c.ReclaimTimeout = 2 * time.Minute
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 2 * time.Minute
	}
	var ps []ProfileConfig
	for _, p := range c.Profiles {
		if p.Size <= 0 {
			continue
		}
		if p.RotateTTL <= 0 {
			p.RotateTTL = 1800 * time.Second
		}
		if p.IdleTimeout <= 0 {
			p.IdleTimeout = 1800 * time.Second
		}
		if p.MaxAttempts <= 0 {
			p.MaxAttempts = 3
		}
		if p.BackoffBase <= 0 {
			p.BackoffBase = 200 * time.Millisecond
		}
		if p.BackoffMax <= 0 {
			p.BackoffMax = 5 * time.Second
		}
		if p.BackoffMax < p.BackoffBase {
			p.BackoffMax = p.BackoffBase
		}
		ps = append(ps, p)
	}
	c.Profiles = ps
}

// Drop policies of a full queue.
const (
	DropNewest = "drop_newest"
	DropOldest = "drop_oldest"
)

// Backoff returns the delay before warm-up attempt attempts+1, after `attempts` failures:
// base·2^(attempts-1), capped at max.
func (p ProfileConfig) Backoff(attempts int) time.Duration {
	if attempts <= 0 {
		return 0
	}
	d := p.BackoffBase
	for i := 1; i < attempts; i++ {
		d *= 2
		if d >= p.BackoffMax {
			return p.BackoffMax
		}
	}
	return min(d, p.BackoffMax)
}

// Pool is the warm pool. Create it with New, start it with Run.
type Pool struct {
	store bay.Store
	drv   bay.Driver
	lc    Lifecycle
	clock bay.Clock
	log   *slog.Logger
	cfg   Config

	profiles map[string]ProfileConfig

	refill chan struct{} // a claim happened: maintain soon (cap 1)
	maint  sync.Mutex    // one maintenance pass at a time

	qmu     sync.Mutex
	queue   []string        // sandbox ids waiting for a worker
	queued  map[string]bool // ids queued or being warmed (dedup)
	wake    chan struct{}   // a new item was queued (cap 1)
	stopped bool
	timers  map[*time.Timer]struct{}
	dropped int

	wg sync.WaitGroup // workers
}

// New returns a pool. clock nil = bay.SystemClock; log nil = discard.
func New(store bay.Store, drv bay.Driver, lc Lifecycle, clock bay.Clock, log *slog.Logger, cfg Config) *Pool {
	cfg.applyDefaults()
	if clock == nil {
		clock = bay.SystemClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pool{
		store: store, drv: drv, lc: lc, clock: clock, cfg: cfg,
		log:      log.With("component", "warmpool", "instance_id", cfg.InstanceID),
		profiles: map[string]ProfileConfig{},
		refill:   make(chan struct{}, 1),
		queued:   map[string]bool{},
		wake:     make(chan struct{}, 1),
		timers:   map[*time.Timer]struct{}{},
	}
	if cfg.Enabled {
		for _, pc := range cfg.Profiles {
			p.profiles[pc.ProfileID] = pc
		}
	}
	return p
}

// Config returns the effective configuration.
func (p *Pool) Config() Config { return p.cfg }

// WarmPoolEnabled reports whether profileID has a warm pool (sandbox.WarmClaimer).
func (p *Pool) WarmPoolEnabled(profileID string) bool {
	_, ok := p.profiles[profileID]
	return ok
}

// Claimed is told by the create path that sb was claimed (sandbox.WarmClaimer); the pool
// refills soon, in the background. It never blocks.
func (p *Pool) Claimed(ctx context.Context, sb *bay.Sandbox) {
	p.log.DebugContext(ctx, "warm sandbox claimed", "sandbox_id", sb.ID, "profile", sb.ProfileID)
	select {
	case p.refill <- struct{}{}:
	default:
	}
}

// Run starts the workers, reconciles the warm sandboxes left by a previous run (re-warming
// the ones whose container died), then maintains the pools every Interval and after each
// claim until ctx ends. On return the workers have stopped and, with CleanupOnShutdown, this
// instance's warm sandboxes are deleted. It returns nil.
func (p *Pool) Run(ctx context.Context) error {
	wctx, stopWorkers := context.WithCancel(ctx)
	p.qmu.Lock()
	p.stopped = false
	p.qmu.Unlock()
	for range p.cfg.Workers {
		p.wg.Add(1)
		go p.worker(wctx)
	}
	defer func() {
		p.qmu.Lock()
		p.stopped = true
		for t := range p.timers {
			t.Stop()
		}
		clear(p.timers)
		p.qmu.Unlock()
		stopWorkers()
		p.wg.Wait()
		if p.cfg.CleanupOnShutdown {
			p.cleanup(ctx)
		}
	}()

	if len(p.profiles) > 0 {
		p.maintain(ctx, p.cfg.RunOnStartup)
	}
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-p.refill:
		}
		if len(p.profiles) > 0 {
			p.maintain(ctx, true)
		}
	}
}

// Maintain runs one maintenance pass over every pool now (tests, operators).
func (p *Pool) Maintain(ctx context.Context) { p.maintain(ctx, true) }

func (p *Pool) maintain(ctx context.Context, fill bool) {
	p.maint.Lock()
	defer p.maint.Unlock()
	ids := make([]string, 0, len(p.profiles))
	for id := range p.profiles {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		if err := p.maintainProfile(ctx, p.profiles[id], fill); err != nil {
			p.log.WarnContext(ctx, "warm pool maintenance", "profile", id, "err", err)
		}
	}
}

func (p *Pool) now() time.Time { return p.clock.Now().UTC().Truncate(time.Microsecond) }

func (p *Pool) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.cfg.CallTimeout)
}

// errLeaseHeld: another bay is maintaining this profile's pool.
var errLeaseHeld = errors.New("lease held by another bay instance")

// maintainProfile runs one pass for one profile under its lease.
func (p *Pool) maintainProfile(ctx context.Context, pc ProfileConfig, fill bool) error {
	leaseName := "warm:" + pc.ProfileID
	ok, err := lease.Acquire(ctx, p.store, leaseName, p.cfg.InstanceID, p.now(), p.cfg.LeaseTTL, p.cfg.CallTimeout)
	if err != nil {
		return err
	}
	if !ok {
		p.log.DebugContext(ctx, "warm pool maintenance skipped", "profile", pc.ProfileID, "reason", errLeaseHeld)
		return nil
	}
	defer lease.Release(ctx, p.store, leaseName, p.cfg.InstanceID, p.cfg.CallTimeout, p.log)
	mctx, cancel := context.WithTimeout(ctx, p.cfg.LeaseTTL*9/10)
	defer cancel()

	warm := true
	cctx, ccancel := p.call(mctx)
	list, err := p.store.ListSandboxes(cctx, bay.SandboxQuery{Warm: &warm, ProfileID: pc.ProfileID})
	ccancel()
	if err != nil {
		return fmt.Errorf("list warm sandboxes: %w", err)
	}
	now := p.now()
	var available, pending []*bay.Sandbox
	var retire []*bay.Sandbox
	for _, sb := range list {
		if mctx.Err() != nil {
			return mctx.Err()
		}
		switch sb.WarmState {
		case bay.WarmAvailable:
			if sb.WarmRotateAt != nil && !now.Before(*sb.WarmRotateAt) {
				if r, ok := p.setState(mctx, sb, bay.WarmAvailable, bay.WarmRetiring); ok {
					retire = append(retire, r)
				}
				continue
			}
			if !p.alive(mctx, sb) {
				p.log.InfoContext(ctx, "warm sandbox's runtime is gone, warming it again", "sandbox_id", sb.ID)
				if r, ok := p.setState(mctx, sb, bay.WarmAvailable, bay.WarmPending); ok {
					pending = append(pending, r)
					p.Enqueue(r.ID)
				}
				continue
			}
			available = append(available, sb)
		case bay.WarmPending:
			pending = append(pending, sb)
			p.requeue(mctx, sb, now)
		case bay.WarmRetiring:
			retire = append(retire, sb)
		}
	}

	if fill {
		for deficit := pc.Size - len(available) - len(pending); deficit > 0 && mctx.Err() == nil; deficit-- {
			cctx, ccancel := context.WithTimeout(mctx, p.cfg.ReclaimTimeout)
			sb, err := p.lc.CreateWarmSandbox(cctx, pc.ProfileID, p.cfg.InstanceID)
			ccancel()
			if err != nil {
				p.log.WarnContext(ctx, "create warm sandbox", "profile", pc.ProfileID, "err", err)
				break
			}
			p.log.InfoContext(ctx, "warm sandbox created", "sandbox_id", sb.ID, "profile", pc.ProfileID)
			p.Enqueue(sb.ID)
		}
		// The pool shrank: retire the oldest available surplus.
		for surplus := len(available) + len(pending) - pc.Size; surplus > 0 && len(available) > 0; surplus-- {
			sb := available[0]
			available = available[1:]
			if r, ok := p.setState(mctx, sb, bay.WarmAvailable, bay.WarmRetiring); ok {
				retire = append(retire, r)
			}
		}
	}

	for _, sb := range retire {
		p.reclaim(mctx, bay.Pin{SandboxID: sb.ID, Reason: bay.ReasonRotate})
	}
	return nil
}

// requeue queues a warming sandbox whose backoff has elapsed, if it is this instance's or
// belongs to a bay that has not touched it for AdoptAfter (then it is adopted first).
func (p *Pool) requeue(ctx context.Context, sb *bay.Sandbox, now time.Time) {
	if sb.WarmNextAttemptAt != nil && now.Before(*sb.WarmNextAttemptAt) {
		p.retryAt(sb.ID, sb.WarmNextAttemptAt.Sub(now))
		return
	}
	if sb.WarmInstanceID != p.cfg.InstanceID {
		last := sb.LastActiveAt
		if sb.WarmNextAttemptAt != nil && sb.WarmNextAttemptAt.After(last) {
			last = *sb.WarmNextAttemptAt
		}
		if now.Sub(last) < p.cfg.AdoptAfter {
			return
		}
		adopted := false
		err := p.update(ctx, sb.ID, func(cur *bay.Sandbox) bool {
			if !cur.IsWarm || cur.WarmState != bay.WarmPending || cur.Version != sb.Version {
				return false
			}
			cur.WarmInstanceID = p.cfg.InstanceID
			cur.LastActiveAt = now
			adopted = true
			return true
		})
		if err != nil || !adopted {
			return
		}
		p.log.InfoContext(ctx, "adopted a warming sandbox of another bay", "sandbox_id", sb.ID, "from", sb.WarmInstanceID)
	}
	p.Enqueue(sb.ID)
}

// alive probes an available warm sandbox's instance. A probe that fails for another reason
// than "not found" counts as alive (the engine may be briefly unreachable).
func (p *Pool) alive(ctx context.Context, sb *bay.Sandbox) bool {
	if sb.CurrentSessionID == "" {
		return false
	}
	cctx, cancel := p.call(ctx)
	defer cancel()
	sess, err := p.store.GetSession(cctx, sb.CurrentSessionID)
	if bay.IsNotFound(err) {
		return false
	}
	if err != nil {
		return true
	}
	if !sess.Ready() {
		return false
	}
	inst, err := p.drv.InspectInstance(cctx, bay.InstanceName(sess.ID))
	if bay.IsNotFound(err) {
		return false
	}
	if err != nil {
		return true
	}
	return inst.Running() && len(inst.Containers) == len(sess.Containers)
}

// setState moves a warm sandbox from one warm state to another if it is still warm, not
// deleted and in state from (a conditional update: a claim in between wins).
func (p *Pool) setState(ctx context.Context, sb *bay.Sandbox, from, to string) (*bay.Sandbox, bool) {
	var out *bay.Sandbox
	err := p.update(ctx, sb.ID, func(cur *bay.Sandbox) bool {
		if !cur.IsWarm || cur.WarmState != from {
			return false
		}
		cur.WarmState = to
		if to != bay.WarmAvailable {
			cur.WarmReadyAt, cur.WarmRotateAt = nil, nil
		}
		out = cur
		return true
	})
	if err != nil {
		p.log.WarnContext(ctx, "update warm state", "sandbox_id", sb.ID, "from", from, "to", to, "err", err)
		return nil, false
	}
	return out, out != nil
}

// update re-reads a sandbox in a transaction and writes it if fn changes it (returns true).
// A deleted or missing sandbox is left alone.
func (p *Pool) update(ctx context.Context, id string, fn func(*bay.Sandbox) bool) error {
	cctx, cancel := p.call(ctx)
	defer cancel()
	return p.store.Tx(cctx, func(tx bay.Tx) error {
		cur, err := tx.GetSandbox(cctx, id)
		if bay.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.DeletedAt != nil || !fn(cur) {
			return nil
		}
		return tx.UpdateSandbox(cctx, cur)
	})
}

func (p *Pool) reclaim(ctx context.Context, pin bay.Pin) {
	cctx, cancel := context.WithTimeout(ctx, p.cfg.ReclaimTimeout)
	defer cancel()
	done, err := p.lc.ReclaimSandbox(cctx, pin)
	switch {
	case err != nil:
		p.log.WarnContext(ctx, "delete warm sandbox", "sandbox_id", pin.SandboxID, "reason", pin.Reason, "err", err)
	case done:
		p.log.InfoContext(ctx, "warm sandbox deleted", "sandbox_id", pin.SandboxID, "reason", pin.Reason)
	}
}

// cleanup deletes this instance's warm sandboxes (CleanupOnShutdown), on a detached context.
func (p *Pool) cleanup(ctx context.Context) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ReclaimTimeout)
	defer cancel()
	warm := true
	list, err := p.store.ListSandboxes(dctx, bay.SandboxQuery{Warm: &warm})
	if err != nil {
		p.log.WarnContext(ctx, "shutdown cleanup: list warm sandboxes", "err", err)
		return
	}
	for _, sb := range list {
		if sb.WarmInstanceID != p.cfg.InstanceID {
			continue // another bay's: never ours to delete
		}
		p.reclaim(dctx, bay.Pin{SandboxID: sb.ID, Version: sb.Version, Reason: bay.ReasonShutdown})
	}
}

// ProfileStatus is one profile's pool as the store holds it now.
type ProfileStatus struct {
	ProfileID string
	Target    int // Size
	Ready     int // available
	Starting  int // pending (being warmed)
	Retiring  int
}

// Status counts the warm sandboxes of every configured pool by state, in profile order, from
// the store: so it covers the sandboxes of every bay on the same database. With the pool
// disabled it is empty.
func (p *Pool) Status(ctx context.Context) ([]ProfileStatus, error) {
	ids := make([]string, 0, len(p.profiles))
	for id := range p.profiles {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]ProfileStatus, 0, len(ids))
	warm := true
	for _, id := range ids {
		list, err := p.store.ListSandboxes(ctx, bay.SandboxQuery{Warm: &warm, ProfileID: id})
		if err != nil {
			return nil, fmt.Errorf("warm pool status of %s: %w", id, err)
		}
		st := ProfileStatus{ProfileID: id, Target: p.profiles[id].Size}
		for _, sb := range list {
			switch sb.WarmState {
			case bay.WarmAvailable:
				st.Ready++
			case bay.WarmPending:
				st.Starting++
			case bay.WarmRetiring:
				st.Retiring++
			}
		}
		out = append(out, st)
	}
	return out, nil
}
