package sandbox

import (
	"context"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
)

// CargoResponse renders a cargo.
func CargoResponse(c *bay.Cargo) *bayapi.CargoResponse {
	var mb *string
	if c.ManagedBySandboxID != "" {
		v := c.ManagedBySandboxID
		mb = &v
	}
	return &bayapi.CargoResponse{
		ID: c.ID, Managed: c.Managed, ManagedBySandboxID: mb, Backend: bay.BackendDockerVolume,
		SizeLimitMB: c.SizeLimitMB, CreatedAt: bayapi.NewTime(c.CreatedAt), LastAccessedAt: bayapi.NewTime(c.LastAccessedAt),
	}
}

// CreateCargo creates an external cargo and its volume; if the database write fails the
// volume is removed again. sizeMB nil = the configured default. hook runs in the insert Tx.
func (s *Service) CreateCargo(ctx context.Context, owner string, sizeMB *int64, hook TxHook) (*bayapi.CargoResponse, error) {
	now := s.now()
	c := &bay.Cargo{
		ID: bay.NewID(bay.PrefixCargo), Owner: owner, Backend: bay.BackendDockerVolume,
		SizeLimitMB: s.cfg.DefaultCargoSizeMB, CreatedAt: now, LastAccessedAt: now,
	}
	if sizeMB != nil {
		c.SizeLimitMB = int(*sizeMB)
	}
	ref, err := s.createVolume(ctx, c)
	if err != nil {
		return nil, err
	}
	c.DriverRef = ref
	resp := CargoResponse(c)
	err = s.store.Tx(ctx, func(tx bay.Tx) error {
		if err := tx.InsertCargo(ctx, c); err != nil {
			return err
		}
		if hook != nil {
			return hook(ctx, tx, resp)
		}
		return nil
	})
	if err != nil {
		s.deleteVolume(ctx, ref)
		return nil, classify(err, "Failed to create cargo")
	}
	s.log.Info("cargo created", "cargo_id", c.ID, "owner", owner)
	return resp, nil
}

// ListCargos returns one page of the owner's cargos, managed or external (the reference has
// no "all"), ordered by id; next_cursor is set iff more exist.
func (s *Service) ListCargos(ctx context.Context, owner string, managed bool, limit int, cursor string) (*bayapi.CargoList, error) {
	if limit <= 0 {
		limit = bayapi.DefaultListLimit
	}
	rows, err := s.store.ListCargos(ctx, bay.CargoQuery{Owner: owner, Managed: &managed, AfterID: cursor, Limit: limit + 1})
	if err != nil {
		return nil, internal("Failed to list cargos", err)
	}
	out := &bayapi.CargoList{Items: []bayapi.CargoResponse{}}
	for i, c := range rows {
		if i == limit {
			last := out.Items[limit-1].ID
			out.NextCursor = &last
			break
		}
		out.Items = append(out.Items, *CargoResponse(c))
	}
	return out, nil
}

func (s *Service) ownedCargo(ctx context.Context, r bay.Reader, owner, id string) (*bay.Cargo, error) {
	c, err := r.GetCargo(ctx, id)
	if err != nil {
		if bay.IsNotFound(err) {
			return nil, notFoundCargo(id)
		}
		return nil, internal("Failed to load cargo", err)
	}
	if c.Owner != owner {
		return nil, notFoundCargo(id)
	}
	return c, nil
}

// GetCargo returns the owner's cargo or not_found.
func (s *Service) GetCargo(ctx context.Context, owner, id string) (*bayapi.CargoResponse, error) {
	c, err := s.ownedCargo(ctx, s.store, owner, id)
	if err != nil {
		return nil, err
	}
	return CargoResponse(c), nil
}

// DeleteCargo deletes the owner's cargo (volume, then row). An external cargo still used by a
// non-deleted sandbox, or a managed cargo whose sandbox is alive, is a 409 conflict (details
// active_sandbox_ids / managed_by_sandbox_id); a volume still in use by a container is a
// conflict too.
func (s *Service) DeleteCargo(ctx context.Context, owner, id string) error {
	c, err := s.ownedCargo(ctx, s.store, owner, id)
	if err != nil {
		return err
	}
	if c.Managed && c.ManagedBySandboxID != "" {
		sb, err := s.store.GetSandbox(ctx, c.ManagedBySandboxID)
		if err == nil && sb.DeletedAt == nil {
			return bay.Errorf(bay.CodeConflict, "Cannot delete managed cargo %s: managing sandbox %s is still active. Delete the sandbox instead.", id, sb.ID).
				WithDetails(map[string]any{"managed_by_sandbox_id": sb.ID})
		}
		if err != nil && !bay.IsNotFound(err) {
			return internal("Failed to load sandbox", err)
		}
	}
	users, err := s.store.ListSandboxes(ctx, bay.SandboxQuery{CargoID: id})
	if err != nil {
		return internal("Failed to list sandboxes", err)
	}
	if len(users) > 0 {
		ids := make([]string, 0, len(users))
		for _, u := range users {
			ids = append(ids, u.ID)
		}
		return bay.Errorf(bay.CodeConflict, "Cannot delete cargo %s: still referenced by active sandboxes", id).
			WithDetails(map[string]any{"active_sandbox_ids": ids})
	}
	dctx, cancel := detached(ctx, 30*time.Second)
	defer cancel()
	if err := s.DeleteCargoResources(dctx, c); err != nil {
		if bay.IsConflict(err) {
			return bay.Errorf(bay.CodeConflict, "Cannot delete cargo %s: its volume is still in use", id).WithCause(err)
		}
		return internal("Failed to delete cargo", err)
	}
	s.log.Info("cargo deleted", "cargo_id", id, "owner", owner)
	return nil
}
