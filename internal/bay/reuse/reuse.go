// Package reuse resolves a sandbox reuse key (POST /v1/sandboxes with reuse {key, idle_ttl,
// hard_ttl}, seed 002's reuse_mode = project_agent): the owner's live sandbox for the key, or a
// new one. The key's row is inserted in the same store transaction as the new sandbox's rows,
// and the row's primary key (owner, key) lets exactly one of any number of concurrent calls,
// on one bay or several sharing the database, create the sandbox: the others' transactions
// fail with a conflict, their creations roll back, and they return the winner's sandbox.
//
// Besides, the calls of one key run one at a time (Lock: a lease in the database, so across
// bays), each waiting at most the lock timeout, as seed 002's lock_timeout_sec has it.
package reuse

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/lease"
)

// Config is the operator's reuse settings (bay's config, block reuse).
type Config struct {
	// Disabled refuses creates with reuse (reuse_mode none or off).
	Disabled bool
	// Defaults applies to a request that gives no idle_ttl or hard_ttl.
	Defaults Policy
	// LockTimeout bounds the wait for the key's lock (0: 600 s).
	LockTimeout time.Duration
}

// lockTTL is how long a key's lock outlives a call that died holding it.
const lockTTL = 30 * time.Second

// Lock waits, at most timeout, until this call alone holds the lock of (owner, key): a lease
// in the store, so calls on every bay sharing the database queue for it. unlock releases it
// (on a context of its own: a caller that left must not keep the key locked).
func Lock(ctx context.Context, store bay.Store, owner, key string, now func() time.Time, timeout time.Duration, log *slog.Logger) (unlock func(), err error) {
	// A key holds no "/", so the name is unambiguous whatever the owner (and free of NUL bytes,
	// which PostgreSQL text refuses).
	name := "reuse/" + key + "/" + owner
	holder := bay.NewID("reuse-call")
	deadline := time.Now().Add(timeout)
	wait := 20 * time.Millisecond
	for {
		ok, err := lease.Acquire(ctx, store, name, holder, now(), lockTTL, 10*time.Second)
		if err != nil {
			return nil, bay.Errorf(bay.CodeInternal, "Failed to lock the reuse key").WithCause(err)
		}
		if ok {
			return func() { lease.Release(ctx, store, name, holder, 10*time.Second, log) }, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, bay.Errorf(bay.CodeConflict, "Other calls for this reuse key held its lock for longer than the lock timeout (%d s); retry",
				int64(timeout.Seconds())).WithCause(errors.New("reuse: lock timeout"))
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, bay.Errorf(bay.CodeInternal, "request cancelled while waiting for the reuse key").WithCause(ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// Policy decides whether the key's sandbox may be reused: zero durations do not limit.
type Policy struct {
	// IdleTTL: a sandbox idle (no call) for longer is not reused, but deleted and replaced.
	IdleTTL time.Duration
	// HardTTL: a sandbox older than this is not reused, but deleted and replaced. A new
	// sandbox gets it as its TTL unless the request gives one.
	HardTTL time.Duration
}

// Hook runs inside the transaction that inserts a new sandbox's rows, with the answer.
type Hook = bay.TxHook[*bay.SandboxView]

// Create creates a sandbox, running hook inside the transaction that inserts its rows.
type Create func(ctx context.Context, hook Hook) (*bay.SandboxView, error)

// Remove deletes a sandbox of the owner that the key no longer stands for.
type Remove func(ctx context.Context, id string) error

// maxAttempts bounds the rounds of lost races and stale keys.
const maxAttempts = 5

// Resolve returns the id of the owner's sandbox for key, creating it when there is none (or
// the one there was may not be reused): created says which.
func Resolve(ctx context.Context, store bay.Store, owner, key string, p Policy, now func() time.Time, create Create, remove Remove, log *slog.Logger) (id string, created bool, err error) {
	for range maxAttempts {
		id, err := store.GetReuseKey(ctx, owner, key)
		switch {
		case err == nil:
			sb, gerr := store.GetSandbox(ctx, id)
			if gerr != nil && !bay.IsNotFound(gerr) {
				return "", false, bay.Errorf(bay.CodeInternal, "Failed to read the sandbox of the reuse key").WithCause(gerr)
			}
			why := p.unusable(sb, now())
			if why == "" {
				return id, false, nil
			}
			if err := store.Tx(ctx, func(tx bay.Tx) error { return tx.DeleteReuseKey(ctx, owner, key, id) }); err != nil {
				return "", false, bay.Errorf(bay.CodeInternal, "Failed to release the reuse key").WithCause(err)
			}
			log.InfoContext(ctx, "reuse key released", "owner", owner, "sandbox_id", id, "why", why)
			if sb != nil && sb.DeletedAt == nil {
				if err := remove(ctx, id); err != nil && !bay.IsNotFound(err) {
					log.WarnContext(ctx, "reuse: cannot delete the sandbox the key released", "sandbox_id", id, "err", err)
				}
			}
			continue
		case !bay.IsNotFound(err):
			return "", false, bay.Errorf(bay.CodeInternal, "Failed to read the reuse key").WithCause(err)
		}
		resp, err := create(ctx, func(ctx context.Context, tx bay.Tx, sb *bay.SandboxView) error {
			return tx.InsertReuseKey(ctx, owner, key, sb.ID)
		})
		if bay.IsConflict(err) {
			continue // another call created the key's sandbox first: the next round returns it
		}
		if err != nil {
			return "", false, err
		}
		return resp.ID, true, nil
	}
	return "", false, bay.Errorf(bay.CodeConflict, "The reuse key is contended; retry").WithCause(errors.New("reuse: too many rounds"))
}

// unusable says why sb may not be reused ("" if it may).
func (p Policy) unusable(sb *bay.Sandbox, now time.Time) string {
	switch {
	case sb == nil || sb.DeletedAt != nil:
		return "deleted"
	case sb.Expired(now):
		return "expired"
	case p.HardTTL > 0 && now.Sub(sb.CreatedAt) > p.HardTTL:
		return "older than hard_ttl"
	case p.IdleTTL > 0 && now.Sub(sb.LastActiveAt) > p.IdleTTL:
		return "idle longer than idle_ttl"
	}
	return ""
}
