package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// The deployment id and the bay instances' heartbeats (migration 0011); the skill versions'
// archives (migration 0012).

var (
	qDeploymentID      = prepared(`SELECT id FROM deployment WHERE singleton = 1`)
	qListBayInstances  = prepared(`SELECT id, boot_id, started_at, heartbeat_at FROM bay_instances ORDER BY id LIMIT ?`)
	qHeartbeatInstance = prepared(`INSERT INTO bay_instances (id, boot_id, started_at, heartbeat_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET boot_id = excluded.boot_id, heartbeat_at = max(heartbeat_at, excluded.heartbeat_at)`)
	qDeleteBayInstance  = prepared(`DELETE FROM bay_instances WHERE id = ? AND heartbeat_at < ?`)
	qGetSkillArchive    = prepared(`SELECT version, sha256, size_bytes, CASE WHEN size_bytes <= ? THEN data END, created_at FROM skill_archives WHERE version = ?`)
	qInsertSkillArchive = prepared(`INSERT INTO skill_archives (version, sha256, size_bytes, data, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (version) DO NOTHING`)
)

// DeploymentID returns the id the database was given by migration 0011.
func (q queries) DeploymentID(ctx context.Context) (string, error) {
	var id string
	if err := q.queryRow(ctx, qDeploymentID).Scan(&id); err != nil {
		return "", fmt.Errorf("read the deployment id: %w", err)
	}
	return id, nil
}

// ListBayInstances returns the heartbeat rows by id.
func (q queries) ListBayInstances(ctx context.Context) ([]*bay.BayInstance, error) {
	rows, err := q.query(ctx, qListBayInstances, bay.MaxBayInstances)
	if err != nil {
		return nil, fmt.Errorf("list bay instances: %w", err)
	}
	defer rows.Close()
	var out []*bay.BayInstance
	for rows.Next() {
		var b bay.BayInstance
		var started, beat int64
		if err := rows.Scan(&b.ID, &b.BootID, &started, &beat); err != nil {
			return nil, fmt.Errorf("list bay instances: %w", err)
		}
		b.StartedAt, b.HeartbeatAt = fromMicros(started), fromMicros(beat)
		out = append(out, &b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list bay instances: %w", err)
	}
	return out, nil
}

// HeartbeatBayInstance records that id runs as bootID at now.
func (q *txn) HeartbeatBayInstance(ctx context.Context, id, bootID string, now time.Time) error {
	if _, err := q.exec(ctx, qHeartbeatInstance, id, bootID, micros(now), micros(now)); err != nil {
		return fmt.Errorf("heartbeat of bay instance %s: %w", id, err)
	}
	return nil
}

// DeleteBayInstance removes id's row if its last heartbeat is before before.
func (q *txn) DeleteBayInstance(ctx context.Context, id string, before time.Time) (bool, error) {
	res, err := q.exec(ctx, qDeleteBayInstance, id, micros(before))
	if err != nil {
		return false, fmt.Errorf("delete bay instance %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("delete bay instance %s: %w", id, err)
	}
	return n > 0, nil
}

// GetSkillArchive returns version's archive, its bytes only when they fit maxBytes.
func (q queries) GetSkillArchive(ctx context.Context, version string, maxBytes int64) (*bay.SkillArchive, error) {
	var a bay.SkillArchive
	var created int64
	err := q.queryRow(ctx, qGetSkillArchive, maxBytes, version).Scan(&a.Version, &a.SHA256, &a.Size, &a.Data, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get skill archive %s: %w", version, bay.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get skill archive %s: %w", version, err)
	}
	a.CreatedAt = fromMicros(created)
	return &a, nil
}

// PutSkillArchive stores a unless its version has an archive already.
func (q *txn) PutSkillArchive(ctx context.Context, a *bay.SkillArchive) error {
	if int64(len(a.Data)) != a.Size {
		return fmt.Errorf("put skill archive %s: size %d, but %d bytes", a.Version, a.Size, len(a.Data))
	}
	if _, err := q.exec(ctx, qInsertSkillArchive, a.Version, a.SHA256, a.Size, a.Data, micros(a.CreatedAt)); err != nil {
		return classify(err, "put skill archive %s", a.Version)
	}
	return nil
}
