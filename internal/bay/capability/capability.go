package capability

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// target resolves a capability call: the owner's sandbox (not_found), the profile's capability
// (capability_not_supported), then the lifecycle's running session (which refuses an expired
// sandbox: sandbox_expired), and returns the authorized endpoint of the container serving the capability (checked against its runtime's
// description).
func (s *Service) target(ctx context.Context, owner, id, capability string) (*bay.Sandbox, *bay.Session, *bay.SessionContainer, string, error) {
	sb, prof, err := s.profileWith(ctx, owner, id, capability)
	if err != nil {
		return nil, nil, nil, "", err
	}
	// A call waits only for the container the profile routes it to (the others of a
	// session may still be starting).
	need := ""
	if c := prof.ContainerFor(capability); c != nil {
		need = c.Name
	}
	sess, err := s.lc.EnsureSessionFor(ctx, sb, need)
	if err != nil {
		return nil, nil, nil, "", err
	}
	c, err := routeCapability(prof, sess, capability)
	if err != nil {
		return nil, nil, nil, "", err
	}
	ep := sess.AuthorizedURL(c.Endpoint) // carries the session's runtime token: never log it
	if err := s.checkRuntimeCapability(ctx, sess, c, ep, capability); err != nil {
		return nil, nil, nil, "", err
	}
	return sb, sess, c, ep, nil
}

// routeCapability returns the session container serving capability: the one the profile routes
// it to (primary_for, then capabilities), else the first session container listing it, else
// the primary of a session whose containers list no capabilities, else
// capability_not_supported.
func routeCapability(prof *bay.Profile, sess *bay.Session, capability string) (*bay.SessionContainer, error) {
	if c := prof.ContainerFor(capability); c != nil {
		if sc := sess.Container(c.Name); sc != nil && sc.Endpoint != "" {
			return sc, nil
		}
	}
	avail := map[string]bool{}
	for i := range sess.Containers {
		sc := &sess.Containers[i]
		for _, c := range sc.Capabilities {
			if c == capability && sc.Endpoint != "" {
				return sc, nil
			}
			avail[c] = true
		}
	}
	if len(sess.Containers) == 1 && len(avail) == 0 && sess.Containers[0].Endpoint != "" {
		return &sess.Containers[0], nil
	}
	return nil, bay.Errorf(bay.CodeCapabilityNotSupported, "No container provides capability: %s", capability).
		WithDetails(map[string]any{"capability": capability, "available": slices.Sorted(maps.Keys(avail))})
}

// checkRuntimeCapability is the second check, against the runtime's own (cached) description.
// A runtime whose description cannot be read is not refused here (the call itself will tell).
// profileWith returns the owner's sandbox and its profile when the profile provides
// capability (without starting anything).
func (s *Service) profileWith(ctx context.Context, owner, id, capability string) (*bay.Sandbox, *bay.Profile, error) {
	sb, err := bay.OwnedSandbox(ctx, s.lc.Store(), owner, id)
	if err != nil {
		return nil, nil, err
	}
	prof := s.lc.Profile(sb.ProfileID)
	if prof == nil {
		return nil, nil, bay.Errorf(bay.CodeCapabilityNotSupported, "Profile not found: %s", sb.ProfileID).
			WithDetails(map[string]any{"capability": capability})
	}
	if !prof.HasCapability(capability) {
		return nil, nil, bay.Errorf(bay.CodeCapabilityNotSupported, "Profile '%s' does not support capability: %s", prof.ID, capability).
			WithDetails(map[string]any{"capability": capability, "available": prof.Capabilities()})
	}
	return sb, prof, nil
}

func (s *Service) checkRuntimeCapability(ctx context.Context, sess *bay.Session, c *bay.SessionContainer, endpoint, capability string) error {
	rc, err := s.lc.Runtime(c.RuntimeType)
	if err != nil {
		return bay.Internal("No client for the runtime", err)
	}
	m, err := rc.Describe(ctx, endpoint)
	if err != nil {
		s.lc.RuntimeUnreachable(sess, err)
		s.log.WarnContext(ctx, "runtime description unavailable", "session_id", sess.ID, "container", c.Name, "err", err)
		return nil
	}
	if len(m.Capabilities) == 0 || m.Has(capability) {
		return nil
	}
	return bay.Errorf(bay.CodeCapabilityNotSupported, "Runtime does not support capability: %s", capability).
		WithDetails(map[string]any{"capability": capability, "available": m.Capabilities})
}

func (s *Service) recordExecution(ctx context.Context, sb *bay.Sandbox, sess *bay.Session, typ, code string, ok bool, ms int64, output, errText, desc, tags *string) (string, error) {
	return s.insertExecution(ctx, s.newExecution(sb, sess, typ, code, ok, ms, output, errText, desc, tags))
}

// newExecution is the history row of a call that just returned.
func (s *Service) newExecution(sb *bay.Sandbox, sess *bay.Session, typ, code string, ok bool, ms int64, output, errText, desc, tags *string) *bay.Execution {
	return &bay.Execution{
		ID: bay.NewID(bay.PrefixExecution), Owner: sb.Owner, SandboxID: sb.ID, SessionID: sess.ID,
		ExecType: typ, Code: code, Success: ok, ExecutionTimeMS: ms, Output: output, Error: errText,
		Description: desc, Tags: bay.NormalizeTags(tags), CreatedAt: s.lc.Now(),
	}
}

// insertExecution writes the history row e and returns its id.
func (s *Service) insertExecution(ctx context.Context, e *bay.Execution) (string, error) {
	// Detached: the runtime already did the work; the record must not be lost to a client
	// that hangs up now.
	dctx, cancel := bay.Detached(ctx, 10*time.Second)
	defer cancel()
	if err := s.lc.Store().Tx(dctx, func(tx bay.Tx) error { return tx.InsertExecution(dctx, e) }); err != nil {
		return "", bay.Internal("Failed to record execution history", err)
	}
	return e.ID, nil
}
