// Package cargo is bay's cargo service: the persistent workspaces sandboxes mount, external
// ones (created and deleted by their owner) and managed ones (created and deleted with their
// sandbox by the lifecycle service, which uses the volume methods here). It answers domain
// values; the HTTP layer renders them.
//
// Every error returned is a classified *bay.Error (or wraps one); messages are safe for
// clients and causes are logged.
package cargo

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Config holds the service's settings; zero values take the defaults noted.
type Config struct {
	// InstanceID is this bay's GC instance id, written as the bay.instance_id label (default
	// "bay").
	InstanceID string
	// Deployment is the database's deployment id, written as the bay.deployment label ("" =
	// none).
	Deployment string
	// DefaultSizeMB is the size_limit_mb of cargos created without one (default 1024).
	DefaultSizeMB int
}

// Service is the cargo service. Create it with New.
type Service struct {
	store  bay.Store
	driver bay.Driver
	clock  bay.Clock
	log    *slog.Logger
	cfg    Config
}

// New returns a service. clock nil = bay.SystemClock; log nil = discard.
func New(store bay.Store, driver bay.Driver, clock bay.Clock, log *slog.Logger, cfg Config) *Service {
	if cfg.InstanceID == "" {
		cfg.InstanceID = "bay"
	}
	if cfg.DefaultSizeMB <= 0 {
		cfg.DefaultSizeMB = 1024
	}
	if clock == nil {
		clock = bay.SystemClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, driver: driver, clock: clock, log: log.With("component", "cargo"), cfg: cfg}
}

// DefaultSizeMB is the size limit of a cargo created without one.
func (s *Service) DefaultSizeMB() int { return s.cfg.DefaultSizeMB }

// Create creates an external cargo and its volume; if the database write fails the volume is
// removed again. sizeMB nil = the configured default. hook (may be nil) runs in the insert Tx.
func (s *Service) Create(ctx context.Context, owner string, sizeMB *int64, hook bay.TxHook[*bay.Cargo]) (*bay.Cargo, error) {
	now := bay.Stamp(s.clock)
	c := &bay.Cargo{
		ID: bay.NewID(bay.PrefixCargo), Owner: owner, Backend: bay.BackendDockerVolume,
		SizeLimitMB: s.cfg.DefaultSizeMB, CreatedAt: now, LastAccessedAt: now,
	}
	if sizeMB != nil {
		c.SizeLimitMB = int(*sizeMB)
	}
	ref, err := s.CreateVolume(ctx, c)
	if err != nil {
		return nil, err
	}
	c.DriverRef = ref
	err = s.store.Tx(ctx, func(tx bay.Tx) error {
		if err := tx.InsertCargo(ctx, c); err != nil {
			return err
		}
		if hook != nil {
			return hook(ctx, tx, c)
		}
		return nil
	})
	if err != nil {
		s.DeleteVolume(ctx, ref)
		return nil, bay.Classify(err, "Failed to create cargo")
	}
	s.log.InfoContext(ctx, "cargo created", "cargo_id", c.ID, "owner", owner)
	return c, nil
}

// List returns one page of the owner's cargos, managed or external (there is no "all"),
// ordered by id; NextCursor is set iff more exist. limit <= 0 = bay.DefaultPageLimit.
func (s *Service) List(ctx context.Context, owner string, managed bool, limit int, cursor string) (*bay.Page[*bay.Cargo], error) {
	if limit <= 0 {
		limit = bay.DefaultPageLimit
	}
	rows, err := s.store.ListCargos(ctx, bay.CargoQuery{Owner: owner, Managed: &managed, AfterID: cursor, Limit: limit + 1})
	if err != nil {
		return nil, bay.Internal("Failed to list cargos", err)
	}
	out := &bay.Page[*bay.Cargo]{Items: rows}
	if len(rows) > limit {
		out.Items = rows[:limit]
		out.NextCursor = rows[limit-1].ID
	}
	return out, nil
}

func (s *Service) owned(ctx context.Context, r bay.Reader, owner, id string) (*bay.Cargo, error) {
	c, err := r.GetCargo(ctx, id)
	if err != nil {
		if bay.IsNotFound(err) {
			return nil, bay.ErrCargoNotFound(id)
		}
		return nil, bay.Internal("Failed to load cargo", err)
	}
	if c.Owner != owner {
		return nil, bay.ErrCargoNotFound(id)
	}
	return c, nil
}

// Get returns the owner's cargo or not_found.
func (s *Service) Get(ctx context.Context, owner, id string) (*bay.Cargo, error) {
	c, err := s.owned(ctx, s.store, owner, id)
	if err != nil || c.DriverRef == "" {
		return c, err
	}
	// Usage is a courtesy: a driver that cannot answer leaves it unknown.
	if v, err := s.driver.InspectVolume(ctx, c.DriverRef); err == nil {
		c.Usage = &bay.CargoUsage{Enforced: v.SizeBytes > 0, UsedBytes: v.UsedBytes}
	} else {
		s.log.WarnContext(ctx, "inspect cargo volume", "cargo_id", c.ID, "err", err)
	}
	return c, nil
}

// Delete deletes the owner's cargo (volume, then row). An external cargo still used by a
// non-deleted sandbox, or a managed cargo whose sandbox is alive, is a 409 conflict (details
// active_sandbox_ids / managed_by_sandbox_id); a volume still in use by a container is a
// conflict too.
func (s *Service) Delete(ctx context.Context, owner, id string) error {
	c, err := s.owned(ctx, s.store, owner, id)
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
			return bay.Internal("Failed to load sandbox", err)
		}
	}
	users, err := s.store.ListSandboxes(ctx, bay.SandboxQuery{CargoID: id})
	if err != nil {
		return bay.Internal("Failed to list sandboxes", err)
	}
	if len(users) > 0 {
		ids := make([]string, 0, len(users))
		for _, u := range users {
			ids = append(ids, u.ID)
		}
		return bay.Errorf(bay.CodeConflict, "Cannot delete cargo %s: still referenced by active sandboxes", id).
			WithDetails(map[string]any{"active_sandbox_ids": ids})
	}
	dctx, cancel := bay.Detached(ctx, 30*time.Second)
	defer cancel()
	if err := s.DeleteResources(dctx, c); err != nil {
		if bay.IsConflict(err) {
			return bay.Errorf(bay.CodeConflict, "Cannot delete cargo %s: its volume is still in use", id).WithCause(err)
		}
		return bay.Internal("Failed to delete cargo", err)
	}
	s.log.InfoContext(ctx, "cargo deleted", "cargo_id", id, "owner", owner)
	return nil
}

// DeleteResources deletes a cargo's volume and then its row (no reference checks: the GC and
// the delete paths check first). A volume still in use wraps ErrConflict.
func (s *Service) DeleteResources(ctx context.Context, c *bay.Cargo) error {
	ref := c.DriverRef
	if ref == "" {
		ref = bay.VolumeName(c.ID) // lazily created volume, possibly never persisted
	}
	if err := s.driver.DeleteVolume(ctx, ref); err != nil {
		return fmt.Errorf("delete volume %s: %w", ref, err)
	}
	if err := s.store.Tx(ctx, func(tx bay.Tx) error { return tx.DeleteCargo(ctx, c.ID) }); err != nil {
		return fmt.Errorf("delete cargo row %s: %w", c.ID, err)
	}
	return nil
}

// ---- volumes ----

func (s *Service) volumeLabels(c *bay.Cargo) map[string]string {
	managed := "false"
	if c.Managed {
		managed = "true"
	}
	return bay.WithDeployment(map[string]string{
		bay.LabelOwner: c.Owner, bay.LabelCargoID: c.ID, bay.LabelManaged: managed,
		bay.LabelInstanceID: s.cfg.InstanceID, bay.LabelCreatedAt: bay.Stamp(s.clock).Format(time.RFC3339),
	}, s.cfg.Deployment)
}

// CreateVolume creates the cargo's volume (with the labels orphan GC relies on) and returns
// its driver ref.
func (s *Service) CreateVolume(ctx context.Context, c *bay.Cargo) (string, error) {
	ref, err := s.driver.CreateVolume(ctx, bay.VolumeSpec{Name: bay.VolumeName(c.ID), Labels: s.volumeLabels(c),
		SizeBytes: int64(c.SizeLimitMB) << 20})
	if err != nil {
		s.log.ErrorContext(ctx, "create volume", "cargo_id", c.ID, "err", err)
		return "", bay.Internal("Failed to create the cargo volume", fmt.Errorf("create volume %s: %w", bay.VolumeName(c.ID), err))
	}
	return ref, nil
}

// EnsureVolume returns the cargo's driver ref, creating the volume first when it does not
// exist yet (managed cargos created lazily) and persisting the ref.
func (s *Service) EnsureVolume(ctx context.Context, c *bay.Cargo) (string, error) {
	if c.DriverRef != "" {
		return c.DriverRef, nil
	}
	ref, err := s.CreateVolume(ctx, c)
	if err != nil {
		return "", err
	}
	err = s.store.Tx(ctx, func(tx bay.Tx) error {
		cur, err := tx.GetCargo(ctx, c.ID)
		if err != nil {
			return err
		}
		cur.DriverRef = ref
		return tx.UpdateCargo(ctx, cur)
	})
	if err != nil {
		return "", bay.Classify(err, "Failed to record the cargo volume")
	}
	c.DriverRef = ref
	return ref, nil
}

// DeleteVolume removes a volume whose cargo row was never written (a failed create), on a
// detached context; failures are logged.
func (s *Service) DeleteVolume(ctx context.Context, ref string) {
	dctx, cancel := bay.Detached(ctx, 30*time.Second)
	defer cancel()
	if err := s.driver.DeleteVolume(dctx, ref); err != nil {
		s.log.ErrorContext(ctx, "delete volume after a failed create", "volume", ref, "err", err)
	}
}
