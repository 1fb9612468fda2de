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
		log.Warn("release lease", "lease", name, "err", err)
	}
}
