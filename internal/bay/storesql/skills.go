package storesql

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Conn is what the skill queries need of one store's connection or transaction. Exec returns
// the number of rows changed; errors of writes are classified by the store (unique violations
// wrap bay.ErrConflict). Statements are written with "?" and rebound with the Dialect.
type Conn interface {
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// Rows is a result set.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Skills implements bay.SkillTx (and so bay.SkillReader and bay.BlobStore) over one Conn, for
// both stores: the stores differ in placeholders and in how times and booleans are passed,
// which D says; times are scanned through NullTime, which reads either representation.
type Skills struct {
	C Conn
	D *Dialect
}

var _ bay.SkillTx = Skills{}

// bind rewrites the "?" placeholders of query in the dialect's syntax.
func (s Skills) bind(query string) string {
	if s.D.Placeholder(1) == "?" {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString(s.D.Placeholder(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (s Skills) exec(ctx context.Context, query string, args ...any) (int64, error) {
	return s.C.Exec(ctx, s.bind(query), args...)
}

func (s Skills) query(ctx context.Context, query string, args ...any) (Rows, error) {
	return s.C.Query(ctx, s.bind(query), args...)
}

// NullTime scans a nullable time stored as microseconds since the epoch (SQLite) or as a
// timestamp (PostgreSQL).
type NullTime struct {
	T     time.Time
	Valid bool
}

// Scan implements sql.Scanner.
func (n *NullTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		n.Valid = false
	case int64:
		n.T, n.Valid = time.UnixMicro(v).UTC(), true
	case time.Time:
		n.T, n.Valid = v.UTC(), true
	default:
		return fmt.Errorf("scan time: unsupported %T", src)
	}
	return nil
}

// Ptr is the time or nil.
func (n NullTime) Ptr() *time.Time {
	if !n.Valid {
		return nil
	}
	t := n.T
	return &t
}

func (s Skills) nullTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return s.D.Time(*t)
}

func strPtr(n sql.NullString) *string {
	if !n.Valid {
		return nil
	}
	v := n.String
	return &v
}

func bytesOrNil(n sql.NullString) []byte {
	if !n.Valid {
		return nil
	}
	return []byte(n.String)
}

func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

func nullFloat(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// collect scans every row of rs with scan and closes rs.
func collect[T any](rs Rows, err error, what string, scan func(Rows) (*T, error)) ([]*T, error) {
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rs.Close()
	var out []*T
	for rs.Next() {
		v, err := scan(rs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// one returns the single row of a query or an error wrapping bay.ErrNotFound.
func one[T any](rs Rows, err error, what string, scan func(Rows) (*T, error)) (*T, error) {
	vs, err := collect(rs, err, what, scan)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("%s: %w", what, bay.ErrNotFound)
	}
	return vs[0], nil
}

func (s Skills) count(ctx context.Context, what, query string, args ...any) (int, error) {
	rs, err := s.query(ctx, query, args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	defer rs.Close()
	var n int64
	if rs.Next() {
		if err := rs.Scan(&n); err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := rs.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return int(n), nil
}

// ---- blobs ----------------------------------------------------------------------------------

// PutBlob inserts b.
func (s Skills) PutBlob(ctx context.Context, b *bay.Blob) error {
	_, err := s.exec(ctx, `INSERT INTO artifact_blobs (id, owner, kind, payload, size_bytes, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		b.ID, b.Owner, b.Kind, string(b.Payload), int64(len(b.Payload)), s.D.Time(b.CreatedAt))
	if err != nil {
		return fmt.Errorf("insert blob %s: %w", b.ID, err)
	}
	return nil
}

// GetBlob returns the owner's blob.
func (s Skills) GetBlob(ctx context.Context, owner, id string) (*bay.Blob, error) {
	rs, err := s.query(ctx, `SELECT kind, payload, created_at FROM artifact_blobs WHERE id = ? AND owner = ?`, id, owner)
	return one(rs, err, "get blob "+id, func(r Rows) (*bay.Blob, error) {
		b := bay.Blob{ID: id, Owner: owner}
		var payload string
		var created NullTime
		if err := r.Scan(&b.Kind, &payload, &created); err != nil {
			return nil, err
		}
		b.Payload, b.CreatedAt = []byte(payload), created.T
		return &b, nil
	})
}

// ---- candidates -----------------------------------------------------------------------------

const candidateCols = `id, owner, skill_key, scenario_key, payload_ref, skill_type, auto_release_eligible,
auto_release_reason, summary, usage_notes, preconditions_json, postconditions_json, source_execution_ids, status,
created_by, created_at, updated_at, latest_score, latest_pass, last_evaluated_at, promotion_release_id,
is_deleted, deleted_at, deleted_by, delete_reason`

func scanCandidate(r Rows) (*bay.SkillCandidate, error) {
	var c bay.SkillCandidate
	var scenario, payloadRef, reason, summary, usage, pre, post, createdBy, promo, deletedBy, delReason sql.NullString
	var sources string
	var created, updated, evaluated, deleted NullTime
	var score sql.NullFloat64
	var pass sql.NullBool
	if err := r.Scan(&c.ID, &c.Owner, &c.SkillKey, &scenario, &payloadRef, &c.SkillType, &c.AutoReleaseEligible,
		&reason, &summary, &usage, &pre, &post, &sources, &c.Status,
		&createdBy, &created, &updated, &score, &pass, &evaluated, &promo,
		&c.IsDeleted, &deleted, &deletedBy, &delReason); err != nil {
		return nil, err
	}
	c.ScenarioKey, c.PayloadRef, c.AutoReleaseReason = strPtr(scenario), strPtr(payloadRef), strPtr(reason)
	c.Summary, c.UsageNotes, c.CreatedBy, c.PromotionReleaseID = strPtr(summary), strPtr(usage), strPtr(createdBy), strPtr(promo)
	c.Preconditions, c.Postconditions = bytesOrNil(pre), bytesOrNil(post)
	c.SourceExecutionIDs = []string{}
	if sources != "" {
		c.SourceExecutionIDs = strings.Split(sources, ",")
	}
	c.CreatedAt, c.UpdatedAt, c.LastEvaluatedAt = created.T, updated.T, evaluated.Ptr()
	if score.Valid {
		c.LatestScore = &score.Float64
	}
	if pass.Valid {
		c.LatestPass = &pass.Bool
	}
	c.DeletedAt, c.DeletedBy, c.Reason = deleted.Ptr(), strPtr(deletedBy), strPtr(delReason)
	return &c, nil
}

func (s Skills) candidateArgs(c *bay.SkillCandidate) []any {
	var pass any
	if c.LatestPass != nil {
		pass = s.D.Bool(*c.LatestPass)
	}
	return []any{c.Owner, c.SkillKey, c.ScenarioKey, c.PayloadRef, c.SkillType, s.D.Bool(c.AutoReleaseEligible),
		c.AutoReleaseReason, c.Summary, c.UsageNotes, nullBytes(c.Preconditions), nullBytes(c.Postconditions),
		strings.Join(c.SourceExecutionIDs, ","), c.Status, c.CreatedBy, s.D.Time(c.CreatedAt), s.D.Time(c.UpdatedAt),
		nullFloat(c.LatestScore), pass, s.nullTime(c.LastEvaluatedAt), c.PromotionReleaseID,
		s.D.Bool(c.IsDeleted), s.nullTime(c.DeletedAt), c.DeletedBy, c.Reason}
}

// InsertCandidate inserts c.
func (s Skills) InsertCandidate(ctx context.Context, c *bay.SkillCandidate) error {
	_, err := s.exec(ctx, `INSERT INTO skill_candidates (`+candidateCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		append([]any{c.ID}, s.candidateArgs(c)...)...)
	if err != nil {
		return fmt.Errorf("insert candidate %s: %w", c.ID, err)
	}
	return nil
}

// UpdateCandidate writes every field of c.
func (s Skills) UpdateCandidate(ctx context.Context, c *bay.SkillCandidate) error {
	n, err := s.exec(ctx, `UPDATE skill_candidates SET owner = ?, skill_key = ?, scenario_key = ?, payload_ref = ?,
		skill_type = ?, auto_release_eligible = ?, auto_release_reason = ?, summary = ?, usage_notes = ?,
		preconditions_json = ?, postconditions_json = ?, source_execution_ids = ?, status = ?, created_by = ?,
		created_at = ?, updated_at = ?, latest_score = ?, latest_pass = ?, last_evaluated_at = ?, promotion_release_id = ?,
		is_deleted = ?, deleted_at = ?, deleted_by = ?, delete_reason = ? WHERE id = ?`,
		append(s.candidateArgs(c), c.ID)...)
	return affected(n, err, "update candidate "+c.ID)
}

func affected(n int64, err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, bay.ErrNotFound)
	}
	return nil
}

// GetCandidate returns the owner's candidate, deleted or not.
func (s Skills) GetCandidate(ctx context.Context, owner, id string) (*bay.SkillCandidate, error) {
	rs, err := s.query(ctx, `SELECT `+candidateCols+` FROM skill_candidates WHERE id = ? AND owner = ?`, id, owner)
	return one(rs, err, "get candidate "+id, scanCandidate)
}

// ListCandidates returns one page of the owner's non-deleted candidates and the total.
func (s Skills) ListCandidates(ctx context.Context, q bay.CandidateQuery) ([]*bay.SkillCandidate, int, error) {
	w := New(s.D)
	w.Add("owner = " + w.Arg(q.Owner))
	w.Add("is_deleted = " + w.Arg(s.D.Bool(false)))
	if q.Status != "" {
		w.Add("status = " + w.Arg(q.Status))
	}
	if q.SkillKey != "" {
		w.Add("skill_key = " + w.Arg(q.SkillKey))
	}
	return listPage(ctx, s, w, "skill_candidates", candidateCols, "created_at DESC, id DESC", q.Limit, q.Offset, scanCandidate)
}

// listPage counts the rows of table matching w and returns one page of them in order.
func listPage[T any](ctx context.Context, s Skills, w *Where, table, cols, order string, limit, offset int,
	scan func(Rows) (*T, error)) ([]*T, int, error) {
	total, err := s.C.Query(ctx, `SELECT count(*) FROM `+table+w.SQL(), w.Args()...)
	n, err := countRows(total, err, "count "+table)
	if err != nil {
		return nil, 0, err
	}
	tail := w.SQL() + ` ORDER BY ` + order + ` LIMIT ` + w.Arg(int64(limit)) + ` OFFSET ` + w.Arg(int64(offset))
	rs, err := s.C.Query(ctx, `SELECT `+cols+` FROM `+table+tail, w.Args()...)
	vs, err := collect(rs, err, "list "+table, scan)
	return vs, n, err
}

func countRows(rs Rows, err error, what string) (int, error) {
	ns, err := collect(rs, err, what, func(r Rows) (*int64, error) {
		var n int64
		return &n, r.Scan(&n)
	})
	if err != nil || len(ns) == 0 {
		return 0, err
	}
	return int(*ns[0]), nil
}

// ---- evaluations ----------------------------------------------------------------------------

// InsertEvaluation inserts e.
func (s Skills) InsertEvaluation(ctx context.Context, e *bay.SkillEvaluation) error {
	_, err := s.exec(ctx, `INSERT INTO skill_evaluations (id, owner, candidate_id, benchmark_id, score, passed, report,
		evaluated_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.Owner, e.CandidateID, e.BenchmarkID, nullFloat(e.Score), s.D.Bool(e.Passed), e.Report, e.EvaluatedBy, s.D.Time(e.CreatedAt))
	if err != nil {
		return fmt.Errorf("insert evaluation %s: %w", e.ID, err)
	}
	return nil
}

// LatestEvaluation returns the newest evaluation of the candidate.
func (s Skills) LatestEvaluation(ctx context.Context, owner, candidateID string) (*bay.SkillEvaluation, error) {
	rs, err := s.query(ctx, `SELECT id, benchmark_id, score, passed, report, evaluated_by, created_at FROM skill_evaluations
		WHERE owner = ? AND candidate_id = ? ORDER BY created_at DESC, id DESC LIMIT 1`, owner, candidateID)
	return one(rs, err, "latest evaluation of "+candidateID, func(r Rows) (*bay.SkillEvaluation, error) {
		e := bay.SkillEvaluation{Owner: owner, CandidateID: candidateID}
		var bench, report, by sql.NullString
		var score sql.NullFloat64
		var created NullTime
		if err := r.Scan(&e.ID, &bench, &score, &e.Passed, &report, &by, &created); err != nil {
			return nil, err
		}
		e.BenchmarkID, e.Report, e.EvaluatedBy, e.CreatedAt = strPtr(bench), strPtr(report), strPtr(by), created.T
		if score.Valid {
			e.Score = &score.Float64
		}
		return &e, nil
	})
}

// ---- releases -------------------------------------------------------------------------------

const releaseCols = `id, owner, skill_key, candidate_id, version, stage, is_active, release_mode, promoted_by,
promoted_at, rollback_of, auto_promoted_from, health_window_end_at, upgrade_of_release_id, upgrade_reason,
change_summary, is_deleted, deleted_at, deleted_by, delete_reason`

func scanRelease(r Rows) (*bay.SkillRelease, error) {
	var v bay.SkillRelease
	var version int64
	var by, rollbackOf, autoFrom, upgradeOf, upgradeReason, change, deletedBy, reason sql.NullString
	var promoted, windowEnd, deleted NullTime
	if err := r.Scan(&v.ID, &v.Owner, &v.SkillKey, &v.CandidateID, &version, &v.Stage, &v.IsActive, &v.ReleaseMode, &by,
		&promoted, &rollbackOf, &autoFrom, &windowEnd, &upgradeOf, &upgradeReason,
		&change, &v.IsDeleted, &deleted, &deletedBy, &reason); err != nil {
		return nil, err
	}
	v.Version, v.PromotedBy, v.PromotedAt = int(version), strPtr(by), promoted.T
	v.RollbackOf, v.AutoPromotedFrom, v.HealthWindowEndAt = strPtr(rollbackOf), strPtr(autoFrom), windowEnd.Ptr()
	v.UpgradeOfReleaseID, v.UpgradeReason, v.ChangeSummary = strPtr(upgradeOf), strPtr(upgradeReason), strPtr(change)
	v.DeletedAt, v.DeletedBy, v.Reason = deleted.Ptr(), strPtr(deletedBy), strPtr(reason)
	return &v, nil
}

func (s Skills) releaseArgs(v *bay.SkillRelease) []any {
	return []any{v.Owner, v.SkillKey, v.CandidateID, int64(v.Version), v.Stage, s.D.Bool(v.IsActive), v.ReleaseMode, v.PromotedBy,
		s.D.Time(v.PromotedAt), v.RollbackOf, v.AutoPromotedFrom, s.nullTime(v.HealthWindowEndAt), v.UpgradeOfReleaseID,
		v.UpgradeReason, v.ChangeSummary, s.D.Bool(v.IsDeleted), s.nullTime(v.DeletedAt), v.DeletedBy, v.Reason}
}

// InsertRelease inserts v; the store's unique indexes refuse a taken version or a second
// active release of the skill (ErrConflict).
func (s Skills) InsertRelease(ctx context.Context, v *bay.SkillRelease) error {
	_, err := s.exec(ctx, `INSERT INTO skill_releases (`+releaseCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		append([]any{v.ID}, s.releaseArgs(v)...)...)
	if err != nil {
		return fmt.Errorf("insert release %s: %w", v.ID, err)
	}
	return nil
}

// UpdateRelease writes every field of v.
func (s Skills) UpdateRelease(ctx context.Context, v *bay.SkillRelease) error {
	n, err := s.exec(ctx, `UPDATE skill_releases SET owner = ?, skill_key = ?, candidate_id = ?, version = ?, stage = ?,
		is_active = ?, release_mode = ?, promoted_by = ?, promoted_at = ?, rollback_of = ?, auto_promoted_from = ?,
		health_window_end_at = ?, upgrade_of_release_id = ?, upgrade_reason = ?, change_summary = ?, is_deleted = ?,
		deleted_at = ?, deleted_by = ?, delete_reason = ? WHERE id = ?`, append(s.releaseArgs(v), v.ID)...)
	return affected(n, err, "update release "+v.ID)
}

// GetRelease returns the owner's release, deleted or not.
func (s Skills) GetRelease(ctx context.Context, owner, id string) (*bay.SkillRelease, error) {
	rs, err := s.query(ctx, `SELECT `+releaseCols+` FROM skill_releases WHERE id = ? AND owner = ?`, id, owner)
	return one(rs, err, "get release "+id, scanRelease)
}

// ListReleases returns one page of the owner's non-deleted releases and the total.
func (s Skills) ListReleases(ctx context.Context, q bay.ReleaseQuery) ([]*bay.SkillRelease, int, error) {
	w := New(s.D)
	if q.Owner != "" {
		w.Add("owner = " + w.Arg(q.Owner))
	}
	w.Add("is_deleted = " + w.Arg(s.D.Bool(false)))
	if q.SkillKey != "" {
		w.Add("skill_key = " + w.Arg(q.SkillKey))
	}
	if q.Stage != "" {
		w.Add("stage = " + w.Arg(q.Stage))
	}
	if q.ActiveOnly {
		w.Add("is_active = " + w.Arg(s.D.Bool(true)))
	}
	return listPage(ctx, s, w, "skill_releases", releaseCols, "promoted_at DESC, version DESC", q.Limit, q.Offset, scanRelease)
}

// MaxReleaseVersion is the highest version of owner+skillKey, deleted releases included.
func (s Skills) MaxReleaseVersion(ctx context.Context, owner, skillKey string) (int, error) {
	return s.count(ctx, "max release version of "+skillKey,
		`SELECT coalesce(max(version), 0) FROM skill_releases WHERE owner = ? AND skill_key = ?`, owner, skillKey)
}

// PreviousRelease is the highest-version release of the skill below version.
func (s Skills) PreviousRelease(ctx context.Context, owner, skillKey string, version int, includeDeleted bool) (*bay.SkillRelease, error) {
	cond := ""
	if !includeDeleted {
		cond = " AND is_deleted = ?"
	}
	args := []any{owner, skillKey, int64(version)}
	if !includeDeleted {
		args = append(args, s.D.Bool(false))
	}
	rs, err := s.query(ctx, `SELECT `+releaseCols+` FROM skill_releases WHERE owner = ? AND skill_key = ? AND version < ?`+cond+
		` ORDER BY version DESC LIMIT 1`, args...)
	return one(rs, err, "previous release of "+skillKey+" v"+strconv.Itoa(version), scanRelease)
}

// ActiveRelease is the active, non-deleted release of the skill.
func (s Skills) ActiveRelease(ctx context.Context, owner, skillKey string) (*bay.SkillRelease, error) {
	rs, err := s.query(ctx, `SELECT `+releaseCols+` FROM skill_releases WHERE owner = ? AND skill_key = ? AND is_active = ?
		AND is_deleted = ? ORDER BY version DESC LIMIT 1`, owner, skillKey, s.D.Bool(true), s.D.Bool(false))
	return one(rs, err, "active release of "+skillKey, scanRelease)
}

// CandidateInActiveRelease reports whether an active, non-deleted release uses the candidate.
func (s Skills) CandidateInActiveRelease(ctx context.Context, owner, candidateID string) (bool, error) {
	n, err := s.count(ctx, "active releases of candidate "+candidateID,
		`SELECT count(*) FROM skill_releases WHERE owner = ? AND candidate_id = ? AND is_active = ? AND is_deleted = ?`,
		owner, candidateID, s.D.Bool(true), s.D.Bool(false))
	return n > 0, err
}

// DeactivateReleases clears is_active of every release of the skill.
func (s Skills) DeactivateReleases(ctx context.Context, owner, skillKey string) error {
	_, err := s.exec(ctx, `UPDATE skill_releases SET is_active = ? WHERE owner = ? AND skill_key = ? AND is_active = ?`,
		s.D.Bool(false), owner, skillKey, s.D.Bool(true))
	if err != nil {
		return fmt.Errorf("deactivate releases of %s: %w", skillKey, err)
	}
	return nil
}

// ClearPromotionRelease clears the candidates' pointers at releaseID.
func (s Skills) ClearPromotionRelease(ctx context.Context, owner, releaseID string) error {
	_, err := s.exec(ctx, `UPDATE skill_candidates SET promotion_release_id = NULL WHERE owner = ? AND promotion_release_id = ?`,
		owner, releaseID)
	if err != nil {
		return fmt.Errorf("clear promotion release %s: %w", releaseID, err)
	}
	return nil
}

// ---- executions -----------------------------------------------------------------------------

// ExecutionSamples are the owner's executions in [from, to] whose tags contain tag.
func (s Skills) ExecutionSamples(ctx context.Context, owner, tag string, from, to time.Time) ([]bay.ExecSample, error) {
	w := New(s.D)
	w.Add("owner = " + w.Arg(owner))
	w.Add("created_at >= " + w.Arg(s.D.Time(from)))
	w.Add("created_at <= " + w.Arg(s.D.Time(to)))
	w.Add(s.D.TagMatch(w, "%"+likeEscaper.Replace(tag)+"%"))
	rs, err := s.C.Query(ctx, `SELECT success, execution_time_ms FROM execution_history`+w.SQL(), w.Args()...)
	ps, err := collect(rs, err, "execution samples "+tag, func(r Rows) (*bay.ExecSample, error) {
		var x bay.ExecSample
		return &x, r.Scan(&x.Success, &x.DurationMS)
	})
	out := make([]bay.ExecSample, len(ps))
	for i, p := range ps {
		out[i] = *p
	}
	return out, err
}

// OwnsExecution reports whether the owner has the execution.
func (s Skills) OwnsExecution(ctx context.Context, owner, id string) (bool, error) {
	n, err := s.count(ctx, "find execution "+id, `SELECT count(*) FROM execution_history WHERE id = ? AND owner = ?`, id, owner)
	return n > 0, err
}

// LearningQueue returns the ids of browser executions waiting for learning, oldest first.
func (s Skills) LearningQueue(ctx context.Context, limit int) ([]string, error) {
	rs, err := s.query(ctx, `SELECT id FROM execution_history WHERE learn_enabled = ? AND exec_type IN (?, ?)
		AND (learn_status IS NULL OR learn_status IN ('pending', 'processing')) ORDER BY created_at, id LIMIT ?`,
		s.D.Bool(true), bay.ExecBrowser, bay.ExecBrowserBatch, int64(limit))
	ids, err := collect(rs, err, "learning queue", func(r Rows) (*string, error) {
		var id string
		return &id, r.Scan(&id)
	})
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = *id
	}
	return out, err
}
