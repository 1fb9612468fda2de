package bay

import "time"

// Computed sandbox statuses, as the API reports them. "deleted" is internal only.
const (
	StatusIdle     = "idle"
	StatusStarting = "starting"
	StatusReady    = "ready"
	StatusFailed   = "failed"
	StatusExpired  = "expired"
	StatusDeleted  = "deleted"
)

// ComputeStatus derives a sandbox's status from its row and its current session (nil when it
// has none), with one fixed now: deleted, then expired, then the session's observed state.
func ComputeStatus(s *Sandbox, cur *Session, now time.Time) string {
	switch {
	case s.DeletedAt != nil:
		return StatusDeleted
	case s.ExpiresAt != nil && now.After(*s.ExpiresAt):
		return StatusExpired
	case cur == nil:
		return StatusIdle
	}
	switch cur.ObservedState {
	case SessionRunning:
		return StatusReady
	case SessionPending, SessionStarting:
		return StatusStarting
	case SessionFailed:
		return StatusFailed
	default:
		return StatusIdle
	}
}

// Expired reports whether the sandbox's TTL has passed at now.
func (s *Sandbox) Expired(now time.Time) bool { return s.ExpiresAt != nil && now.After(*s.ExpiresAt) }
