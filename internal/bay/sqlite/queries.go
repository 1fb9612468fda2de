package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/storesql"
)

func init() {
	// bay_lower folds case with Go's Unicode tables (SQLite's lower() folds ASCII only), so the
	// history tag filter is case-insensitive like PostgreSQL's ILIKE.
	msqlite.MustRegisterDeterministicScalarFunction("bay_lower", 1, func(_ *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		switch v := args[0].(type) {
		case nil:
			return nil, nil
		case string:
			return strings.ToLower(v), nil
		case []byte:
			return strings.ToLower(string(v)), nil
		default:
			return v, nil
		}
	})
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// queries implements every bay.Reader method (and, through txn, every bay.Tx method) over q:
// the read pool (Store) or a write transaction (txn).
type queries struct {
	q     querier
	tx    *sql.Tx              // set inside a transaction
	db    *sql.DB              // set outside: reads of several statements take a snapshot on it
	stmts map[string]*sql.Stmt // the prepared fixed-text statements of q's pool, by text
}

// fixedQueries lists every statement with a fixed text; Open prepares them once per pool.
var fixedQueries []string

// prepared registers a fixed statement text (at package initialisation) and returns it.
func prepared(query string) string {
	fixedQueries = append(fixedQueries, query)
	return query
}

// prepareAll prepares the fixed statements on db (SELECTs only when readOnly). database/sql
// prepares each again on any new connection of the pool when it is first used there.
func prepareAll(ctx context.Context, db *sql.DB, readOnly bool) (map[string]*sql.Stmt, error) {
	m := make(map[string]*sql.Stmt, len(fixedQueries))
	for _, query := range fixedQueries {
		if readOnly && !strings.HasPrefix(query, "SELECT") {
			continue
		}
		st, err := db.PrepareContext(ctx, query)
		if err != nil {
			closeAll(m)
			return nil, fmt.Errorf("prepare %q: %w", query, err)
		}
		m[query] = st
	}
	return m, nil
}

func closeAll(m map[string]*sql.Stmt) {
	for _, st := range m {
		st.Close()
	}
}

// stmt returns the prepared statement of query bound to q's transaction, or nil.
func (q queries) stmt(ctx context.Context, query string) *sql.Stmt {
	st := q.stmts[query]
	if st != nil && q.tx != nil {
		st = q.tx.StmtContext(ctx, st) // reuses the statement already prepared on the write connection
	}
	return st
}

func (q queries) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := q.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.q.ExecContext(ctx, query, args...)
}

func (q queries) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := q.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.q.QueryContext(ctx, query, args...)
}

func (q queries) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := q.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.q.QueryRowContext(ctx, query, args...)
}

// ---- value conversion -----------------------------------------------------------------------

func micros(t time.Time) int64 { return t.UnixMicro() }

func nullMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func ptrTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullStringPtr(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func ptrString(v sql.NullString) *string {
	if !v.Valid {
		return nil
	}
	s := v.String
	return &s
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// classify wraps an insert/update error: unique and primary-key violations wrap ErrConflict,
// foreign-key violations ErrNotFound (the referenced row is missing).
func classify(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%s: %v: %w", what, err, bay.ErrConflict)
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return fmt.Errorf("%s: referenced row missing: %v: %w", what, err, bay.ErrNotFound)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// mustAffect turns "no row changed" into ErrNotFound.
func mustAffect(res sql.Result, err error, format string, args ...any) error {
	if err != nil {
		return classify(err, format, args...)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return classify(err, format, args...)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), bay.ErrNotFound)
	}
	return nil
}

type scanner interface{ Scan(dest ...any) error }

// dialect writes the shared filters (internal/bay/storesql) for SQLite.
var dialect = &storesql.Dialect{
	Placeholder: func(int) string { return "?" },
	Time:        func(t time.Time) any { return micros(t) },
	Bool:        func(b bool) any { return boolInt(b) },
	TagMatch: func(w *storesql.Where, pattern string) string {
		return `bay_lower(tags) LIKE ` + w.Arg(strings.ToLower(pattern)) + ` ESCAPE '\'`
	},
}

// ---- sandboxes ------------------------------------------------------------------------------

const sandboxCols = `id, owner, profile_id, cargo_id, current_session_id, expires_at, idle_expires_at,
deleted_at, created_at, last_active_at, version, is_warm, warm_state, warm_ready_at, warm_rotate_at,
warm_claimed_at, warm_attempts, warm_next_attempt_at, warm_instance_id, network`

func scanSandbox(r scanner) (*bay.Sandbox, error) {
	var s bay.Sandbox
	var cargo, sess sql.NullString
	var exp, idle, del, ready, rotate, claimed, next sql.NullInt64
	var created, active int64
	var network string
	if err := r.Scan(&s.ID, &s.Owner, &s.ProfileID, &cargo, &sess, &exp, &idle, &del, &created, &active,
		&s.Version, &s.IsWarm, &s.WarmState, &ready, &rotate, &claimed, &s.WarmAttempts, &next, &s.WarmInstanceID, &network); err != nil {
		return nil, err
	}
	if err := storesql.DecodeNetwork(&s, network); err != nil {
		return nil, err
	}
	s.CargoID, s.CurrentSessionID = cargo.String, sess.String
	s.ExpiresAt, s.IdleExpiresAt, s.DeletedAt = ptrTime(exp), ptrTime(idle), ptrTime(del)
	s.CreatedAt, s.LastActiveAt = fromMicros(created), fromMicros(active)
	s.WarmReadyAt, s.WarmRotateAt, s.WarmClaimedAt, s.WarmNextAttemptAt = ptrTime(ready), ptrTime(rotate), ptrTime(claimed), ptrTime(next)
	return &s, nil
}

// GetSandbox returns the sandbox (deleted rows included) or an error wrapping ErrNotFound.
func (q queries) GetSandbox(ctx context.Context, id string) (*bay.Sandbox, error) {
	s, err := scanSandbox(q.queryRow(ctx, qGetSandbox, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get sandbox %s: %w", id, bay.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get sandbox %s: %w", id, err)
	}
	return s, nil
}

// ListSandboxes returns the matching sandboxes ordered by id.
func (q queries) ListSandboxes(ctx context.Context, f bay.SandboxQuery) ([]*bay.Sandbox, error) {
	w := storesql.Sandboxes(dialect, f)
	query := `SELECT ` + sandboxCols + ` FROM sandboxes` + w.SQL() + ` ORDER BY id`
	if f.Limit > 0 {
		query += ` LIMIT ` + w.Arg(f.Limit)
	}
	rows, err := q.q.QueryContext(ctx, query, w.Args()...)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	defer rows.Close()
	var out []*bay.Sandbox
	for rows.Next() {
		s, err := scanSandbox(rows)
		if err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	return out, nil
}

// CountSandboxes counts the sandboxes ListSandboxes would return without its Limit.
func (q queries) CountSandboxes(ctx context.Context, f bay.SandboxQuery) (int, error) {
	w := storesql.Sandboxes(dialect, f)
	var n int
	if err := q.q.QueryRowContext(ctx, `SELECT count(*) FROM sandboxes`+w.SQL(), w.Args()...).Scan(&n); err != nil {
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
	_, err := q.exec(ctx, qInsertSandbox,
		s.ID, s.Owner, s.ProfileID, nullString(s.CargoID), nullString(s.CurrentSessionID),
		nullMicros(s.ExpiresAt), nullMicros(s.IdleExpiresAt), nullMicros(s.DeletedAt),
		micros(s.CreatedAt), micros(s.LastActiveAt), s.Version, boolInt(s.IsWarm), s.WarmState,
		nullMicros(s.WarmReadyAt), nullMicros(s.WarmRotateAt), nullMicros(s.WarmClaimedAt), s.WarmAttempts,
		nullMicros(s.WarmNextAttemptAt), s.WarmInstanceID, storesql.EncodeNetwork(s))
	if err != nil {
		return classify(err, "insert sandbox %s", s.ID)
	}
	return nil
}

// UpdateSandbox writes every field of s if the stored version equals s.Version, then sets
// s.Version to the new version. Mismatch wraps ErrConflict; a missing row ErrNotFound.
func (q *txn) UpdateSandbox(ctx context.Context, s *bay.Sandbox) error {
	res, err := q.exec(ctx, qUpdateSandbox,
		s.Owner, s.ProfileID, nullString(s.CargoID), nullString(s.CurrentSessionID),
		nullMicros(s.ExpiresAt), nullMicros(s.IdleExpiresAt), nullMicros(s.DeletedAt), micros(s.CreatedAt),
		micros(s.LastActiveAt), boolInt(s.IsWarm), s.WarmState, nullMicros(s.WarmReadyAt),
		nullMicros(s.WarmRotateAt), nullMicros(s.WarmClaimedAt), s.WarmAttempts, nullMicros(s.WarmNextAttemptAt),
		s.WarmInstanceID, storesql.EncodeNetwork(s), s.ID, s.Version)
	if err != nil {
		return classify(err, "update sandbox %s", s.ID)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("update sandbox %s: %w", s.ID, err)
	}
	if n == 0 {
		var stored int64
		err := q.queryRow(ctx, qSandboxVersion, s.ID).Scan(&stored)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("update sandbox %s: %w", s.ID, bay.ErrNotFound)
		case err != nil:
			return fmt.Errorf("update sandbox %s: %w", s.ID, err)
		}
		return fmt.Errorf("update sandbox %s: version %d is stale (stored %d): %w", s.ID, s.Version, stored, bay.ErrConflict)
	}
	s.Version++
	return nil
}

// ClaimWarmSandbox hands the oldest available warm sandbox of c.ProfileID to c.Owner, and its
// cargo too, in one statement each inside the caller's transaction.
func (q *txn) ClaimWarmSandbox(ctx context.Context, c bay.WarmClaim) (*bay.Sandbox, error) {
	now := micros(c.Now)
	s, err := scanSandbox(q.queryRow(ctx, qClaimWarmSandbox,
		now, c.Owner, nullMicros(c.ExpiresAt), nullMicros(c.IdleExpiresAt), now, c.ProfileID, bay.WarmAvailable))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("claim warm sandbox of profile %s: %w", c.ProfileID, bay.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("claim warm sandbox of profile %s: %w", c.ProfileID, err)
	}
	if s.CargoID != "" {
		if _, err := q.exec(ctx, qTransferCargo, c.Owner, s.CargoID); err != nil {
			return nil, fmt.Errorf("claim warm sandbox %s: transfer cargo %s: %w", s.ID, s.CargoID, err)
		}
	}
	return s, nil
}

// ---- sessions -------------------------------------------------------------------------------

const sessionCols = `id, sandbox_id, profile_id, runtime_type, container_id, endpoint, containers,
desired_state, observed_state, instance_id, created_at, started_at, last_observed_at, runtime_token`

func scanSession(r scanner) (*bay.Session, error) {
	var s bay.Session
	var containers sql.NullString
	var runtimeType, containerID, endpoint string
	var created int64
	var started, observed sql.NullInt64
	if err := r.Scan(&s.ID, &s.SandboxID, &s.ProfileID, &runtimeType, &containerID, &endpoint, &containers,
		&s.DesiredState, &s.ObservedState, &s.InstanceID, &created, &started, &observed, &s.RuntimeToken); err != nil {
		return nil, err
	}
	var cj []byte
	if containers.Valid {
		cj = []byte(containers.String)
	}
	cs, err := storesql.SessionContainers(cj, runtimeType, containerID, endpoint)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", s.ID, err)
	}
	s.Containers = cs
	s.CreatedAt, s.StartedAt, s.LastObservedAt = fromMicros(created), ptrTime(started), ptrTime(observed)
	return &s, nil
}

// GetSession returns the session or an error wrapping ErrNotFound.
func (q queries) GetSession(ctx context.Context, id string) (*bay.Session, error) {
	s, err := scanSession(q.queryRow(ctx, qGetSession, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get session %s: %w", id, bay.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get session %s: %w", id, err)
	}
	return s, nil
}

// ListSessions returns the matching sessions ordered by created_at, id.
func (q queries) ListSessions(ctx context.Context, f bay.SessionQuery) ([]*bay.Session, error) {
	w := storesql.Sessions(dialect, f)
	rows, err := q.q.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions`+w.SQL()+` ORDER BY created_at, id`, w.Args()...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []*bay.Session
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// InsertSession inserts s. An existing id wraps ErrConflict; an unknown sandbox ErrNotFound.
func (q *txn) InsertSession(ctx context.Context, s *bay.Session) error {
	cj, rt, cid, ep, err := storesql.SessionColumns(s)
	if err != nil {
		return fmt.Errorf("insert session %s: %w", s.ID, err)
	}
	_, err = q.exec(ctx, qInsertSession,
		s.ID, s.SandboxID, s.ProfileID, rt, cid, ep, cj, string(s.DesiredState),
		string(s.ObservedState), s.InstanceID, micros(s.CreatedAt), nullMicros(s.StartedAt), nullMicros(s.LastObservedAt),
		s.RuntimeToken)
	if err != nil {
		return classify(err, "insert session %s", s.ID)
	}
	return nil
}

// UpdateSession writes every field of s; a missing row wraps ErrNotFound.
func (q *txn) UpdateSession(ctx context.Context, s *bay.Session) error {
	cj, rt, cid, ep, err := storesql.SessionColumns(s)
	if err != nil {
		return fmt.Errorf("update session %s: %w", s.ID, err)
	}
	res, err := q.exec(ctx, qUpdateSession,
		s.SandboxID, s.ProfileID, rt, cid, ep, cj, string(s.DesiredState),
		string(s.ObservedState), s.InstanceID, micros(s.CreatedAt), nullMicros(s.StartedAt), nullMicros(s.LastObservedAt),
		s.RuntimeToken, s.ID)
	return mustAffect(res, err, "update session %s", s.ID)
}

// DeleteSession deletes the session; a missing one is success.
func (q *txn) DeleteSession(ctx context.Context, id string) error {
	if _, err := q.exec(ctx, qDeleteSession, id); err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	return nil
}

// ---- cargos ---------------------------------------------------------------------------------

const cargoCols = `id, owner, backend, driver_ref, managed, managed_by_sandbox_id, size_limit_mb, created_at, last_accessed_at`

func scanCargo(r scanner) (*bay.Cargo, error) {
	var c bay.Cargo
	var by sql.NullString
	var created, accessed int64
	if err := r.Scan(&c.ID, &c.Owner, &c.Backend, &c.DriverRef, &c.Managed, &by, &c.SizeLimitMB, &created, &accessed); err != nil {
		return nil, err
	}
	c.ManagedBySandboxID = by.String
	c.CreatedAt, c.LastAccessedAt = fromMicros(created), fromMicros(accessed)
	return &c, nil
}

// GetCargo returns the cargo or an error wrapping ErrNotFound.
func (q queries) GetCargo(ctx context.Context, id string) (*bay.Cargo, error) {
	c, err := scanCargo(q.queryRow(ctx, qGetCargo, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get cargo %s: %w", id, bay.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get cargo %s: %w", id, err)
	}
	return c, nil
}

// ListCargos returns the matching cargos ordered by id.
func (q queries) ListCargos(ctx context.Context, f bay.CargoQuery) ([]*bay.Cargo, error) {
	w := storesql.Cargos(dialect, f)
	query := `SELECT ` + cargoCols + ` FROM cargos` + w.SQL() + ` ORDER BY id`
	if f.Limit > 0 {
		query += ` LIMIT ` + w.Arg(f.Limit)
	}
	rows, err := q.q.QueryContext(ctx, query, w.Args()...)
	if err != nil {
		return nil, fmt.Errorf("list cargos: %w", err)
	}
	defer rows.Close()
	var out []*bay.Cargo
	for rows.Next() {
		c, err := scanCargo(rows)
		if err != nil {
			return nil, fmt.Errorf("list cargos: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list cargos: %w", err)
	}
	return out, nil
}

// InsertCargo inserts c; an existing id wraps ErrConflict.
func (q *txn) InsertCargo(ctx context.Context, c *bay.Cargo) error {
	_, err := q.exec(ctx, qInsertCargo,
		c.ID, c.Owner, c.Backend, c.DriverRef, boolInt(c.Managed), nullString(c.ManagedBySandboxID), c.SizeLimitMB,
		micros(c.CreatedAt), micros(c.LastAccessedAt))
	if err != nil {
		return classify(err, "insert cargo %s", c.ID)
	}
	return nil
}

// UpdateCargo writes every field of c; a missing row wraps ErrNotFound.
func (q *txn) UpdateCargo(ctx context.Context, c *bay.Cargo) error {
	res, err := q.exec(ctx, qUpdateCargo,
		c.Owner, c.Backend, c.DriverRef, boolInt(c.Managed), nullString(c.ManagedBySandboxID), c.SizeLimitMB,
		micros(c.CreatedAt), micros(c.LastAccessedAt), c.ID)
	return mustAffect(res, err, "update cargo %s", c.ID)
}

// DeleteCargo deletes the cargo row; a missing one is success.
func (q *txn) DeleteCargo(ctx context.Context, id string) error {
	if _, err := q.exec(ctx, qDeleteCargo, id); err != nil {
		return fmt.Errorf("delete cargo %s: %w", id, err)
	}
	return nil
}

// ---- execution history ----------------------------------------------------------------------

const executionCols = `id, owner, sandbox_id, session_id, exec_type, code, success, execution_time_ms, output,
error, payload_ref, description, tags, notes, learn_enabled, learn_status, learn_error, learn_processed_at, created_at,
images`

func scanExecution(r scanner) (*bay.Execution, error) {
	var e bay.Execution
	var sess, output, errStr, payload, desc, tags, notes, lstatus, lerr, images sql.NullString
	var lproc sql.NullInt64
	var created int64
	if err := r.Scan(&e.ID, &e.Owner, &e.SandboxID, &sess, &e.ExecType, &e.Code, &e.Success, &e.ExecutionTimeMS,
		&output, &errStr, &payload, &desc, &tags, &notes, &e.LearnEnabled, &lstatus, &lerr, &lproc, &created, &images); err != nil {
		return nil, err
	}
	var err error
	if e.Images, err = storesql.DecodeImages(ptrString(images)); err != nil {
		return nil, fmt.Errorf("execution %s: %w", e.ID, err)
	}
	e.SessionID = sess.String
	e.Output, e.Error, e.PayloadRef = ptrString(output), ptrString(errStr), ptrString(payload)
	e.Description, e.Tags, e.Notes = ptrString(desc), ptrString(tags), ptrString(notes)
	e.LearnStatus, e.LearnError, e.LearnProcessedAt = ptrString(lstatus), ptrString(lerr), ptrTime(lproc)
	e.CreatedAt = fromMicros(created)
	return &e, nil
}

func executionArgs(e *bay.Execution) []any {
	return []any{e.Owner, e.SandboxID, nullString(e.SessionID), e.ExecType, e.Code, boolInt(e.Success),
		e.ExecutionTimeMS, nullStringPtr(e.Output), nullStringPtr(e.Error), nullStringPtr(e.PayloadRef),
		nullStringPtr(e.Description), nullStringPtr(e.Tags), nullStringPtr(e.Notes), boolInt(e.LearnEnabled),
		nullStringPtr(e.LearnStatus), nullStringPtr(e.LearnError), nullMicros(e.LearnProcessedAt), micros(e.CreatedAt),
		nullStringPtr(storesql.EncodeImages(e.Images))}
}

// GetExecution returns the execution or an error wrapping ErrNotFound.
func (q queries) GetExecution(ctx context.Context, id string) (*bay.Execution, error) {
	e, err := scanExecution(q.queryRow(ctx, qGetExecution, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get execution %s: %w", id, bay.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get execution %s: %w", id, err)
	}
	return e, nil
}

// ListExecutions returns one page (newest first: created_at DESC, id DESC; Limit 0 = no limit)
// and the total number of matches. Outside a transaction both come from one snapshot.
func (q queries) ListExecutions(ctx context.Context, f bay.ExecutionQuery) ([]*bay.Execution, int, error) {
	if q.db != nil {
		tx, err := q.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return nil, 0, fmt.Errorf("list executions: %w", err)
		}
		defer tx.Rollback()
		return queries{q: tx, tx: tx, stmts: q.stmts}.ListExecutions(ctx, f)
	}
	w := storesql.Executions(dialect, f)
	var total int
	if err := q.q.QueryRowContext(ctx, `SELECT count(*) FROM execution_history`+w.SQL(), w.Args()...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list executions: count: %w", err)
	}
	limit := int64(-1)
	if f.Limit > 0 {
		limit = int64(f.Limit)
	}
	query := `SELECT ` + executionCols + ` FROM execution_history` + w.SQL() +
		` ORDER BY created_at DESC, id DESC LIMIT ` + w.Arg(limit) + ` OFFSET ` + w.Arg(max(f.Offset, 0))
	rows, err := q.q.QueryContext(ctx, query, w.Args()...)
	if err != nil {
		return nil, 0, fmt.Errorf("list executions: %w", err)
	}
	defer rows.Close()
	var out []*bay.Execution
	for rows.Next() {
		e, err := scanExecution(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("list executions: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list executions: %w", err)
	}
	return out, total, nil
}

// InsertExecution inserts e; an existing id wraps ErrConflict.
func (q *txn) InsertExecution(ctx context.Context, e *bay.Execution) error {
	_, err := q.exec(ctx, qInsertExecution, append([]any{e.ID}, executionArgs(e)...)...)
	if err != nil {
		return classify(err, "insert execution %s", e.ID)
	}
	return nil
}

// UpdateExecution writes every field of e; a missing row wraps ErrNotFound.
func (q *txn) UpdateExecution(ctx context.Context, e *bay.Execution) error {
	res, err := q.exec(ctx, qUpdateExecution, append(executionArgs(e), e.ID)...)
	return mustAffect(res, err, "update execution %s", e.ID)
}

// ---- idempotency ----------------------------------------------------------------------------

// GetIdempotency returns the record (expired or not: the caller compares ExpiresAt) or an
// error wrapping ErrNotFound.
func (q queries) GetIdempotency(ctx context.Context, owner, key string) (*bay.IdempotencyRecord, error) {
	r := bay.IdempotencyRecord{Owner: owner, Key: key}
	var created, expires int64
	err := q.queryRow(ctx, qGetIdempotency, owner, key).
		Scan(&r.Fingerprint, &r.StatusCode, &r.Response, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get idempotency record %s/%s: %w", owner, key, bay.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get idempotency record %s/%s: %w", owner, key, err)
	}
	r.CreatedAt, r.ExpiresAt = fromMicros(created), fromMicros(expires)
	return &r, nil
}

// PutIdempotency inserts r. A stored record for (owner, key) still valid at r.CreatedAt
// (expires_at >= r.CreatedAt) wraps ErrConflict; an expired one is replaced.
func (q *txn) PutIdempotency(ctx context.Context, r *bay.IdempotencyRecord) error {
	resp := r.Response
	if resp == nil {
		resp = []byte{}
	}
	res, err := q.exec(ctx, qPutIdempotency,
		r.Owner, r.Key, r.Fingerprint, r.StatusCode, resp, micros(r.CreatedAt), micros(r.ExpiresAt))
	if err != nil {
		return classify(err, "put idempotency record %s/%s", r.Owner, r.Key)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("put idempotency record %s/%s: %w", r.Owner, r.Key, err)
	}
	if n == 0 {
		return fmt.Errorf("put idempotency record %s/%s: an unexpired record exists: %w", r.Owner, r.Key, bay.ErrConflict)
	}
	return nil
}

// DeleteIdempotency deletes the record; a missing one is success.
func (q *txn) DeleteIdempotency(ctx context.Context, owner, key string) error {
	if _, err := q.exec(ctx, qDeleteIdempotency, owner, key); err != nil {
		return fmt.Errorf("delete idempotency record %s/%s: %w", owner, key, err)
	}
	return nil
}

// DeleteExpiredIdempotency deletes the records with expires_at < now and returns how many.
func (q *txn) DeleteExpiredIdempotency(ctx context.Context, now time.Time) (int, error) {
	res, err := q.exec(ctx, qDeleteExpiredIdempotency, micros(now))
	if err != nil {
		return 0, fmt.Errorf("delete expired idempotency records: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete expired idempotency records: %w", err)
	}
	return int(n), nil
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
	rows, err := q.query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	var out []*bay.APIKey
	for rows.Next() {
		var k bay.APIKey
		var created int64
		var used, revoked sql.NullInt64
		if err := rows.Scan(&k.ID, &k.KeyHash, &k.KeyPrefix, &k.Owner, &k.Active, &created, &k.Name, &used, &revoked); err != nil {
			return nil, fmt.Errorf("list api keys: %w", err)
		}
		k.CreatedAt, k.LastUsedAt, k.RevokedAt = fromMicros(created), ptrTime(used), ptrTime(revoked)
		out = append(out, &k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// InsertAPIKey inserts k; an existing id or key hash wraps ErrConflict.
func (q *txn) InsertAPIKey(ctx context.Context, k *bay.APIKey) error {
	_, err := q.exec(ctx, qInsertAPIKey, k.ID, k.KeyHash, k.KeyPrefix, k.Owner, boolInt(k.Active), micros(k.CreatedAt),
		k.Name, nullMicros(k.LastUsedAt), nullMicros(k.RevokedAt))
	if err != nil {
		return classify(err, "insert api key %s", k.ID)
	}
	return nil
}

// RevokeAPIKey deactivates key id; a missing id wraps ErrNotFound.
func (q *txn) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	res, err := q.exec(ctx, qRevokeAPIKey, micros(at), id)
	return mustAffect(res, err, "revoke api key %s", id)
}

// TouchAPIKey moves key id's last use forward to at.
func (q *txn) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	if _, err := q.exec(ctx, qTouchAPIKey, micros(at), id); err != nil {
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
	res, err := q.exec(ctx, qAcquireLease,
		name, holder, micros(now.Add(ttl)), micros(now))
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return n > 0, nil
}

// ReleaseLease drops the lease if holder holds it; otherwise it does nothing.
func (q *txn) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := q.exec(ctx, qReleaseLease, name, holder); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// Statements with a fixed text, prepared once per connection at Open.
var (
	qGetSandbox    = prepared(`SELECT ` + sandboxCols + ` FROM sandboxes WHERE id = ?`)
	qInsertSandbox = prepared(`INSERT INTO sandboxes (` + sandboxCols + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	qUpdateSandbox = prepared(`UPDATE sandboxes SET owner = ?, profile_id = ?, cargo_id = ?,
		current_session_id = ?, expires_at = ?, idle_expires_at = ?, deleted_at = ?, created_at = ?,
		last_active_at = ?, version = version + 1, is_warm = ?, warm_state = ?, warm_ready_at = ?,
		warm_rotate_at = ?, warm_claimed_at = ?, warm_attempts = ?, warm_next_attempt_at = ?,
		warm_instance_id = ?, network = ?
		WHERE id = ? AND version = ?`)
	qSandboxVersion   = prepared(`SELECT version FROM sandboxes WHERE id = ?`)
	qClaimWarmSandbox = prepared(`UPDATE sandboxes SET is_warm = 0, warm_claimed_at = ?,
		owner = ?, expires_at = ?, idle_expires_at = ?, last_active_at = ?, version = version + 1
		WHERE id = (SELECT id FROM sandboxes
			WHERE is_warm = 1 AND profile_id = ? AND warm_state = ? AND deleted_at IS NULL
			ORDER BY warm_ready_at, id LIMIT 1)
		RETURNING ` + sandboxCols)
	qTransferCargo = prepared(`UPDATE cargos SET owner = ? WHERE id = ?`)
	qGetSession    = prepared(`SELECT ` + sessionCols + ` FROM sessions WHERE id = ?`)
	qInsertSession = prepared(`INSERT INTO sessions (` + sessionCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	qUpdateSession = prepared(`UPDATE sessions SET sandbox_id = ?, profile_id = ?, runtime_type = ?,
		container_id = ?, endpoint = ?, containers = ?, desired_state = ?, observed_state = ?, instance_id = ?,
		created_at = ?, started_at = ?, last_observed_at = ?, runtime_token = ? WHERE id = ?`)
	qDeleteSession = prepared(`DELETE FROM sessions WHERE id = ?`)
	qGetCargo      = prepared(`SELECT ` + cargoCols + ` FROM cargos WHERE id = ?`)
	qInsertCargo   = prepared(`INSERT INTO cargos (` + cargoCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	qUpdateCargo   = prepared(`UPDATE cargos SET owner = ?, backend = ?, driver_ref = ?, managed = ?,
		managed_by_sandbox_id = ?, size_limit_mb = ?, created_at = ?, last_accessed_at = ? WHERE id = ?`)
	qDeleteCargo     = prepared(`DELETE FROM cargos WHERE id = ?`)
	qGetExecution    = prepared(`SELECT ` + executionCols + ` FROM execution_history WHERE id = ?`)
	qInsertExecution = prepared(`INSERT INTO execution_history (` + executionCols + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	qUpdateExecution = prepared(`UPDATE execution_history SET owner = ?, sandbox_id = ?, session_id = ?,
		exec_type = ?, code = ?, success = ?, execution_time_ms = ?, output = ?, error = ?, payload_ref = ?,
		description = ?, tags = ?, notes = ?, learn_enabled = ?, learn_status = ?, learn_error = ?,
		learn_processed_at = ?, created_at = ?, images = ? WHERE id = ?`)
	qGetIdempotency = prepared(`SELECT fingerprint, status_code, response, created_at, expires_at
		FROM idempotency_keys WHERE owner = ? AND key = ?`)
	qPutIdempotency = prepared(`INSERT INTO idempotency_keys
		(owner, key, fingerprint, status_code, response, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (owner, key) DO UPDATE SET fingerprint = excluded.fingerprint,
			status_code = excluded.status_code, response = excluded.response,
			created_at = excluded.created_at, expires_at = excluded.expires_at
		WHERE idempotency_keys.expires_at < excluded.created_at`)
	qDeleteIdempotency        = prepared(`DELETE FROM idempotency_keys WHERE owner = ? AND key = ?`)
	qDeleteExpiredIdempotency = prepared(`DELETE FROM idempotency_keys WHERE expires_at < ?`)
	qListAPIKeys              = prepared(`SELECT ` + apiKeyCols + ` FROM api_keys WHERE active = 1 ORDER BY created_at, id`)
	qListAllAPIKeys           = prepared(`SELECT ` + apiKeyCols + ` FROM api_keys ORDER BY created_at, id`)
	qInsertAPIKey             = prepared(`INSERT INTO api_keys (` + apiKeyCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	qRevokeAPIKey             = prepared(`UPDATE api_keys SET active = 0, revoked_at = coalesce(revoked_at, ?) WHERE id = ?`)
	qTouchAPIKey              = prepared(`UPDATE api_keys SET last_used_at = ?1 WHERE id = ?2 AND (last_used_at IS NULL OR last_used_at < ?1)`)
	qAcquireLease             = prepared(`INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leases.holder = excluded.holder OR leases.expires_at <= ?`)
	qReleaseLease = prepared(`DELETE FROM leases WHERE name = ? AND holder = ?`)
)
