package sandbox

import (
	"context"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// CreateParams are the inputs of CreateSandbox (already schema-validated).
type CreateParams struct {
	ProfileID string  // "" = python-default
	CargoID   *string // an external cargo of the caller; nil = a new managed cargo
	TTL       *int64  // seconds; nil, 0 or negative = no expiry
	// Skills are library skills mounted on top of the profile's (unknown: validation_error).
	Skills []string
	// Network tightens the profile's network policy (nil: the profile's); a sandbox with a
	// policy of its own is never a warm one.
	Network *bay.NetworkPolicy
}

// CreateSandbox creates a sandbox (lazily: no container is started). Without a cargo id it
// first tries to claim a warm sandbox of the profile; otherwise it creates a managed cargo and
// its volume (eagerly with EagerVolume, else at the first start; an eagerly created volume
// is removed again if the database write fails). hook (may be nil) runs
// inside the transaction that inserts the rows.
//
// Errors: validation_error "Invalid profile: X" (400), or with reason image_missing when the
// profile's image is not on the engine (400, with the hint to build it), or with reason
// runtime_missing when the platform lacks the profile's container runtime (400, with what
// it has and how to add it); not_found "Cargo not found: X"; conflict
// (409) when cargo_id names a managed cargo (it belongs to another sandbox); internal_error when
// the volume cannot be created.
func (s *Service) CreateSandbox(ctx context.Context, owner string, p CreateParams, hook bay.TxHook[*bay.SandboxView]) (*bay.SandboxView, error) {
	if p.ProfileID == "" {
		p.ProfileID = bay.DefaultProfileID
	}
	prof := s.Profile(p.ProfileID)
	if prof == nil {
		return nil, s.invalidProfile(p.ProfileID)
	}
	if err := s.checkImages(ctx, prof); err != nil {
		return nil, err
	}
	if err := s.checkRuntime(ctx, prof); err != nil {
		return nil, err
	}
	network, err := requestNetwork(prof, p.Network)
	if err != nil {
		return nil, err
	}
	now := s.now()
	var expires *time.Time
	if p.TTL != nil && *p.TTL > 0 {
		t := now.Add(time.Duration(*p.TTL) * time.Second)
		expires = &t
	}

	if len(p.Skills) > 0 {
		if err := s.checkRequestSkills(ctx, p.Skills); err != nil {
			return nil, err
		}
		hook = withRequestSkills(p.Skills, hook)
	}
	if p.CargoID != nil {
		return s.createOnCargo(ctx, owner, prof, *p.CargoID, now, expires, network, hook)
	}
	// A warm sandbox started without the request's skills or network policy: only a request
	// with neither claims.
	if w := s.warmClaimer(); w != nil && len(p.Skills) == 0 && network == nil && w.WarmPoolEnabled(prof.ID) {
		resp, sb, err := s.claimWarm(ctx, owner, prof, now, expires, hook)
		if err != nil {
			return nil, err
		}
		if resp != nil {
			w.Claimed(context.WithoutCancel(ctx), sb)
			return resp, nil
		}
	}

	sb := &bay.Sandbox{
		ID: bay.NewID(bay.PrefixSandbox), Owner: owner, ProfileID: prof.ID,
		ExpiresAt: expires, CreatedAt: now, LastActiveAt: now, Network: network,
	}
	return s.createManaged(ctx, sb, now, hook)
}

// CreateWarmSandbox creates a warm sandbox of profileID for the warm pool of instanceID: a
// managed cargo (and its volume) and a sandbox row owned by bay.OwnerWarmPool, IsWarm,
// WarmState pending, no TTL and no session. It never claims.
func (s *Service) CreateWarmSandbox(ctx context.Context, profileID, instanceID string) (*bay.Sandbox, error) {
	prof := s.Profile(profileID)
	if prof == nil {
		return nil, bay.Errorf(bay.CodeValidation, "Invalid profile: %s", profileID)
	}
	now := s.now()
	sb := &bay.Sandbox{
		ID: bay.NewID(bay.PrefixSandbox), Owner: bay.OwnerWarmPool, ProfileID: prof.ID,
		CreatedAt: now, LastActiveAt: now, IsWarm: true, WarmState: bay.WarmPending, WarmInstanceID: instanceID,
	}
	if _, err := s.createManaged(ctx, sb, now, nil); err != nil {
		return nil, err
	}
	return sb, nil
}

// createManaged inserts sb with a new managed cargo (with EagerVolume its volume is created
// first and removed again if the database write fails; else at the first start).
func (s *Service) createManaged(ctx context.Context, sb *bay.Sandbox, now time.Time, hook bay.TxHook[*bay.SandboxView]) (*bay.SandboxView, error) {
	cargo := &bay.Cargo{
		ID: bay.NewID(bay.PrefixCargo), Owner: sb.Owner, Backend: bay.BackendDockerVolume,
		Managed: true, ManagedBySandboxID: sb.ID, SizeLimitMB: s.cfg.DefaultCargoSizeMB,
		CreatedAt: now, LastAccessedAt: now,
	}
	sb.CargoID = cargo.ID
	if s.cfg.EagerVolume {
		ref, err := s.cargos.CreateVolume(ctx, cargo)
		if err != nil {
			return nil, err
		}
		cargo.DriverRef = ref
	}
	resp := s.view(sb, nil, now)
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		if err := tx.InsertCargo(ctx, cargo); err != nil {
			return err
		}
		if err := tx.InsertSandbox(ctx, sb); err != nil {
			return err
		}
		if hook != nil {
			return hook(ctx, tx, resp)
		}
		return nil
	})
	if err != nil {
		if cargo.DriverRef != "" {
			s.cargos.DeleteVolume(ctx, cargo.DriverRef)
		}
		return nil, bay.Classify(err, "Failed to create sandbox")
	}
	s.log.InfoContext(ctx, "sandbox created", "sandbox_id", sb.ID, "owner", sb.Owner, "profile", sb.ProfileID, "cargo_id", cargo.ID, "warm", sb.IsWarm)
	return resp, nil
}

func (s *Service) createOnCargo(ctx context.Context, owner string, prof *bay.Profile, cargoID string, now time.Time, expires *time.Time, network *bay.NetworkPolicy, hook bay.TxHook[*bay.SandboxView]) (*bay.SandboxView, error) {
	sb := &bay.Sandbox{
		ID: bay.NewID(bay.PrefixSandbox), Owner: owner, ProfileID: prof.ID, CargoID: cargoID,
		ExpiresAt: expires, CreatedAt: now, LastActiveAt: now, Network: network,
	}
	resp := s.view(sb, nil, now)
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		c, err := tx.GetCargo(ctx, cargoID)
		if err != nil || c.Owner != owner {
			if err == nil || bay.IsNotFound(err) {
				return bay.ErrCargoNotFound(cargoID)
			}
			return err
		}
		if c.Managed {
			return bay.Errorf(bay.CodeConflict, "Cargo %s is managed by sandbox %s and cannot be attached to another sandbox", cargoID, c.ManagedBySandboxID).
				WithDetails(map[string]any{"cargo_id": cargoID, "managed_by_sandbox_id": c.ManagedBySandboxID})
		}
		if err := tx.InsertSandbox(ctx, sb); err != nil {
			return err
		}
		if hook != nil {
			return hook(ctx, tx, resp)
		}
		return nil
	})
	if err != nil {
		return nil, bay.Classify(err, "Failed to create sandbox")
	}
	s.log.InfoContext(ctx, "sandbox created", "sandbox_id", sb.ID, "owner", owner, "profile", prof.ID, "cargo_id", cargoID)
	return resp, nil
}

// claimWarm tries to claim a warm sandbox; (nil, nil, nil) on a miss.
func (s *Service) claimWarm(ctx context.Context, owner string, prof *bay.Profile, now time.Time, expires *time.Time, hook bay.TxHook[*bay.SandboxView]) (*bay.SandboxView, *bay.Sandbox, error) {
	var resp *bay.SandboxView
	var sb *bay.Sandbox
	idle := now.Add(prof.IdleTimeout)
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		var err error
		sb, err = tx.ClaimWarmSandbox(ctx, bay.WarmClaim{ProfileID: prof.ID, Owner: owner, Now: now, ExpiresAt: expires, IdleExpiresAt: &idle})
		if err != nil {
			return err
		}
		resp = s.view(sb, nil, now)
		resp.Status = bay.StatusIdle
		if hook != nil {
			return hook(ctx, tx, resp)
		}
		return nil
	})
	if err != nil {
		if bay.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, bay.Classify(err, "Failed to claim a warm sandbox")
	}
	s.log.InfoContext(ctx, "warm sandbox claimed", "sandbox_id", sb.ID, "owner", owner, "profile", prof.ID)
	return resp, sb, nil
}

// view is the sandbox with the given current session (nil = none) as its owner sees it at now.
func (s *Service) view(sb *bay.Sandbox, cur *bay.Session, now time.Time) *bay.SandboxView {
	caps := []string{}
	p := s.Profile(sb.ProfileID)
	if p != nil {
		caps = p.Capabilities()
	}
	return &bay.SandboxView{Sandbox: sb, Status: bay.ComputeStatus(sb, cur, now), Capabilities: caps, Network: effectiveNetwork(sb, p)}
}

// ListParams are the inputs of ListSandboxes.
type ListParams struct {
	Limit  int    // 1..200
	Cursor string // a sandbox id; items with a greater id follow
	Status string // "" = any; idle|starting|ready|failed|expired|deleted
}

// ValidStatus reports whether status is a known filter value of the list endpoint.
func ValidStatus(status string) bool {
	switch status {
	case "", bay.StatusIdle, bay.StatusStarting, bay.StatusReady, bay.StatusFailed, bay.StatusExpired, bay.StatusDeleted:
		return true
	}
	return false
}

// ListSandboxes returns one page of the owner's sandboxes ordered by id, filtered on the
// computed status. Unlike the reference it never returns a short page with a cursor: it scans
// until the page is full plus one more match (then NextCursor = the last returned id) or the
// table is exhausted (NextCursor "").
func (s *Service) ListSandboxes(ctx context.Context, owner string, p ListParams) (*bay.Page[*bay.SandboxView], error) {
	if !ValidStatus(p.Status) {
		return nil, bay.Errorf(bay.CodeValidation, "Invalid status: %s", p.Status)
	}
	if p.Limit <= 0 {
		p.Limit = bay.DefaultPageLimit
	}
	out := &bay.Page[*bay.SandboxView]{}
	if p.Status == bay.StatusDeleted {
		return out, nil // deleted sandboxes are invisible
	}
	now := s.now()
	notWarm := false
	q := bay.SandboxQuery{Owner: owner, AfterID: p.Cursor, Warm: &notWarm}
	batch := min(max(p.Limit*5, 50), 500)
	if p.Status == "" {
		batch = p.Limit + 1
	}
	var more bool
scan:
	for {
		q.Limit = batch
		rows, err := s.store.ListSandboxes(ctx, q)
		if err != nil {
			return nil, bay.Internal("Failed to list sandboxes", err)
		}
		for _, sb := range rows {
			q.AfterID = sb.ID
			var cur *bay.Session
			if p.Status != bay.StatusExpired { // expired needs no session
				if cur, err = s.currentSession(ctx, s.store, sb); err != nil {
					return nil, err
				}
			}
			r := s.view(sb, cur, now)
			if p.Status != "" && r.Status != p.Status {
				continue
			}
			if len(out.Items) == p.Limit {
				more = true
				break scan
			}
			out.Items = append(out.Items, r)
		}
		if len(rows) < batch {
			break
		}
	}
	if more {
		out.NextCursor = out.Items[len(out.Items)-1].ID
	}
	return out, nil
}

// GetSandbox returns the owner's sandbox. When it is ready, containers[] is filled: version
// from the runtime's cached description (read with the session's runtime token) and healthy
// from a live health check, all within a 2 s budget (null values on failure). No probe or
// recovery is done.
func (s *Service) GetSandbox(ctx context.Context, owner, id string) (*bay.SandboxView, error) {
	sb, err := bay.OwnedSandbox(ctx, s.store, owner, id)
	if err != nil {
		return nil, err
	}
	cur, err := s.currentSession(ctx, s.store, sb)
	if err != nil {
		return nil, err
	}
	resp := s.view(sb, cur, s.now())
	// containers is null unless the sandbox is ready: an idle, stopped, failed or expired
	// sandbox has no runtime to describe.
	if resp.Status == bay.StatusReady && cur.Ready() {
		resp.Containers = s.containerRuntimes(ctx, cur)
	}
	return resp, nil
}

func (s *Service) containerRuntimes(ctx context.Context, cur *bay.Session) []bay.ContainerView {
	out := make([]bay.ContainerView, len(cur.Containers))
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i, c := range cur.Containers {
		name := c.Name
		if len(cur.Containers) == 1 {
			// A single-container session shows its runtime type as its name, as the reference does.
			name = c.RuntimeType
		}
		out[i] = bay.ContainerView{Name: name, RuntimeType: c.RuntimeType, Status: c.Status, Capabilities: append([]string{}, c.Capabilities...)}
		rc, err := s.runtimes.For(c.RuntimeType)
		if err != nil {
			continue
		}
		ep := cur.AuthorizedURL(c.Endpoint) // /meta needs the runtime token
		wg.Go(func() {
			if m, err := rc.Describe(ctx, ep); err == nil {
				v := m.Version
				out[i].Version = &v
			}
		})
		wg.Go(func() {
			h := rc.Health(ctx, ep) == nil
			out[i].Healthy = &h
		})
	}
	wg.Wait()
	return out
}

// ExtendTTL extends an expiring sandbox: extend_by <= 0 -> validation_error;
// infinite TTL -> sandbox_ttl_infinite; already expired (also after the expiry GC deleted it)
// -> sandbox_expired with details;
// otherwise expires_at = max(expires_at, now) + extend_by. hook runs in the same transaction.
func (s *Service) ExtendTTL(ctx context.Context, owner, id string, extendBy int64, hook bay.TxHook[*bay.SandboxView]) (*bay.SandboxView, error) {
	if extendBy <= 0 {
		return nil, bay.Errorf(bay.CodeValidation, "extend_by must be a positive integer")
	}
	var resp *bay.SandboxView
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		now := s.now()
		sb, err := bay.OwnedSandbox(ctx, tx, owner, id)
		if err != nil {
			// Expiry is final: a sandbox deleted by the expiry GC still answers sandbox_expired.
			if old, gerr := tx.GetSandbox(ctx, id); gerr == nil && old.Owner == owner && !old.IsWarm && old.Expired(now) {
				return bay.ErrExpired(old, "sandbox is expired, cannot extend ttl")
			}
			return err
		}
		if sb.ExpiresAt == nil {
			return bay.Errorf(bay.CodeSandboxTTLInfinite, "sandbox ttl is infinite, cannot extend ttl").WithDetails(map[string]any{"sandbox_id": id})
		}
		if sb.ExpiresAt.Before(now) {
			return bay.ErrExpired(sb, "sandbox is expired, cannot extend ttl")
		}
		base := *sb.ExpiresAt
		if now.After(base) {
			base = now
		}
		t := base.Add(time.Duration(extendBy) * time.Second)
		sb.ExpiresAt = &t
		if err := tx.UpdateSandbox(ctx, sb); err != nil {
			return err
		}
		resp = s.view(sb, nil, now)
		if hook != nil {
			return hook(ctx, tx, resp)
		}
		return nil
	})
	if err != nil {
		return nil, bay.Classify(err, "Failed to extend ttl")
	}
	return resp, nil
}

// Keepalive refreshes the idle deadline without starting compute (idle_expires_at is only set
// when the sandbox has a session; last_active_at always). Expired -> sandbox_expired.
func (s *Service) Keepalive(ctx context.Context, owner, id string) error {
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		sb, err := bay.OwnedSandbox(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		now := s.now()
		if sb.Expired(now) {
			return bay.ErrExpired(sb, "sandbox is expired")
		}
		sb.LastActiveAt = now
		if p := s.Profile(sb.ProfileID); p != nil && sb.CurrentSessionID != "" && p.IdleTimeout > 0 {
			t := now.Add(p.IdleTimeout)
			sb.IdleExpiresAt = &t
		}
		return tx.UpdateSandbox(ctx, sb)
	})
	if err != nil {
		return bay.Classify(err, "Failed to keep the sandbox alive")
	}
	return nil
}

// StopSandbox removes every session of the owner's sandbox (containers removed, not just
// stopped; rows deleted) and clears current_session_id and idle_expires_at. Idempotent; it
// does not wait for a start in progress (that start cleans up after itself). Files are kept.
func (s *Service) StopSandbox(ctx context.Context, owner, id string) error {
	if _, err := bay.OwnedSandbox(ctx, s.store, owner, id); err != nil {
		return err
	}
	_, err := s.destroySessions(ctx, id, nil, ReasonStop)
	return err
}

// DeleteSandbox deletes the owner's sandbox: sessions destroyed, row soft-deleted, managed
// cargo (volume + row) deleted, external cargo kept. Deleting an already deleted sandbox is a
// success; not_found only if no row ever existed for this owner.
func (s *Service) DeleteSandbox(ctx context.Context, owner, id string) error {
	sb, err := s.store.GetSandbox(ctx, id)
	if err != nil {
		if bay.IsNotFound(err) {
			return bay.ErrSandboxNotFound(id)
		}
		return bay.Internal("Failed to load sandbox", err)
	}
	if sb.Owner != owner {
		return bay.ErrSandboxNotFound(id)
	}
	if sb.DeletedAt != nil {
		return nil
	}
	_, err = s.deleteSandbox(ctx, id, nil, ReasonDelete)
	return err
}

// ReclaimSandbox deletes a sandbox regardless of its owner (the GC's TTL task, warm-pool
// retirement) if pin.Holds for the sandbox re-read in the acting transaction: sessions
// destroyed, row soft-deleted, managed cargo deleted. It reports whether it acted; a sandbox
// that is gone, already deleted or changed is (false, nil).
func (s *Service) ReclaimSandbox(ctx context.Context, pin bay.Pin) (bool, error) {
	acted, err := s.deleteSandbox(ctx, pin.SandboxID, func(sb *bay.Sandbox) bool { return pin.Holds(sb, s.now()) }, pin.Reason)
	if bay.IsNotFound(err) {
		return false, nil
	}
	return acted, err
}

// deleteSandbox soft-deletes a sandbox if check passes (nil = always) and it is not deleted
// yet, then removes its containers and managed cargo. If the managed cargo's volume cannot be
// removed, its row is kept for the orphan-cargo GC to retry.
func (s *Service) deleteSandbox(ctx context.Context, id string, check func(*bay.Sandbox) bool, reason bay.Reason) (bool, error) {
	var sessions []*bay.Session
	var sb *bay.Sandbox
	already := false
	err := s.store.Tx(ctx, func(tx bay.Tx) error {
		var err error
		sb, err = tx.GetSandbox(ctx, id)
		if err != nil {
			return err
		}
		if sb.DeletedAt != nil || (check != nil && !check(sb)) {
			already = true
			return nil
		}
		sessions, err = tx.ListSessions(ctx, bay.SessionQuery{SandboxID: id})
		if err != nil {
			return err
		}
		for _, ss := range sessions {
			if err := tx.DeleteSession(ctx, ss.ID); err != nil {
				return err
			}
		}
		now := s.now()
		sb.DeletedAt = &now
		sb.CurrentSessionID = ""
		sb.IdleExpiresAt = nil
		return tx.UpdateSandbox(ctx, sb)
	})
	if err != nil {
		if bay.IsNotFound(err) {
			return false, bay.ErrSandboxNotFound(id)
		}
		return false, bay.Classify(err, "Failed to delete sandbox")
	}
	if already {
		return false, nil
	}
	s.cancelStart(id)
	if !s.removeSandboxInstances(ctx, id, sessions) {
		// A container that is still there keeps the volume in use: the engine refuses the
		// volume removal below, and the cargo row stays for the orphan_cargo GC.
		s.log.WarnContext(ctx, "sandbox containers not all removed; its managed cargo may be left to the orphan_cargo GC", "sandbox_id", id)
	}
	s.deleteManagedCargo(ctx, sb)
	s.log.InfoContext(ctx, "sandbox deleted", "sandbox_id", id, "reason", string(reason))
	return true, nil
}

// deleteManagedCargo removes the sandbox's managed cargo (volume, then row). Failures are
// logged; the row stays so that the orphan-cargo GC retries.
func (s *Service) deleteManagedCargo(ctx context.Context, sb *bay.Sandbox) {
	dctx, cancel := bay.Detached(ctx, 30*time.Second)
	defer cancel()
	c, err := s.store.GetCargo(dctx, sb.CargoID)
	if err != nil {
		if !bay.IsNotFound(err) {
			s.log.ErrorContext(ctx, "load cargo for deletion", "cargo_id", sb.CargoID, "err", err)
		}
		return
	}
	if !c.Managed || c.ManagedBySandboxID != sb.ID {
		return
	}
	if err := s.cargos.DeleteResources(dctx, c); err != nil {
		s.log.ErrorContext(ctx, "delete managed cargo; the row is kept for the orphan_cargo GC", "cargo_id", c.ID, "sandbox_id", sb.ID, "err", err)
	}
}
