package bay

import (
	"strings"
	"time"
)

// Reason says why bay's background machinery (GC, warm pool, restart recovery) reclaims a
// sandbox or its compute. It is logged with every action and decides which re-check Pin.Holds
// applies.
type Reason string

const (
	// ReasonIdle: the idle deadline passed; the compute is destroyed, the sandbox and its files
	// stay, the next call rebuilds a session.
	ReasonIdle Reason = "idle"
	// ReasonTTL: the sandbox's TTL passed; it is deleted with its managed cargo, never revived.
	ReasonTTL Reason = "ttl"
	// ReasonOrphan: the resource belongs to nothing bay knows about any more.
	ReasonOrphan Reason = "orphan"
	// ReasonRotate: an available warm sandbox outlived warm_rotate_ttl and was retired.
	ReasonRotate Reason = "rotate"
	// ReasonWarmupFailed: a warm sandbox failed to warm up too many times and is replaced.
	ReasonWarmupFailed Reason = "warmup_failed"
	// ReasonStaleStart: a session has been "starting" for longer than any live bay waits for
	// readiness (its bay died mid-start); it is destroyed so the next call rebuilds it.
	ReasonStaleStart Reason = "stale_start"
	// ReasonShutdown: this bay shuts down and was configured to remove its own warm sandboxes.
	ReasonShutdown Reason = "shutdown"
)

// Pin is what a background decision about one sandbox was based on. The decision is taken on a
// snapshot without any lock; the code that acts on it (the lifecycle service) re-reads the
// sandbox in the transaction that acts and acts only if Holds still reports true, so a sandbox
// revived meanwhile (new session, refreshed idle deadline, claimed from the warm pool) is never
// destroyed.
type Pin struct {
	SandboxID string
	// SessionID is the sandbox's current session at decision time ("" = none). For
	// ReasonStaleStart it is the stuck session.
	SessionID string
	// Version is the sandbox version at decision time; 0 = not pinned. Any write to the sandbox
	// since then (keepalive, a call, a claim) changes it.
	Version int64
	Reason  Reason
}

// Holds reports whether the decision pinned by p still applies to s, freshly read at now:
//
//   - every reason: s is the pinned sandbox, not deleted, and (if p.Version != 0) unchanged;
//   - ReasonIdle: not warm, idle deadline set and passed, current session still p.SessionID;
//   - ReasonTTL: not warm, TTL set and passed (expiry is final, so no version pin is needed);
//   - ReasonRotate: warm and retiring;
//   - ReasonWarmupFailed: warm and not available (still pending);
//   - ReasonShutdown: warm and not claimed;
//   - ReasonStaleStart: current session still p.SessionID (the caller also checks that the
//     session row is still starting);
//   - ReasonOrphan: no further condition.
func (p Pin) Holds(s *Sandbox, now time.Time) bool {
	if s == nil || s.ID != p.SandboxID || s.DeletedAt != nil {
		return false
	}
	if p.Version != 0 && s.Version != p.Version {
		return false
	}
	switch p.Reason {
	case ReasonIdle:
		return !s.IsWarm && s.IdleExpiresAt != nil && s.IdleExpiresAt.Before(now) &&
			s.CurrentSessionID == p.SessionID
	case ReasonTTL:
		return !s.IsWarm && s.Expired(now)
	case ReasonRotate:
		return s.IsWarm && s.WarmState == WarmRetiring
	case ReasonWarmupFailed:
		return s.IsWarm && s.WarmState != WarmAvailable
	case ReasonShutdown:
		return s.IsWarm
	case ReasonStaleStart:
		return s.CurrentSessionID == p.SessionID
	case ReasonOrphan:
		return true
	default:
		return false
	}
}

// FromEarlierBoot reports whether the session was started by an earlier incarnation of the bay
// instance instanceID, which now runs as bootID ("<instance_id>/<random>"); a row that names
// the instance alone counts too. That process is gone: nobody will finish its start.
func (s *Session) FromEarlierBoot(instanceID, bootID string) bool {
	return bootID != "" && s.InstanceID != bootID &&
		(s.InstanceID == instanceID || strings.HasPrefix(s.InstanceID, instanceID+"/"))
}

// StaleStart reports whether a session has been starting for longer than bound at now: the
// bay that started it must have died, because a live one gives up waiting for readiness after
// bound and marks the session failed. StartedAt is used when set, else CreatedAt.
func (s *Session) StaleStart(now time.Time, bound time.Duration) bool {
	if s.ObservedState != SessionStarting {
		return false
	}
	t := s.CreatedAt
	if s.StartedAt != nil {
		t = *s.StartedAt
	}
	return now.Sub(t) > bound
}
