package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/storesql"
)

func scanJob(r pgx.Row) (*bay.Job, error) {
	var j bay.Job
	var code *int32
	var arts *string
	if err := r.Scan(&j.ID, &j.Owner, &j.SandboxID, &j.SessionID, &j.Kind, &j.Command, &j.Cwd, &j.TimeoutSeconds,
		&j.Description, &j.Tags, &j.Status, &code, &j.Reason, &j.StdoutBytes, &j.StderrBytes, &j.StdoutTruncated,
		&j.StderrTruncated, &j.CreatedAt, &j.StartedAt, &j.EndedAt, &arts); err != nil {
		return nil, err
	}
	if arts != nil {
		if err := storesql.SetJobArtifacts(&j, []byte(*arts)); err != nil {
			return nil, err
		}
	}
	if code != nil {
		c := int(*code)
		j.ExitCode = &c
	}
	j.CreatedAt = j.CreatedAt.UTC()
	for _, t := range []*time.Time{j.StartedAt, j.EndedAt} {
		if t != nil {
			*t = t.UTC()
		}
	}
	return &j, nil
}

func jobArgs(j *bay.Job) ([]any, error) {
	arts, err := storesql.JobArtifacts(j)
	if err != nil {
		return nil, err
	}
	var code any
	if j.ExitCode != nil {
		code = int32(*j.ExitCode)
	}
	return []any{j.ID, j.Owner, j.SandboxID, j.SessionID, j.Kind, j.Command, j.Cwd, j.TimeoutSeconds,
		j.Description, j.Tags, j.Status, code, j.Reason, j.StdoutBytes, j.StderrBytes,
		j.StdoutTruncated, j.StderrTruncated, ts(j.CreatedAt), nullTS(j.StartedAt), nullTS(j.EndedAt), arts}, nil
}

// GetJob returns the job or an error wrapping ErrNotFound.
func (q queries) GetJob(ctx context.Context, id string) (*bay.Job, error) {
	return getOne(q.q.QueryRow(ctx, qGetJob, id), scanJob, "get job %s", id)
}

// ListJobs returns one page (newest first) and the total number of matches, from one snapshot
// outside a transaction.
func (q queries) ListJobs(ctx context.Context, f bay.JobQuery) (out []*bay.Job, total int, err error) {
	if q.pool != nil {
		err := pgx.BeginTxFunc(ctx, q.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
			func(tx pgx.Tx) (err error) {
				out, total, err = queries{q: tx, d: q.d}.ListJobs(ctx, f)
				return err
			})
		if err != nil {
			return nil, 0, fmt.Errorf("list jobs: %w", err)
		}
		return out, total, nil
	}
	w := storesql.Jobs(q.d, f)
	if err := q.q.QueryRow(ctx, `SELECT count(*) FROM jobs`+w.SQL(), w.Args()...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count jobs: %w", err)
	}
	var limit any // NULL: no limit
	if f.Limit > 0 {
		limit = f.Limit
	}
	rows, err := q.q.Query(ctx, `SELECT `+storesql.JobColumns+` FROM jobs`+w.SQL()+
		` ORDER BY created_at DESC, id DESC LIMIT `+w.Arg(limit)+` OFFSET `+w.Arg(max(f.Offset, 0)), w.Args()...)
	if out, err = collect(rows, err, scanJob); err != nil {
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
	tag, err := q.q.Exec(ctx, qInsertJob, args...)
	return mustInsert(tag, err, "insert job %s", j.ID)
}

// UpdateJob writes every field of j; a missing row wraps ErrNotFound.
func (q *txn) UpdateJob(ctx context.Context, j *bay.Job) error {
	args, err := jobArgs(j)
	if err != nil {
		return err
	}
	tag, err := q.q.Exec(ctx, qUpdateJob, args...)
	return mustAffect(tag, err, "update job %s", j.ID)
}

var (
	qGetJob    = `SELECT ` + storesql.JobColumns + ` FROM jobs WHERE id = $1`
	qInsertJob = `INSERT INTO jobs (` + storesql.JobColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
		$11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21) ON CONFLICT DO NOTHING`
	qUpdateJob = `UPDATE jobs SET ` + storesql.JobUpdateSet(func(n int) string { return "$" + strconv.Itoa(n) }) + ` WHERE id = $1`
)
