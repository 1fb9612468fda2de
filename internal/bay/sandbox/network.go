package sandbox

import (
	"context"
	"errors"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// A sandbox's network policy is its profile's unless a create request or a PATCH tightened it
// (bay.Sandbox.Network). A PATCH applies to the running compute: in place when the driver
// enforces the policy itself and the mode stays (an allowlist edited), else by destroying the
// compute, which the next call starts again under the new policy (files are kept).

// ReasonNetwork: the compute was destroyed because its network mode changed.
const ReasonNetwork bay.Reason = "network_policy"

// requestNetwork returns the effective policy of a create request's network field (nil: the
// profile's).
func requestNetwork(prof *bay.Profile, req *bay.NetworkPolicy) (*bay.NetworkPolicy, error) {
	if req == nil {
		return nil, nil
	}
	eff, err := bay.TightenNetworkPolicy("network", prof.Network, *req)
	if err != nil {
		return nil, err
	}
	return &eff, nil
}

// effectiveNetwork is the policy sb's compute runs under.
func effectiveNetwork(sb *bay.Sandbox, prof *bay.Profile) bay.NetworkPolicy {
	if sb.Network != nil {
		return *sb.Network
	}
	if prof != nil && prof.Network.Mode != "" {
		return prof.Network
	}
	return bay.NetworkPolicy{Mode: bay.NetworkOpen}
}

// SetNetwork replaces the owner's sandbox's network policy by req tightened under the
// profile's ceiling (an escalation is a validation error naming the field) and applies it to
// the running compute, if any. It returns the sandbox.
func (s *Service) SetNetwork(ctx context.Context, owner, id string, req bay.NetworkPolicy) (*bay.SandboxView, error) {
	var sb *bay.Sandbox
	var old bay.NetworkPolicy
	var cur *bay.Session
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		var err error
		if sb, err = bay.OwnedSandbox(ctx, tx, owner, id); err != nil {
			return err
		}
		prof := s.Profile(sb.ProfileID)
		if prof == nil {
			return bay.Errorf(bay.CodeValidation, "Invalid profile: %s", sb.ProfileID)
		}
		eff, err := bay.TightenNetworkPolicy("network", prof.Network, req)
		if err != nil {
			return err
		}
		old = effectiveNetwork(sb, prof)
		sb.Network = &eff
		if err := tx.UpdateSandbox(ctx, sb); err != nil {
			return err
		}
		cur, err = s.currentSession(ctx, tx, sb)
		return err
	})
	if err != nil {
		return nil, bay.Classify(err, "Failed to change the network policy")
	}
	s.log.InfoContext(ctx, "network policy changed", "sandbox_id", id, "from", old.EffectiveMode(), "to", sb.Network.Mode,
		"allow", len(sb.Network.Allow), "deny", len(sb.Network.Deny))
	if cur != nil {
		if err := s.applyNetwork(ctx, sb, cur, old); err != nil {
			return nil, err
		}
	}
	return s.GetSandbox(ctx, owner, id)
}

// applyNetwork brings the running session in line with sb's new policy: in place when the
// driver can, else by destroying the compute.
func (s *Service) applyNetwork(ctx context.Context, sb *bay.Sandbox, cur *bay.Session, old bay.NetworkPolicy) error {
	if en, ok := bay.DriverPort[bay.NetworkEnforcer](s.driver); ok && old.EffectiveMode() == sb.Network.EffectiveMode() {
		err := en.UpdateNetwork(ctx, bay.InstanceName(cur.ID), *sb.Network)
		if err == nil {
			return nil
		}
		if !errors.Is(err, bay.ErrRestartRequired) && !bay.IsNotFound(err) {
			s.log.WarnContext(ctx, "network policy not applied in place; restarting the compute", "sandbox_id", sb.ID, "err", err)
		}
	}
	if old.EffectiveMode() == sb.Network.EffectiveMode() && old.EffectiveMode() != bay.NetworkAllowlist {
		return nil // none and open carry no entries: nothing changed
	}
	_, err := s.destroySessions(ctx, sb.ID, nil, ReasonNetwork)
	return err
}

// NetworkEvents returns the refusals recorded for the owner's sandbox, oldest first, and their
// total count (none when the driver does not enforce policies itself).
func (s *Service) NetworkEvents(ctx context.Context, owner, id string) ([]bay.NetworkEvent, int64, error) {
	if _, err := bay.OwnedSandbox(ctx, s.store, owner, id); err != nil {
		return nil, 0, err
	}
	en, ok := bay.DriverPort[bay.NetworkEnforcer](s.driver) // through decorators (metrics)
	if !ok {
		return nil, 0, nil
	}
	events, denied, err := en.NetworkEvents(ctx, id)
	if err != nil {
		return nil, 0, bay.Classify(err, "Failed to read the sandbox's network events")
	}
	return events, denied, nil
}

// RestoreInterval is how often KeepNetworksRestored looks for running instances the
// driver's enforcement does not know.
const RestoreInterval = 5 * time.Second

// RestoreNetworks teaches the driver's enforcement (bay.NetworkRestorer) the running instances
// of closed policies it does not know, with their sandboxes' policies as the store has them
// now, and returns how many. After a restart of bay they are refused everything until then,
// so bay calls it before it serves.
func (s *Service) RestoreNetworks(ctx context.Context) (int, error) {
	r, ok := bay.DriverPort[bay.NetworkRestorer](s.driver)
	if !ok {
		return 0, nil
	}
	return r.RestoreNetworks(ctx, s.instancePolicy)
}

// KeepNetworksRestored calls RestoreNetworks every RestoreInterval until ctx ends: with
// several bays on one engine host, the one whose gateway holds the ports serves the instances
// of them all, and another takes over when it stops.
func (s *Service) KeepNetworksRestored(ctx context.Context) error {
	if _, ok := bay.DriverPort[bay.NetworkRestorer](s.driver); !ok {
		return nil
	}
	t := time.NewTicker(RestoreInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if n, err := s.RestoreNetworks(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "restoring the network policies of running sandboxes", "restored", n, "err", err)
		}
	}
}

// instancePolicy is the policy the sandbox whose session runs as instance is under.
func (s *Service) instancePolicy(ctx context.Context, instance string) (bay.NetworkPolicy, bool, error) {
	sessID, ok := bay.SessionOfInstance(instance)
	if !ok {
		return bay.NetworkPolicy{}, false, nil
	}
	sess, err := s.store.GetSession(ctx, sessID)
	if bay.IsNotFound(err) {
		return bay.NetworkPolicy{}, false, nil
	}
	if err != nil {
		return bay.NetworkPolicy{}, false, err
	}
	sb, err := s.store.GetSandbox(ctx, sess.SandboxID)
	if bay.IsNotFound(err) {
		return bay.NetworkPolicy{}, false, nil
	}
	if err != nil {
		return bay.NetworkPolicy{}, false, err
	}
	if sb.DeletedAt != nil {
		return bay.NetworkPolicy{}, false, nil
	}
	return effectiveNetwork(sb, s.Profile(sb.ProfileID)), true, nil
}
