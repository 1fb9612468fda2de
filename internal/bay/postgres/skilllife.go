package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/storesql"
)

var _ bay.SkillStore = (*Store)(nil)

// conn adapts the store's queries to the shared skill queries (internal/bay/storesql).
type conn struct{ q querier }

func (c conn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := c.q.Exec(ctx, query, args...)
	if err != nil {
		return 0, classify(err, "write")
	}
	return tag.RowsAffected(), nil
}

func (c conn) Query(ctx context.Context, query string, args ...any) (storesql.Rows, error) {
	rs, err := c.q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgRows{rs}, nil
}

type pgRows struct{ pgx.Rows }

// SkillReads reads the skill tables outside a transaction.
func (s *Store) SkillReads() bay.SkillReader { return storesql.Skills{C: conn{s.pool}, D: s.d} }

// GetBlob returns the owner's blob or an error wrapping ErrNotFound.
func (s *Store) GetBlob(ctx context.Context, owner, id string) (*bay.Blob, error) {
	return s.SkillReads().GetBlob(ctx, owner, id)
}

// PutBlob stores b in its own transaction.
func (s *Store) PutBlob(ctx context.Context, b *bay.Blob) error {
	return s.SkillTx(ctx, func(tx bay.SkillTx) error { return tx.PutBlob(ctx, b) })
}

// SkillTx runs fn in one write transaction of Store.Tx.
func (s *Store) SkillTx(ctx context.Context, fn func(tx bay.SkillTx) error) error {
	return s.Tx(ctx, func(tx bay.Tx) error {
		return fn(storesql.Skills{C: conn{tx.(*txn).q}, D: s.d})
	})
}
