package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/storesql"
)

// ---- audit records of one-shot executions -----------------------------------------------------

const (
	qGetExecRecord    = `SELECT record FROM sandbox_execs WHERE id = $1`
	qInsertExecRecord = `INSERT INTO sandbox_execs (` + storesql.ExecRecordCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (id) DO NOTHING`
	qUpdateExecRecord = `UPDATE sandbox_execs SET owner = $2, project_id = $3, task_id = $4, status = $5,
created_at = $6, record = $7 WHERE id = $1`
)

func scanExecRecord(r pgx.Row) (*bay.ExecRecord, error) {
	var rec []byte
	if err := r.Scan(&rec); err != nil {
		return nil, err
	}
	return storesql.DecodeExecRecord(rec)
}

// GetExecRecord returns the record or an error wrapping ErrNotFound.
func (q queries) GetExecRecord(ctx context.Context, id string) (*bay.ExecRecord, error) {
	return getOne(q.q.QueryRow(ctx, qGetExecRecord, id), scanExecRecord, "get exec record %s", id)
}

// ListExecRecords returns one page (newest first; Limit 0 = no limit) and the total number of
// matches, from one snapshot outside a transaction.
func (q queries) ListExecRecords(ctx context.Context, f bay.ExecQuery) (out []*bay.ExecRecord, total int, err error) {
	if q.pool != nil {
		err := pgx.BeginTxFunc(ctx, q.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
			func(tx pgx.Tx) (err error) {
				out, total, err = queries{q: tx, d: q.d}.ListExecRecords(ctx, f)
				return err
			})
		if err != nil {
			return nil, 0, fmt.Errorf("list exec records: %w", err)
		}
		return out, total, nil
	}
	w := storesql.ExecRecords(q.d, f)
	if err := q.q.QueryRow(ctx, `SELECT count(*) FROM sandbox_execs`+w.SQL(), w.Args()...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count exec records: %w", err)
	}
	var limit any // NULL: no limit
	if f.Limit > 0 {
		limit = f.Limit
	}
	rows, err := q.q.Query(ctx, `SELECT record FROM sandbox_execs`+w.SQL()+
		` ORDER BY created_at DESC, id DESC LIMIT `+w.Arg(limit)+` OFFSET `+w.Arg(max(f.Offset, 0)), w.Args()...)
	if out, err = collect(rows, err, scanExecRecord); err != nil {
		return nil, 0, fmt.Errorf("list exec records: %w", err)
	}
	return out, total, nil
}

// InsertExecRecord inserts e; an existing id wraps ErrConflict.
func (q *txn) InsertExecRecord(ctx context.Context, e *bay.ExecRecord) error {
	args, err := storesql.ExecRecordArgs(q.d, e)
	if err != nil {
		return err
	}
	tag, err := q.q.Exec(ctx, qInsertExecRecord, args...)
	return mustInsert(tag, err, "insert exec record %s", e.ID)
}

// UpdateExecRecord writes every field of e; a missing row wraps ErrNotFound.
func (q *txn) UpdateExecRecord(ctx context.Context, e *bay.ExecRecord) error {
	args, err := storesql.ExecRecordArgs(q.d, e)
	if err != nil {
		return err
	}
	tag, err := q.q.Exec(ctx, qUpdateExecRecord, args...)
	return mustAffect(tag, err, "update exec record %s", e.ID)
}
