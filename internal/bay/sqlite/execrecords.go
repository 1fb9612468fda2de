package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/storesql"
)

// ---- audit records of one-shot executions -----------------------------------------------------

var (
	qGetExecRecord    = prepared(`SELECT record FROM sandbox_execs WHERE id = ?`)
	qInsertExecRecord = prepared(`INSERT INTO sandbox_execs (` + storesql.ExecRecordCols + `) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	qUpdateExecRecord = prepared(`UPDATE sandbox_execs SET owner = ?, project_id = ?, task_id = ?, status = ?,
created_at = ?, record = ? WHERE id = ?`)
)

// GetExecRecord returns the record or an error wrapping ErrNotFound.
func (q queries) GetExecRecord(ctx context.Context, id string) (*bay.ExecRecord, error) {
	var rec []byte
	err := q.queryRow(ctx, qGetExecRecord, id).Scan(&rec)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get exec record %s: %w", id, bay.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get exec record %s: %w", id, err)
	}
	return storesql.DecodeExecRecord(rec)
}

// ListExecRecords returns one page (newest first; Limit 0 = no limit) and the total number of
// matches, from one snapshot outside a transaction.
func (q queries) ListExecRecords(ctx context.Context, f bay.ExecQuery) ([]*bay.ExecRecord, int, error) {
	if q.db != nil {
		tx, err := q.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return nil, 0, fmt.Errorf("list exec records: %w", err)
		}
		defer tx.Rollback()
		return queries{q: tx, tx: tx, stmts: q.stmts}.ListExecRecords(ctx, f)
	}
	w := storesql.ExecRecords(dialect, f)
	var total int
	if err := q.q.QueryRowContext(ctx, `SELECT count(*) FROM sandbox_execs`+w.SQL(), w.Args()...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list exec records: count: %w", err)
	}
	limit := int64(-1)
	if f.Limit > 0 {
		limit = int64(f.Limit)
	}
	rows, err := q.q.QueryContext(ctx, `SELECT record FROM sandbox_execs`+w.SQL()+
		` ORDER BY created_at DESC, id DESC LIMIT `+w.Arg(limit)+` OFFSET `+w.Arg(max(f.Offset, 0)), w.Args()...)
	if err != nil {
		return nil, 0, fmt.Errorf("list exec records: %w", err)
	}
	defer rows.Close()
	var out []*bay.ExecRecord
	for rows.Next() {
		var rec []byte
		if err := rows.Scan(&rec); err != nil {
			return nil, 0, fmt.Errorf("list exec records: %w", err)
		}
		e, err := storesql.DecodeExecRecord(rec)
		if err != nil {
			return nil, 0, fmt.Errorf("list exec records: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list exec records: %w", err)
	}
	return out, total, nil
}

// InsertExecRecord inserts e; an existing id wraps ErrConflict.
func (q *txn) InsertExecRecord(ctx context.Context, e *bay.ExecRecord) error {
	args, err := storesql.ExecRecordArgs(dialect, e)
	if err != nil {
		return err
	}
	if _, err := q.exec(ctx, qInsertExecRecord, args...); err != nil {
		return classify(err, "insert exec record %s", e.ID)
	}
	return nil
}

// UpdateExecRecord writes every field of e; a missing row wraps ErrNotFound.
func (q *txn) UpdateExecRecord(ctx context.Context, e *bay.ExecRecord) error {
	args, err := storesql.ExecRecordArgs(dialect, e)
	if err != nil {
		return err
	}
	res, err := q.exec(ctx, qUpdateExecRecord, append(args[1:], e.ID)...)
	if err != nil {
		return classify(err, "update exec record %s", e.ID)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("update exec record %s: %w", e.ID, bay.ErrNotFound)
	}
	return nil
}
