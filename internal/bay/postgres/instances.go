package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// The deployment id and the bay instances' heartbeats (migration 0011); the skill versions'
// archives (migration 0012).

const (
	qDeploymentID      = `SELECT id FROM deployment WHERE singleton = 1`
	qListBayInstances  = `SELECT id, boot_id, started_at, heartbeat_at FROM bay_instances ORDER BY id LIMIT $1`
	qHeartbeatInstance = `INSERT INTO bay_instances (id, boot_id, started_at, heartbeat_at) VALUES ($1, $2, $3, $3)
		ON CONFLICT (id) DO UPDATE SET boot_id = excluded.boot_id,
		heartbeat_at = greatest(bay_instances.heartbeat_at, excluded.heartbeat_at)`
	qDeleteBayInstance  = `DELETE FROM bay_instances WHERE id = $1 AND heartbeat_at < $2`
	qGetSkillArchive    = `SELECT version, sha256, size_bytes, CASE WHEN size_bytes <= $1 THEN data END, created_at FROM skill_archives WHERE version = $2`
	qInsertSkillArchive = `INSERT INTO skill_archives (version, sha256, size_bytes, data, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (version) DO NOTHING`
)

// DeploymentID returns the id the database was given by migration 0011.
func (q queries) DeploymentID(ctx context.Context) (string, error) {
	var id string
	if err := q.q.QueryRow(ctx, qDeploymentID).Scan(&id); err != nil {
		return "", fmt.Errorf("read the deployment id: %w", err)
	}
	return id, nil
}

// ListBayInstances returns the heartbeat rows by id.
func (q queries) ListBayInstances(ctx context.Context) ([]*bay.BayInstance, error) {
	rows, err := q.q.Query(ctx, qListBayInstances, bay.MaxBayInstances)
	out, err := collect(rows, err, func(r pgx.Row) (*bay.BayInstance, error) {
		var b bay.BayInstance
		if err := r.Scan(&b.ID, &b.BootID, &b.StartedAt, &b.HeartbeatAt); err != nil {
			return nil, err
		}
		b.StartedAt, b.HeartbeatAt = b.StartedAt.UTC(), b.HeartbeatAt.UTC()
		return &b, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list bay instances: %w", err)
	}
	return out, nil
}

// HeartbeatBayInstance records that id runs as bootID at now.
func (q *txn) HeartbeatBayInstance(ctx context.Context, id, bootID string, now time.Time) error {
	if _, err := q.q.Exec(ctx, qHeartbeatInstance, id, bootID, ts(now)); err != nil {
		return fmt.Errorf("heartbeat of bay instance %s: %w", id, err)
	}
	return nil
}

// DeleteBayInstance removes id's row if its last heartbeat is before before.
func (q *txn) DeleteBayInstance(ctx context.Context, id string, before time.Time) (bool, error) {
	tag, err := q.q.Exec(ctx, qDeleteBayInstance, id, ts(before))
	if err != nil {
		return false, fmt.Errorf("delete bay instance %s: %w", id, err)
	}
	return tag.RowsAffected() > 0, nil
}

// GetSkillArchive returns version's archive, its bytes only when they fit maxBytes.
func (q queries) GetSkillArchive(ctx context.Context, version string, maxBytes int64) (*bay.SkillArchive, error) {
	return getOne(q.q.QueryRow(ctx, qGetSkillArchive, maxBytes, version), func(r pgx.Row) (*bay.SkillArchive, error) {
		var a bay.SkillArchive
		if err := r.Scan(&a.Version, &a.SHA256, &a.Size, &a.Data, &a.CreatedAt); err != nil {
			return nil, err
		}
		a.CreatedAt = a.CreatedAt.UTC()
		return &a, nil
	}, "get skill archive %s", version)
}

// PutSkillArchive stores a unless its version has an archive already.
func (q *txn) PutSkillArchive(ctx context.Context, a *bay.SkillArchive) error {
	if int64(len(a.Data)) != a.Size {
		return fmt.Errorf("put skill archive %s: size %d, but %d bytes", a.Version, a.Size, len(a.Data))
	}
	if _, err := q.q.Exec(ctx, qInsertSkillArchive, a.Version, a.SHA256, a.Size, a.Data, ts(a.CreatedAt)); err != nil {
		return classify(err, "put skill archive %s", a.Version)
	}
	return nil
}
