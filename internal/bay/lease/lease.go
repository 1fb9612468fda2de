// Package lease takes and drops the store's named leases (bay.Tx.AcquireLease), which keep two
// bay instances from running the same background work at once (a GC task, a profile's warm
// pool maintenance).
package lease

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Acquire takes or renews the lease name for holder until now+ttl, in one transaction bounded
// by timeout. It reports false when another holder has the lease.
func Acquire(ctx context.Context, st bay.Store, name, holder string, now time.Time, ttl, timeout time.Duration) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var ok bool
	err := st.Tx(cctx, func(tx bay.Tx) error {
		var err error
		ok, err = tx.AcquireLease(cctx, name, holder, now, ttl)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("lease %s: %w", name, err)
	}
	return ok, nil
}

// Release drops holder's lease name on a context detached from ctx and bounded by timeout: a
// cancelled caller must not keep the other instances out for a whole lease TTL. A failure is
// logged on log.
func Release(ctx context.Context, st bay.Store, name, holder string, timeout time.Duration, log *slog.Logger) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := st.Tx(cctx, func(tx bay.Tx) error { return tx.ReleaseLease(cctx, name, holder) }); err != nil {
		log.WarnContext(ctx, "release lease", "lease", name, "err", err)
	}
}

// Instance lease timings: a bay holds "bay-instance/<instance id>" while it runs, renewing it
// every InstanceRenew; one killed without releasing it blocks its successor for at most
// InstanceTTL.
const (
	InstanceTTL   = 6 * time.Second
	InstanceRenew = 2 * time.Second
)

// holdInstance takes or renews the instance lease of instanceID for bootID and, when it holds
// it, writes the instance's heartbeat in the same transaction: a heartbeat row that moves means
// a bay holds the id, and one that stopped moving for long (internal/bay/gc) means none does.
func holdInstance(ctx context.Context, st bay.Store, instanceID, bootID string, now time.Time) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var ok bool
	err := st.Tx(cctx, func(tx bay.Tx) error {
		var err error
		if ok, err = tx.AcquireLease(cctx, "bay-instance/"+instanceID, bootID, now, InstanceTTL); err != nil || !ok {
			return err
		}
		return tx.HeartbeatBayInstance(cctx, instanceID, bootID, now)
	})
	if err != nil {
		return false, fmt.Errorf("instance lease %s: %w", instanceID, err)
	}
	return ok, nil
}

// ClaimInstance makes sure no other bay runs with instanceID on this database: it takes the
// instance lease for bootID, waiting out a predecessor's lease (a bay killed without releasing
// it) for up to InstanceTTL plus a margin, and refuses with a clear error when another holder
// keeps renewing it. Two bays sharing an instance id would take each other's starting sessions
// for leftovers of their own earlier boot and hold every GC and warm-up lease together.
func ClaimInstance(ctx context.Context, st bay.Store, instanceID, bootID string, now func() time.Time) error {
	deadline := time.Now().Add(InstanceTTL + 2*time.Second)
	for {
		ok, err := holdInstance(ctx, st, instanceID, bootID, now())
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("another bay is running with instance id %q on this database: give each bay its own instance_id", instanceID)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// HoldInstance renews the instance lease until ctx ends, then releases it. A renewal refused
// (another bay took the id after a long stall of this one) is logged: that is an operator's
// mistake this bay cannot mend.
func HoldInstance(ctx context.Context, st bay.Store, instanceID, bootID string, now func() time.Time, log *slog.Logger) error {
	name := "bay-instance/" + instanceID
	defer Release(ctx, st, name, bootID, 5*time.Second, log)
	t := time.NewTicker(InstanceRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		ok, err := holdInstance(ctx, st, instanceID, bootID, now())
		switch {
		case err != nil && ctx.Err() == nil:
			log.WarnContext(ctx, "renew the instance lease", "instance_id", instanceID, "err", err)
		case err == nil && !ok:
			log.ErrorContext(ctx, "another bay holds this bay's instance id; give each bay its own instance_id", "instance_id", instanceID)
		}
	}
}
