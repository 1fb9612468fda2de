package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/storesql"
)

func scanJob(r scanner) (*bay.Job, error) {
	var j bay.Job
	var cwd, desc, tags sql.NullString
	var code, started, ended sql.NullInt64
	var created int64
	var arts sql.NullString
	if err := r.Scan(&j.ID, &j.Owner, &j.SandboxID, &j.SessionID, &j.Kind, &j.Command, &cwd, &j.TimeoutSeconds,
		&desc, &tags, &j.Status, &code, &j.Reason, &j.StdoutBytes, &j.StderrBytes, &j.StdoutTruncated,
		&j.StderrTruncated, &created, &started, &ended, &arts); err != nil {
		return nil, err
	}
	if arts.Valid {
		if err := storesql.SetJobArtifacts(&j, []byte(arts.String)); err != nil {
			return nil, err
		}
	}
	j.Cwd, j.Description, j.Tags = ptrString(cwd), ptrString(desc), ptrString(tags)
	if code.Valid {
		c := int(code.Int64)
		j.ExitCode = &c
	}
	j.CreatedAt, j.StartedAt, j.EndedAt = fromMicros(created), ptrTime(started), ptrTime(ended)
	return &j, nil
}

func jobArgs(j *bay.Job) ([]any, error) {
	arts, err := storesql.JobArtifacts(j)
	if err != nil {
		return nil, err
	}
	var code any
	if j.ExitCode != nil {
		code = int64(*j.ExitCode)
	}
	return []any{j.ID, j.Owner, j.SandboxID, j.SessionID, j.Kind, j.Command, nullStringPtr(j.Cwd), j.TimeoutSeconds,
		nullStringPtr(j.Description), nullStringPtr(j.Tags), j.Status, code, j.Reason, j.StdoutBytes, j.StderrBytes,
		boolInt(j.StdoutTruncated), boolInt(j.StderrTruncated), micros(j.CreatedAt), nullMicros(j.StartedAt), nullMicros(j.EndedAt), arts}, nil
}

// GetJob returns the job or an error wrapping ErrNotFound.
func (q queries) GetJob(ctx context.Context, id string) (*bay.Job, error) {
	j, err := scanJob(q.queryRow(ctx, qGetJob, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get job %s: %w", id, bay.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	return j, nil
}

// ListJobs returns one page (newest first) and the total number of matches, from one snapshot
// outside a transaction.
func (q queries) ListJobs(ctx context.Context, f bay.JobQuery) ([]*bay.Job, int, error) {
	if q.db != nil {
		tx, err := q.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return nil, 0, fmt.Errorf("list jobs: %w", err)
		}
		defer tx.Rollback()
		return queries{q: tx, tx: tx, stmts: q.stmts}.ListJobs(ctx, f)
	}
	w := storesql.Jobs(dialect, f)
	var total int
	if err := q.q.QueryRowContext(ctx, `SELECT count(*) FROM jobs`+w.SQL(), w.Args()...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list jobs: count: %w", err)
	}
	limit := int64(-1)
	if f.Limit > 0 {
		limit = int64(f.Limit)
	}
	rows, err := q.q.QueryContext(ctx, `SELECT `+storesql.JobColumns+` FROM jobs`+w.SQL()+
		` ORDER BY created_at DESC, id DESC LIMIT `+w.Arg(limit)+` OFFSET `+w.Arg(max(f.Offset, 0)), w.Args()...)
	if err != nil {
		return nil, 0, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []*bay.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("list jobs: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list jobs: %w", err)
	}
	return out, total, nil
}

// InsertJob inserts j; an existing id wraps ErrConflict.
func (q *txn) InsertJob(ctx context.Context, j *bay.Job) error {
	args, err := jobArgs(j)
	if err != nil {
		return err
	}
	if _, err := q.exec(ctx, qInsertJob, args...); err != nil {
		return classify(err, "insert job %s", j.ID)
	}
	return nil
}

// UpdateJob writes every field of j; a missing row wraps ErrNotFound.
func (q *txn) UpdateJob(ctx context.Context, j *bay.Job) error {
	args, err := jobArgs(j)
	if err != nil {
		return err
	}
	res, err := q.exec(ctx, qUpdateJob, args...)
	return mustAffect(res, err, "update job %s", j.ID)
}

var (
	qGetJob    = prepared(`SELECT ` + storesql.JobColumns + ` FROM jobs WHERE id = ?`)
	qInsertJob = prepared(`INSERT INTO jobs (` + storesql.JobColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	qUpdateJob = prepared(`UPDATE jobs SET ` + storesql.JobUpdateSet(func(n int) string { return "?" + strconv.Itoa(n) }) + ` WHERE id = ?1`)
)
