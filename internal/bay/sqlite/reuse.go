package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// ---- reuse keys ------------------------------------------------------------------------------

// GetReuseKey returns the sandbox id of (owner, key) or an error wrapping ErrNotFound.
func (q queries) GetReuseKey(ctx context.Context, owner, key string) (string, error) {
	var id string
	err := q.queryRow(ctx, qGetReuseKey, owner, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("get reuse key: %w", bay.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("get reuse key: %w", err)
	}
	return id, nil
}

// InsertReuseKey maps (owner, key) to sandboxID; an existing row wraps ErrConflict.
func (q *txn) InsertReuseKey(ctx context.Context, owner, key, sandboxID string) error {
	if _, err := q.exec(ctx, qInsertReuseKey, owner, key, sandboxID); err != nil {
		return classify(err, "insert reuse key")
	}
	return nil
}

// DeleteReuseKey removes (owner, key) if it still names sandboxID.
func (q *txn) DeleteReuseKey(ctx context.Context, owner, key, sandboxID string) error {
	if _, err := q.exec(ctx, qDeleteReuseKey, owner, key, sandboxID); err != nil {
		return fmt.Errorf("delete reuse key: %w", err)
	}
	return nil
}

var (
	qGetReuseKey    = prepared(`SELECT sandbox_id FROM sandbox_reuse_keys WHERE owner = ? AND key = ?`)
	qInsertReuseKey = prepared(`INSERT INTO sandbox_reuse_keys (owner, key, sandbox_id) VALUES (?, ?, ?)`)
	qDeleteReuseKey = prepared(`DELETE FROM sandbox_reuse_keys WHERE owner = ? AND key = ? AND sandbox_id = ?`)
)
