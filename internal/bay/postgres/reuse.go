package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// ---- reuse keys ------------------------------------------------------------------------------

// GetReuseKey returns the sandbox id of (owner, key) or an error wrapping ErrNotFound.
func (q queries) GetReuseKey(ctx context.Context, owner, key string) (string, error) {
	var id string
	err := q.q.QueryRow(ctx, `SELECT sandbox_id FROM sandbox_reuse_keys WHERE owner = $1 AND key = $2`, owner, key).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("get reuse key: %w", bay.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("get reuse key: %w", err)
	}
	return id, nil
}

// InsertReuseKey maps (owner, key) to sandboxID; an existing row wraps ErrConflict.
func (q *txn) InsertReuseKey(ctx context.Context, owner, key, sandboxID string) error {
	tag, err := q.q.Exec(ctx, `INSERT INTO sandbox_reuse_keys (owner, key, sandbox_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, owner, key, sandboxID)
	return mustInsert(tag, err, "insert reuse key")
}

// DeleteReuseKey removes (owner, key) if it still names sandboxID.
func (q *txn) DeleteReuseKey(ctx context.Context, owner, key, sandboxID string) error {
	if _, err := q.q.Exec(ctx, `DELETE FROM sandbox_reuse_keys WHERE owner = $1 AND key = $2 AND sandbox_id = $3`, owner, key, sandboxID); err != nil {
		return fmt.Errorf("delete reuse key: %w", err)
	}
	return nil
}
