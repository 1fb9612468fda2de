package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/storesql"
)

// querier is what *pgxpool.Pool and pgx.Tx have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// queries implements every bay.Reader method (and, through txn, every bay.Tx method) over q:
// the pool (Store) or a write transaction (txn). pgx prepares each statement text once per
// connection and reuses it.
type queries struct {
	q    querier
	pool *pgxpool.Pool     // set outside a transaction: reads of several statements take a snapshot on it
	d    *storesql.Dialect // the filters' SQL, with this database's case fold
}

// newDialect writes the shared filters (internal/bay/storesql) for PostgreSQL; fold is the
// fmt format of the case fold of the tag filter (see detectFold). The server folds both the
// column and the pattern, so they fold alike.
func newDialect(fold string) *storesql.Dialect {
	return &storesql.Dialect{
		Placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
		Time:        func(t time.Time) any { return ts(t) },
		Bool:        func(b bool) any { return b },
		TagMatch: func(w *storesql.Where, pattern string) string {
			return fmt.Sprintf(fold, "tags") + ` LIKE ` + fmt.Sprintf(fold, w.Arg(pattern)+"::text") + ` ESCAPE '\'`
		},
	}
}

// ---- value conversion -----------------------------------------------------------------------

// ts is a time as written: truncated to the microsecond (the column's precision; PostgreSQL
// would round).
func ts(t time.Time) time.Time { return t.Truncate(time.Microsecond) }

func nullTS(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ts(*t)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// nullBytes is a bytea argument of an optional string.
func nullBytes(p *string) any {
	if p == nil {
		return nil
	}
	return []byte(*p)
}

// bytesString is an optional string read from a bytea.
func bytesString(b *[]byte) *string {
	if b == nil {
		return nil
	}
	s := string(*b)
	return &s
}

// classify wraps an error of a write: unique violations wrap ErrConflict, foreign-key
// violations ErrNotFound (the referenced row is missing).
func classify(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505": // unique_violation
			return fmt.Errorf("%s: %v: %w", what, err, bay.ErrConflict)
		case "23503": // foreign_key_violation
			return fmt.Errorf("%s: referenced row missing: %v: %w", what, err, bay.ErrNotFound)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// mustAffect turns "no row changed" into ErrNotFound.
func mustAffect(tag pgconn.CommandTag, err error, format string, args ...any) error {
	if err != nil {
		return classify(err, format, args...)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), bay.ErrNotFound)
	}
	return nil
}

// mustInsert turns an INSERT ... ON CONFLICT DO NOTHING that inserted nothing into ErrConflict.
func mustInsert(tag pgconn.CommandTag, err error, format string, args ...any) error {
	if err != nil {
		return classify(err, format, args...)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: already exists: %w", fmt.Sprintf(format, args...), bay.ErrConflict)
	}
	return nil
}

// collect scans every row of rows with scan.
func collect[T any](rows pgx.Rows, err error, scan func(pgx.Row) (*T, error)) ([]*T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// getOne scans the single row of a point query; no row wraps ErrNotFound.
func getOne[T any](row pgx.Row, scan func(pgx.Row) (*T, error), format string, args ...any) (*T, error) {
	v, err := scan(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), bay.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
	}
	return v, nil
}

// ---- sandboxes ------------------------------------------------------------------------------

const sandboxCols = `id, owner, profile_id, cargo_id, current_session_id, expires_at, idle_expires_at,
deleted_at, created_at, last_active_at, version, is_warm, warm_state, warm_ready_at, warm_rotate_at,
warm_claimed_at, warm_attempts, warm_next_attempt_at, warm_instance_id, network`

func scanSandbox(r pgx.Row) (*bay.Sandbox, error) {
	var s bay.Sandbox
	var cargo, sess *string
	var network string
	if err := r.Scan(&s.ID, &s.Owner, &s.ProfileID, &cargo, &sess, &s.ExpiresAt, &s.IdleExpiresAt, &s.DeletedAt,
		&s.CreatedAt, &s.LastActiveAt, &s.Version, &s.IsWarm, &s.WarmState, &s.WarmReadyAt, &s.WarmRotateAt,
		&s.WarmClaimedAt, &s.WarmAttempts, &s.WarmNextAttemptAt, &s.WarmInstanceID, &network); err != nil {
		return nil, err
	}
	if err := storesql.DecodeNetwork(&s, network); err != nil {
		return nil, err
	}
	s.CargoID, s.CurrentSessionID = deref(cargo), deref(sess)
	return &s, nil
}

// GetSandbox returns the sandbox (deleted rows included) or an error wrapping ErrNotFound.
func (q queries) GetSandbox(ctx context.Context, id string) (*bay.Sandbox, error) {
	return getOne(q.q.QueryRow(ctx, qGetSandbox, id), scanSandbox, "get sandbox %s", id)
}

// ListSandboxes returns the matching sandboxes ordered by id.
func (q queries) ListSandboxes(ctx context.Context, f bay.SandboxQuery) ([]*bay.Sandbox, error) {
	w := storesql.Sandboxes(q.d, f)
	query := `SELECT ` + sandboxCols + ` FROM sandboxes` + w.SQL() + ` ORDER BY id`
	if f.Limit > 0 {
		query += ` LIMIT ` + w.Arg(f.Limit)
	}
	rows, err := q.q.Query(ctx, query, w.Args()...)
	out, err := collect(rows, err, scanSandbox)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	return out, nil
}

// CountSandboxes counts the sandboxes ListSandboxes would return without its Limit.
func (q queries) CountSandboxes(ctx context.Context, f bay.SandboxQuery) (int, error) {
	w := storesql.Sandboxes(q.d, f)
	var n int
	if err := q.q.QueryRow(ctx, `SELECT count(*) FROM sandboxes`+w.SQL(), w.Args()...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sandboxes: %w", err)
	}
	return n, nil
}

// InsertSandbox inserts s; a zero s.Version is stored (and set) as 1. An existing id wraps
// ErrConflict.
func (q *txn) InsertSandbox(ctx context.Context, s *bay.Sandbox) error {
	if s.Version == 0 {
		s.Version = 1
	}
	tag, err := q.q.Exec(ctx, qInsertSandbox,
		s.ID, s.Owner, s.ProfileID, nullString(s.CargoID), nullString(s.CurrentSessionID),
		nullTS(s.ExpiresAt), nullTS(s.IdleExpiresAt), nullTS(s.DeletedAt), ts(s.CreatedAt), ts(s.LastActiveAt),
		s.Version, s.IsWarm, s.WarmState, nullTS(s.WarmReadyAt), nullTS(s.WarmRotateAt), nullTS(s.WarmClaimedAt),
		s.WarmAttempts, nullTS(s.WarmNextAttemptAt), s.WarmInstanceID, storesql.EncodeNetwork(s))
	return mustInsert(tag, err, "insert sandbox %s", s.ID)
}

// UpdateSandbox writes every field of s if the stored version equals s.Version, then sets
// s.Version to the new version. Mismatch wraps ErrConflict; a missing row ErrNotFound.
func (q *txn) UpdateSandbox(ctx context.Context, s *bay.Sandbox) error {
	var stored int64
	var updated bool
	err := q.q.QueryRow(ctx, qUpdateSandbox,
		s.Owner, s.ProfileID, nullString(s.CargoID), nullString(s.CurrentSessionID),
		nullTS(s.ExpiresAt), nullTS(s.IdleExpiresAt), nullTS(s.DeletedAt), ts(s.CreatedAt), ts(s.LastActiveAt),
		s.IsWarm, s.WarmState, nullTS(s.WarmReadyAt), nullTS(s.WarmRotateAt), nullTS(s.WarmClaimedAt),
		s.WarmAttempts, nullTS(s.WarmNextAttemptAt), s.WarmInstanceID, storesql.EncodeNetwork(s), s.ID, s.Version).Scan(&stored, &updated)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("update sandbox %s: %w", s.ID, bay.ErrNotFound)
	case err != nil:
		return classify(err, "update sandbox %s", s.ID)
	case !updated:
		return fmt.Errorf("update sandbox %s: version %d is stale (stored %d): %w", s.ID, s.Version, stored, bay.ErrConflict)
	}
	s.Version = stored
	return nil
}

// ClaimWarmSandbox hands the oldest available warm sandbox of c.ProfileID to c.Owner, and its
// cargo too, in one statement.
func (q *txn) ClaimWarmSandbox(ctx context.Context, c bay.WarmClaim) (*bay.Sandbox, error) {
	s, err := scanSandbox(q.q.QueryRow(ctx, qClaimWarmSandbox,
		ts(c.Now), c.Owner, nullTS(c.ExpiresAt), nullTS(c.IdleExpiresAt), c.ProfileID, bay.WarmAvailable))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("claim warm sandbox of profile %s: %w", c.ProfileID, bay.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("claim warm sandbox of profile %s: %w", c.ProfileID, err)
	}
	return s, nil
}

// ---- sessions -------------------------------------------------------------------------------

const sessionCols = `id, sandbox_id, profile_id, runtime_type, container_id, endpoint, containers,
desired_state, observed_state, instance_id, created_at, started_at, last_observed_at, runtime_token`

func scanSession(r pgx.Row) (*bay.Session, error) {
	var s bay.Session
	var containers []byte
	var runtimeType, containerID, endpoint string
	if err := r.Scan(&s.ID, &s.SandboxID, &s.ProfileID, &runtimeType, &containerID, &endpoint, &containers,
		&s.DesiredState, &s.ObservedState, &s.InstanceID, &s.CreatedAt, &s.StartedAt, &s.LastObservedAt,
		&s.RuntimeToken); err != nil {
		return nil, err
	}
	cs, err := storesql.SessionContainers(containers, runtimeType, containerID, endpoint)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", s.ID, err)
	}
	s.Containers = cs
	return &s, nil
}

func sessionArgs(s *bay.Session) ([]any, error) {
	cj, rt, cid, ep, err := storesql.SessionColumns(s)
	if err != nil {
		return nil, err
	}
	return []any{s.ID, s.SandboxID, s.ProfileID, rt, cid, ep, cj,
		string(s.DesiredState), string(s.ObservedState), s.InstanceID, ts(s.CreatedAt), nullTS(s.StartedAt),
		nullTS(s.LastObservedAt), s.RuntimeToken}, nil
}

// GetSession returns the session or an error wrapping ErrNotFound.
func (q queries) GetSession(ctx context.Context, id string) (*bay.Session, error) {
	return getOne(q.q.QueryRow(ctx, qGetSession, id), scanSession, "get session %s", id)
}

// ListSessions returns the matching sessions ordered by created_at, id.
func (q queries) ListSessions(ctx context.Context, f bay.SessionQuery) ([]*bay.Session, error) {
	w := storesql.Sessions(q.d, f)
	rows, err := q.q.Query(ctx, `SELECT `+sessionCols+` FROM sessions`+w.SQL()+` ORDER BY created_at, id`, w.Args()...)
	out, err := collect(rows, err, scanSession)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// InsertSession inserts s. An existing id wraps ErrConflict; an unknown sandbox ErrNotFound.
// Neither aborts the transaction: the statement inserts nothing instead of failing.
func (q *txn) InsertSession(ctx context.Context, s *bay.Session) error {
	args, err := sessionArgs(s)
	if err != nil {
		return fmt.Errorf("insert session %s: %w", s.ID, err)
	}
	var inserted, sandboxExists bool
	if err := q.q.QueryRow(ctx, qInsertSession, args...).Scan(&inserted, &sandboxExists); err != nil {
		return classify(err, "insert session %s", s.ID)
	}
	switch {
	case inserted:
		return nil
	case !sandboxExists:
		return fmt.Errorf("insert session %s: sandbox %s: %w", s.ID, s.SandboxID, bay.ErrNotFound)
	}
	return fmt.Errorf("insert session %s: already exists: %w", s.ID, bay.ErrConflict)
}

// UpdateSession writes every field of s; a missing row wraps ErrNotFound.
func (q *txn) UpdateSession(ctx context.Context, s *bay.Session) error {
	args, err := sessionArgs(s)
	if err != nil {
		return fmt.Errorf("update session %s: %w", s.ID, err)
	}
	tag, err := q.q.Exec(ctx, qUpdateSession, args...)
	return mustAffect(tag, err, "update session %s", s.ID)
}

// DeleteSession deletes the session; a missing one is success.
func (q *txn) DeleteSession(ctx context.Context, id string) error {
	if _, err := q.q.Exec(ctx, qDeleteSession, id); err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	return nil
}

// ---- cargos ---------------------------------------------------------------------------------

const cargoCols = `id, owner, backend, driver_ref, managed, managed_by_sandbox_id, size_limit_mb, created_at, last_accessed_at`

func scanCargo(r pgx.Row) (*bay.Cargo, error) {
	var c bay.Cargo
	var by *string
	if err := r.Scan(&c.ID, &c.Owner, &c.Backend, &c.DriverRef, &c.Managed, &by, &c.SizeLimitMB,
		&c.CreatedAt, &c.LastAccessedAt); err != nil {
		return nil, err
	}
	c.ManagedBySandboxID = deref(by)
	return &c, nil
}

func cargoArgs(c *bay.Cargo) []any {
	return []any{c.ID, c.Owner, c.Backend, c.DriverRef, c.Managed, nullString(c.ManagedBySandboxID), c.SizeLimitMB,
		ts(c.CreatedAt), ts(c.LastAccessedAt)}
}

// GetCargo returns the cargo or an error wrapping ErrNotFound.
func (q queries) GetCargo(ctx context.Context, id string) (*bay.Cargo, error) {
	return getOne(q.q.QueryRow(ctx, qGetCargo, id), scanCargo, "get cargo %s", id)
}

// ListCargos returns the matching cargos ordered by id.
func (q queries) ListCargos(ctx context.Context, f bay.CargoQuery) ([]*bay.Cargo, error) {
	w := storesql.Cargos(q.d, f)
	query := `SELECT ` + cargoCols + ` FROM cargos` + w.SQL() + ` ORDER BY id`
	if f.Limit > 0 {
		query += ` LIMIT ` + w.Arg(f.Limit)
	}
	rows, err := q.q.Query(ctx, query, w.Args()...)
	out, err := collect(rows, err, scanCargo)
	if err != nil {
		return nil, fmt.Errorf("list cargos: %w", err)
	}
	return out, nil
}

// InsertCargo inserts c; an existing id wraps ErrConflict.
func (q *txn) InsertCargo(ctx context.Context, c *bay.Cargo) error {
	tag, err := q.q.Exec(ctx, qInsertCargo, cargoArgs(c)...)
	return mustInsert(tag, err, "insert cargo %s", c.ID)
}

// UpdateCargo writes every field of c; a missing row wraps ErrNotFound.
func (q *txn) UpdateCargo(ctx context.Context, c *bay.Cargo) error {
	tag, err := q.q.Exec(ctx, qUpdateCargo, cargoArgs(c)...)
	return mustAffect(tag, err, "update cargo %s", c.ID)
}

// DeleteCargo deletes the cargo row; a missing one is success.
func (q *txn) DeleteCargo(ctx context.Context, id string) error {
	if _, err := q.q.Exec(ctx, qDeleteCargo, id); err != nil {
		return fmt.Errorf("delete cargo %s: %w", id, err)
	}
	return nil
}

// ---- execution history ----------------------------------------------------------------------

const executionCols = `id, owner, sandbox_id, session_id, exec_type, code, success, execution_time_ms, output,
error, payload_ref, description, tags, notes, learn_enabled, learn_status, learn_error, learn_processed_at, created_at,
images`

func scanExecution(r pgx.Row) (*bay.Execution, error) {
	var e bay.Execution
	var sess, images *string
	var code []byte
	var output, errOut *[]byte
	if err := r.Scan(&e.ID, &e.Owner, &e.SandboxID, &sess, &e.ExecType, &code, &e.Success, &e.ExecutionTimeMS,
		&output, &errOut, &e.PayloadRef, &e.Description, &e.Tags, &e.Notes, &e.LearnEnabled, &e.LearnStatus,
		&e.LearnError, &e.LearnProcessedAt, &e.CreatedAt, &images); err != nil {
		return nil, err
	}
	var err error
	if e.Images, err = storesql.DecodeImages(images); err != nil {
		return nil, fmt.Errorf("execution %s: %w", e.ID, err)
	}
	e.SessionID, e.Code = deref(sess), string(code)
	e.Output, e.Error = bytesString(output), bytesString(errOut)
	return &e, nil
}

func executionArgs(e *bay.Execution) []any {
	return []any{e.ID, e.Owner, e.SandboxID, nullString(e.SessionID), e.ExecType, []byte(e.Code), e.Success,
		e.ExecutionTimeMS, nullBytes(e.Output), nullBytes(e.Error), e.PayloadRef, e.Description, e.Tags, e.Notes,
		e.LearnEnabled, e.LearnStatus, e.LearnError, nullTS(e.LearnProcessedAt), ts(e.CreatedAt), storesql.EncodeImages(e.Images)}
}

// GetExecution returns the execution or an error wrapping ErrNotFound.
func (q queries) GetExecution(ctx context.Context, id string) (*bay.Execution, error) {
	return getOne(q.q.QueryRow(ctx, qGetExecution, id), scanExecution, "get execution %s", id)
}

// ListExecutions returns one page (newest first: created_at DESC, id DESC; Limit 0 = no limit)
// and the total number of matches. Outside a transaction both come from one snapshot.
func (q queries) ListExecutions(ctx context.Context, f bay.ExecutionQuery) (out []*bay.Execution, total int, err error) {
	if q.pool != nil {
		err := pgx.BeginTxFunc(ctx, q.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
			func(tx pgx.Tx) (err error) {
				out, total, err = queries{q: tx, d: q.d}.ListExecutions(ctx, f)
				return err
			})
		if err != nil {
			return nil, 0, fmt.Errorf("list executions: %w", err)
		}
		return out, total, nil
	}
	w := storesql.Executions(q.d, f)
	if err := q.q.QueryRow(ctx, `SELECT count(*) FROM execution_history`+w.SQL(), w.Args()...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count executions: %w", err)
	}
	var limit any // NULL: no limit
	if f.Limit > 0 {
		limit = f.Limit
	}
	query := `SELECT ` + executionCols + ` FROM execution_history` + w.SQL() +
		` ORDER BY created_at DESC, id DESC LIMIT ` + w.Arg(limit) + ` OFFSET ` + w.Arg(max(f.Offset, 0))
	rows, err := q.q.Query(ctx, query, w.Args()...)
	if out, err = collect(rows, err, scanExecution); err != nil {
		return nil, 0, fmt.Errorf("list executions: %w", err)
	}
	return out, total, nil
}

// InsertExecution inserts e; an existing id wraps ErrConflict.
func (q *txn) InsertExecution(ctx context.Context, e *bay.Execution) error {
	tag, err := q.q.Exec(ctx, qInsertExecution, executionArgs(e)...)
	return mustInsert(tag, err, "insert execution %s", e.ID)
}

// UpdateExecution writes every field of e; a missing row wraps ErrNotFound.
func (q *txn) UpdateExecution(ctx context.Context, e *bay.Execution) error {
	tag, err := q.q.Exec(ctx, qUpdateExecution, executionArgs(e)...)
	return mustAffect(tag, err, "update execution %s", e.ID)
}

// ---- idempotency ----------------------------------------------------------------------------

// GetIdempotency returns the record (expired or not: the caller compares ExpiresAt) or an
// error wrapping ErrNotFound.
func (q queries) GetIdempotency(ctx context.Context, owner, key string) (*bay.IdempotencyRecord, error) {
	return getOne(q.q.QueryRow(ctx, qGetIdempotency, owner, key), func(r pgx.Row) (*bay.IdempotencyRecord, error) {
		rec := bay.IdempotencyRecord{Owner: owner, Key: key}
		var status int32
		if err := r.Scan(&rec.Fingerprint, &status, &rec.Response, &rec.CreatedAt, &rec.ExpiresAt); err != nil {
			return nil, err
		}
		rec.StatusCode = int(status)
		return &rec, nil
	}, "get idempotency record %s/%s", owner, key)
}

// PutIdempotency inserts r. A stored record for (owner, key) still valid at r.CreatedAt
// (expires_at >= r.CreatedAt) wraps ErrConflict; an expired one is replaced.
func (q *txn) PutIdempotency(ctx context.Context, r *bay.IdempotencyRecord) error {
	resp := r.Response
	if resp == nil {
		resp = []byte{}
	}
	tag, err := q.q.Exec(ctx, qPutIdempotency,
		r.Owner, r.Key, r.Fingerprint, int32(r.StatusCode), resp, ts(r.CreatedAt), ts(r.ExpiresAt))
	if err != nil {
		return classify(err, "put idempotency record %s/%s", r.Owner, r.Key)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("put idempotency record %s/%s: an unexpired record exists: %w", r.Owner, r.Key, bay.ErrConflict)
	}
	return nil
}

// DeleteIdempotency deletes the record; a missing one is success.
func (q *txn) DeleteIdempotency(ctx context.Context, owner, key string) error {
	if _, err := q.q.Exec(ctx, qDeleteIdempotency, owner, key); err != nil {
		return fmt.Errorf("delete idempotency record %s/%s: %w", owner, key, err)
	}
	return nil
}

// DeleteExpiredIdempotency deletes the records with expires_at < now and returns how many.
func (q *txn) DeleteExpiredIdempotency(ctx context.Context, now time.Time) (int, error) {
	tag, err := q.q.Exec(ctx, qDeleteExpiredIdempotency, ts(now))
	if err != nil {
		return 0, fmt.Errorf("delete expired idempotency records: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// ---- API keys -------------------------------------------------------------------------------

// apiKeyCols are the columns of api_keys in the order the queries read and write them.
const apiKeyCols = `id, key_hash, key_prefix, owner, active, created_at, name, last_used_at, revoked_at`

// ListAPIKeys returns the active keys ordered by created_at, id.
func (q queries) ListAPIKeys(ctx context.Context) ([]*bay.APIKey, error) {
	return q.listAPIKeys(ctx, qListAPIKeys)
}

// ListAllAPIKeys returns every key, revoked ones included, ordered by created_at, id.
func (q queries) ListAllAPIKeys(ctx context.Context) ([]*bay.APIKey, error) {
	return q.listAPIKeys(ctx, qListAllAPIKeys)
}

func (q queries) listAPIKeys(ctx context.Context, query string) ([]*bay.APIKey, error) {
	rows, err := q.q.Query(ctx, query)
	out, err := collect(rows, err, func(r pgx.Row) (*bay.APIKey, error) {
		var k bay.APIKey
		err := r.Scan(&k.ID, &k.KeyHash, &k.KeyPrefix, &k.Owner, &k.Active, &k.CreatedAt, &k.Name, &k.LastUsedAt, &k.RevokedAt)
		k.CreatedAt = k.CreatedAt.UTC()
		if k.LastUsedAt != nil {
			*k.LastUsedAt = k.LastUsedAt.UTC()
		}
		if k.RevokedAt != nil {
			*k.RevokedAt = k.RevokedAt.UTC()
		}
		return &k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// InsertAPIKey inserts k; an existing id or key hash wraps ErrConflict.
func (q *txn) InsertAPIKey(ctx context.Context, k *bay.APIKey) error {
	tag, err := q.q.Exec(ctx, qInsertAPIKey, k.ID, k.KeyHash, k.KeyPrefix, k.Owner, k.Active, ts(k.CreatedAt),
		k.Name, nullTS(k.LastUsedAt), nullTS(k.RevokedAt))
	return mustInsert(tag, err, "insert api key %s", k.ID)
}

// RevokeAPIKey deactivates key id; a missing id wraps ErrNotFound.
func (q *txn) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	tag, err := q.q.Exec(ctx, qRevokeAPIKey, ts(at), id)
	return mustAffect(tag, err, "revoke api key %s", id)
}

// TouchAPIKey moves key id's last use forward to at.
func (q *txn) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	if _, err := q.q.Exec(ctx, qTouchAPIKey, ts(at), id); err != nil {
		return fmt.Errorf("touch api key %s: %w", id, err)
	}
	return nil
}

// ---- leases ---------------------------------------------------------------------------------

// AcquireLease takes the lease if it is free or expired (expires_at <= now), renews it if
// holder already holds it, and returns false when another holder's lease is unexpired.
func (q *txn) AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, fmt.Errorf("acquire lease %s: ttl %v is not positive", name, ttl)
	}
	tag, err := q.q.Exec(ctx, qAcquireLease, name, holder, ts(now.Add(ttl)), ts(now))
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return tag.RowsAffected() > 0, nil
}

// ReleaseLease drops the lease if holder holds it; otherwise it does nothing.
func (q *txn) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := q.q.Exec(ctx, qReleaseLease, name, holder); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// Statements with a fixed text (pgx prepares each once per connection).
const (
	qGetSandbox    = `SELECT ` + sandboxCols + ` FROM sandboxes WHERE id = $1`
	qInsertSandbox = `INSERT INTO sandboxes (` + sandboxCols + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
		ON CONFLICT DO NOTHING`
	// One statement reports both outcomes: the new version when the row was at $20, else the
	// stored version (no row at all: missing).
	qUpdateSandbox = `WITH u AS (UPDATE sandboxes SET owner = $1, profile_id = $2, cargo_id = $3,
		current_session_id = $4, expires_at = $5, idle_expires_at = $6, deleted_at = $7, created_at = $8,
		last_active_at = $9, version = version + 1, is_warm = $10, warm_state = $11, warm_ready_at = $12,
		warm_rotate_at = $13, warm_claimed_at = $14, warm_attempts = $15, warm_next_attempt_at = $16,
		warm_instance_id = $17, network = $18
		WHERE id = $19 AND version = $20 RETURNING version)
		SELECT version, true FROM u
		UNION ALL SELECT version, false FROM sandboxes WHERE id = $19 AND NOT EXISTS (SELECT 1 FROM u)`
	// The oldest ready sandbox (NULL ready times first, as SQLite orders them), skipping rows a
	// concurrent claim holds; its cargo changes owner in the same statement.
	qClaimWarmSandbox = `WITH s AS (UPDATE sandboxes SET is_warm = false, warm_claimed_at = $1,
		owner = $2, expires_at = $3, idle_expires_at = $4, last_active_at = $1, version = version + 1
		WHERE id = (SELECT id FROM sandboxes
			WHERE is_warm AND profile_id = $5 AND warm_state = $6 AND deleted_at IS NULL
			ORDER BY warm_ready_at NULLS FIRST, id LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING ` + sandboxCols + `),
		c AS (UPDATE cargos SET owner = $2 FROM s WHERE cargos.id = s.cargo_id)
		SELECT ` + sandboxCols + ` FROM s`
	qGetSession = `SELECT ` + sessionCols + ` FROM sessions WHERE id = $1`
	// Inserts nothing (instead of failing) for a duplicate id or an unknown sandbox, and says
	// which.
	qInsertSession = `WITH sb AS (SELECT EXISTS (SELECT 1 FROM sandboxes WHERE id = $2::text) AS ok),
		i AS (INSERT INTO sessions (` + sessionCols + `)
			SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::jsonb, $8::text, $9::text,
				$10::text, $11::timestamptz, $12::timestamptz, $13::timestamptz, $14::text
			FROM sb WHERE sb.ok
			ON CONFLICT DO NOTHING RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM i), (SELECT ok FROM sb)`
	qUpdateSession = `UPDATE sessions SET sandbox_id = $2, profile_id = $3, runtime_type = $4,
		container_id = $5, endpoint = $6, containers = $7, desired_state = $8, observed_state = $9, instance_id = $10,
		created_at = $11, started_at = $12, last_observed_at = $13, runtime_token = $14 WHERE id = $1`
	qDeleteSession = `DELETE FROM sessions WHERE id = $1`
	qGetCargo      = `SELECT ` + cargoCols + ` FROM cargos WHERE id = $1`
	qInsertCargo   = `INSERT INTO cargos (` + cargoCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT DO NOTHING`
	qUpdateCargo = `UPDATE cargos SET owner = $2, backend = $3, driver_ref = $4, managed = $5,
		managed_by_sandbox_id = $6, size_limit_mb = $7, created_at = $8, last_accessed_at = $9 WHERE id = $1`
	qDeleteCargo     = `DELETE FROM cargos WHERE id = $1`
	qGetExecution    = `SELECT ` + executionCols + ` FROM execution_history WHERE id = $1`
	qInsertExecution = `INSERT INTO execution_history (` + executionCols + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
		ON CONFLICT DO NOTHING`
	qUpdateExecution = `UPDATE execution_history SET owner = $2, sandbox_id = $3, session_id = $4,
		exec_type = $5, code = $6, success = $7, execution_time_ms = $8, output = $9, error = $10, payload_ref = $11,
		description = $12, tags = $13, notes = $14, learn_enabled = $15, learn_status = $16, learn_error = $17,
		learn_processed_at = $18, created_at = $19, images = $20 WHERE id = $1`
	qGetIdempotency = `SELECT fingerprint, status_code, response, created_at, expires_at
		FROM idempotency_keys WHERE owner = $1 AND key = $2`
	qPutIdempotency = `INSERT INTO idempotency_keys
		(owner, key, fingerprint, status_code, response, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (owner, key) DO UPDATE SET fingerprint = excluded.fingerprint,
			status_code = excluded.status_code, response = excluded.response,
			created_at = excluded.created_at, expires_at = excluded.expires_at
		WHERE idempotency_keys.expires_at < excluded.created_at`
	qDeleteIdempotency        = `DELETE FROM idempotency_keys WHERE owner = $1 AND key = $2`
	qDeleteExpiredIdempotency = `DELETE FROM idempotency_keys WHERE expires_at < $1`
	qListAPIKeys              = `SELECT ` + apiKeyCols + ` FROM api_keys WHERE active ORDER BY created_at, id`
	qListAllAPIKeys           = `SELECT ` + apiKeyCols + ` FROM api_keys ORDER BY created_at, id`
	qInsertAPIKey             = `INSERT INTO api_keys (` + apiKeyCols + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`
	qRevokeAPIKey = `UPDATE api_keys SET active = false, revoked_at = coalesce(revoked_at, $1) WHERE id = $2`
	qTouchAPIKey  = `UPDATE api_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $1)`
	qAcquireLease = `INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leases.holder = excluded.holder OR leases.expires_at <= $4`
	qReleaseLease = `DELETE FROM leases WHERE name = $1 AND holder = $2`
)
