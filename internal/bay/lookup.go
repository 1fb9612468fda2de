package bay

import (
	"context"
	"fmt"
	"time"
)

// OwnedSandbox returns owner's sandbox id read through r: not_found when there is none, when
// it is deleted, warm (no one's yet) or another owner's.
func OwnedSandbox(ctx context.Context, r Reader, owner, id string) (*Sandbox, error) {
	sb, err := r.GetSandbox(ctx, id)
	if err != nil {
		if IsNotFound(err) {
			return nil, ErrSandboxNotFound(id)
		}
		return nil, Internal("Failed to load sandbox", fmt.Errorf("get sandbox %s: %w", id, err))
	}
	if sb.Owner != owner || sb.DeletedAt != nil || sb.IsWarm {
		return nil, ErrSandboxNotFound(id)
	}
	return sb, nil
}

// Detached returns a context that survives the caller's cancellation, bounded by d: cleanup
// after a failure, and records of work already done, must not be lost to a caller who hangs
// up.
func Detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// Stamp is c's time in UTC truncated to microseconds, the precision of the database and the
// wire: what the services write and compare.
func Stamp(c Clock) time.Time { return c.Now().UTC().Truncate(time.Microsecond) }
