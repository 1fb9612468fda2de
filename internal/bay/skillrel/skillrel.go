// Package skillrel is bay's skill lifecycle: payload blobs, candidate skills built from an
// owner's executions, their evaluations, and the releases that promote them (versions per
// owner and skill, one active release, health over tagged executions, rollback). It answers
// domain values; the HTTP layer renders them.
//
// Every error returned is a classified *bay.Error (or wraps one); messages are safe for
// clients and causes are logged.
package skillrel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// ID prefixes of the skill lifecycle.
const (
	PrefixBlob       = "blob"
	PrefixCandidate  = "sc"
	PrefixEvaluation = "se"
	PrefixRelease    = "sr"
	// RefScheme starts every blob reference: "blob:<id>".
	RefScheme = "blob:"
)

// DefaultMaxBlobBytes bounds one stored blob (its compact JSON) unless Options say otherwise.
const DefaultMaxBlobBytes = 1 << 20

// storeAttempts bounds the retries of a release write that lost a race on the store's
// constraints (version taken, another release active).
const storeAttempts = 5

// Options configure New.
type Options struct {
	// MaxBlobBytes bounds one blob; larger -> 413 payload_too_large. Default DefaultMaxBlobBytes.
	MaxBlobBytes int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Service is the skill lifecycle. Create it with New.
type Service struct {
	store   bay.SkillStore
	maxBlob int
	now     func() time.Time
}

// New returns a service over store.
func New(store bay.SkillStore, o Options) *Service {
	if o.MaxBlobBytes <= 0 {
		o.MaxBlobBytes = DefaultMaxBlobBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{store: store, maxBlob: o.MaxBlobBytes, now: o.Now}
}

// MaxBlobBytes is the size bound of one blob.
func (s *Service) MaxBlobBytes() int { return s.maxBlob }

func (s *Service) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// ---- blobs ----------------------------------------------------------------------------------

// NewBlob checks that payload is a JSON object or array within the size bound and returns it
// as a blob of owner (not yet stored), its JSON compacted.
func (s *Service) NewBlob(owner, kind string, payload json.RawMessage) (*bay.Blob, error) {
	var v any
	if err := json.Unmarshal(payload, &v); err != nil {
		return nil, bay.Errorf(bay.CodeValidation, "Payload must be valid JSON").WithCause(err)
	}
	switch v.(type) {
	case map[string]any, []any:
	default:
		return nil, bay.Errorf(bay.CodeValidation, "Payload must be a JSON object or array")
	}
	// Re-encoding makes the text valid UTF-8 (both stores keep it as text).
	b, err := json.Marshal(v)
	if err != nil {
		return nil, bay.Internal("Failed to encode payload", err)
	}
	if len(b) > s.maxBlob {
		return nil, bay.Errorf(bay.CodePayloadTooLarge, "Payload exceeds %d bytes", s.maxBlob).
			WithDetails(map[string]any{"size_bytes": len(b), "max_bytes": s.maxBlob})
	}
	if kind == "" {
		kind = bay.BlobKindGeneric
	}
	return &bay.Blob{ID: bay.NewID(PrefixBlob), Owner: owner, Kind: kind, Payload: b, CreatedAt: s.clock()}, nil
}

// PutBlob stores a JSON payload (object or array) of owner and returns the blob.
func (s *Service) PutBlob(ctx context.Context, owner, kind string, payload json.RawMessage) (*bay.Blob, error) {
	b, err := s.NewBlob(owner, kind, payload)
	if err != nil {
		return nil, err
	}
	if err := s.store.PutBlob(ctx, b); err != nil {
		return nil, bay.Internal("Failed to store payload", err)
	}
	return b, nil
}

// Ref is the wire reference of a blob.
func Ref(id string) string { return RefScheme + id }

// ParseRef returns the blob id of a "blob:<id>" reference, or a validation error.
func ParseRef(ref string) (string, error) {
	id, ok := strings.CutPrefix(ref, RefScheme)
	if !ok {
		return "", bay.Errorf(bay.CodeValidation, "Unsupported payload_ref: %s", ref)
	}
	if strings.TrimSpace(id) == "" {
		return "", bay.Errorf(bay.CodeValidation, "Invalid payload_ref: %s", ref)
	}
	return id, nil
}

// GetBlob returns the owner's blob named by ref, its payload checked to be an object or array.
func (s *Service) GetBlob(ctx context.Context, owner, ref string) (*bay.Blob, error) {
	id, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	b, err := s.store.GetBlob(ctx, owner, id)
	if bay.IsNotFound(err) {
		return nil, bay.Errorf(bay.CodeNotFound, "Artifact blob not found: %s", id)
	}
	if err != nil {
		return nil, bay.Internal("Failed to read payload", err)
	}
	var v any
	if err := json.Unmarshal(b.Payload, &v); err != nil {
		return nil, bay.Errorf(bay.CodeValidation, "Invalid payload JSON in blob: %s", id)
	}
	switch v.(type) {
	case map[string]any, []any:
	default:
		return nil, bay.Errorf(bay.CodeValidation, "Unsupported payload type in blob: %s", id)
	}
	return b, nil
}

// ---- candidates -----------------------------------------------------------------------------

// CandidateParams create a candidate (lengths bounded by the caller).
type CandidateParams struct {
	SkillKey           string
	SourceExecutionIDs []string
	ScenarioKey        *string
	PayloadRef         *string
	Summary            *string
	UsageNotes         *string
	Preconditions      json.RawMessage // JSON object or nil
	Postconditions     json.RawMessage
	// SkillType, CreatedBy default to code and the owner (browser learning sets them).
	SkillType string
	CreatedBy string
}

// CreateCandidate records a draft candidate of owner from its executions.
func (s *Service) CreateCandidate(ctx context.Context, owner string, p CandidateParams) (*bay.SkillCandidate, error) {
	key := strings.TrimSpace(p.SkillKey)
	if key == "" {
		return nil, bay.Errorf(bay.CodeValidation, "skill_key must not be empty")
	}
	if len(p.SourceExecutionIDs) == 0 {
		return nil, bay.Errorf(bay.CodeValidation, "source_execution_ids must not be empty")
	}
	pre, err := jsonObject(p.Preconditions, "preconditions")
	if err != nil {
		return nil, err
	}
	post, err := jsonObject(p.Postconditions, "postconditions")
	if err != nil {
		return nil, err
	}
	reads := s.store.SkillReads()
	for _, id := range p.SourceExecutionIDs {
		ok, err := reads.OwnsExecution(ctx, owner, id)
		if err != nil {
			return nil, bay.Internal("Failed to check source executions", err)
		}
		if !ok {
			return nil, bay.Errorf(bay.CodeValidation, "Execution ID not found or not owned: %s", id)
		}
	}
	if p.PayloadRef != nil {
		// Unlike the reference, a candidate's payload must exist: a replay of it would fail later.
		if _, err := s.GetBlob(ctx, owner, *p.PayloadRef); bay.IsNotFound(err) {
			return nil, bay.Errorf(bay.CodeValidation, "Payload not found or not owned: %s", *p.PayloadRef)
		} else if err != nil {
			return nil, err
		}
	}
	now := s.clock()
	c := &bay.SkillCandidate{
		ID: bay.NewID(PrefixCandidate), Owner: owner, SkillKey: key, ScenarioKey: p.ScenarioKey, PayloadRef: p.PayloadRef,
		SkillType: bay.SkillTypeCode, Summary: p.Summary, UsageNotes: p.UsageNotes, Preconditions: pre, Postconditions: post,
		SourceExecutionIDs: p.SourceExecutionIDs, Status: bay.CandidateDraft, CreatedAt: now, UpdatedAt: now,
	}
	if p.SkillType != "" {
		c.SkillType = p.SkillType
	}
	by := owner
	if p.CreatedBy != "" {
		by = p.CreatedBy
	}
	c.CreatedBy = &by
	if err := s.store.SkillTx(ctx, func(tx bay.SkillTx) error { return tx.InsertCandidate(ctx, c) }); err != nil {
		return nil, bay.Internal("Failed to create candidate", err)
	}
	return c, nil
}

// jsonObject returns raw compacted when it is a JSON object, nil when absent or null.
func jsonObject(raw json.RawMessage, field string) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, bay.Errorf(bay.CodeValidation, "%s must be a JSON object", field)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, bay.Internal("Failed to encode "+field, err)
	}
	return b, nil
}

// CandidateStatuses are the valid candidate statuses.
var CandidateStatuses = []string{bay.CandidateDraft, bay.CandidateEvaluating, bay.CandidatePromoted,
	bay.CandidatePromotedCanary, bay.CandidatePromotedStable, bay.CandidateRejected, bay.CandidateRolledBack}

// Stages are the valid release stages.
var Stages = []string{bay.StageCanary, bay.StageStable}

// Page is one page of a list and the total of matches.
type Page[T any] struct {
	Items []*T
	Total int
}

// page wraps a store's list answer.
func page[T any](items []*T, total int, err error, what string) (*Page[T], error) {
	if err != nil {
		return nil, bay.Internal("Failed to list "+what, err)
	}
	return &Page[T]{Items: items, Total: total}, nil
}

// ListCandidates returns the owner's non-deleted candidates, newest first (limit and offset
// validated by the caller).
func (s *Service) ListCandidates(ctx context.Context, q bay.CandidateQuery) (*Page[bay.SkillCandidate], error) {
	if q.Status != "" && !slices.Contains(CandidateStatuses, q.Status) {
		return nil, bay.Errorf(bay.CodeValidation, "Invalid candidate status: %s", q.Status)
	}
	items, total, err := s.store.SkillReads().ListCandidates(ctx, q)
	return page(items, total, err, "candidates")
}

func errCandidateNotFound(id string) error {
	return bay.Errorf(bay.CodeNotFound, "Skill candidate not found: %s", id)
}

func errReleaseNotFound(id string) error {
	return bay.Errorf(bay.CodeNotFound, "Skill release not found: %s", id)
}

// liveCandidate reads the owner's non-deleted candidate.
func liveCandidate(ctx context.Context, r bay.SkillReader, owner, id string) (*bay.SkillCandidate, error) {
	c, err := r.GetCandidate(ctx, owner, id)
	if bay.IsNotFound(err) || (err == nil && c.IsDeleted) {
		return nil, errCandidateNotFound(id)
	}
	if err != nil {
		return nil, bay.Internal("Failed to read candidate", err)
	}
	return c, nil
}

// liveRelease reads the owner's non-deleted release.
func liveRelease(ctx context.Context, r bay.SkillReader, owner, id string) (*bay.SkillRelease, error) {
	v, err := r.GetRelease(ctx, owner, id)
	if bay.IsNotFound(err) || (err == nil && v.IsDeleted) {
		return nil, errReleaseNotFound(id)
	}
	if err != nil {
		return nil, bay.Internal("Failed to read release", err)
	}
	return v, nil
}

// GetCandidate returns the owner's non-deleted candidate; a promotion_release_id pointing at a
// deleted or missing release is cleared on the way.
func (s *Service) GetCandidate(ctx context.Context, owner, id string) (*bay.SkillCandidate, error) {
	c, err := liveCandidate(ctx, s.store.SkillReads(), owner, id)
	if err != nil || c.PromotionReleaseID == nil {
		return c, err
	}
	if _, err := liveRelease(ctx, s.store.SkillReads(), owner, *c.PromotionReleaseID); !bay.IsNotFound(err) {
		return c, nil
	}
	var out *bay.SkillCandidate
	err = s.store.SkillTx(ctx, func(tx bay.SkillTx) error {
		c, err := liveCandidate(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		if c.PromotionReleaseID != nil {
			if _, err := liveRelease(ctx, tx, owner, *c.PromotionReleaseID); bay.IsNotFound(err) {
				c.PromotionReleaseID = nil
				if err := tx.UpdateCandidate(ctx, c); err != nil {
					return err
				}
			}
		}
		out = c
		return nil
	})
	if err != nil {
		return nil, bay.Classify(err, "Failed to read candidate")
	}
	return out, nil
}

// EvaluationParams record an evaluation.
type EvaluationParams struct {
	Passed      bool
	Score       *float64
	BenchmarkID *string
	Report      *string
	EvaluatedBy string // default: the owner
}

// Evaluate records an evaluation of the owner's candidate and updates its latest score and
// pass. A failing evaluation rejects a draft or evaluating candidate; a candidate that an
// active release uses keeps its status (unlike the reference, an evaluation never silently
// demotes a live release: rolling back is the caller's explicit decision).
func (s *Service) Evaluate(ctx context.Context, owner, id string, p EvaluationParams) (*bay.SkillEvaluation, error) {
	var ev *bay.SkillEvaluation
	err := s.store.SkillTx(ctx, func(tx bay.SkillTx) error {
		c, err := liveCandidate(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		live, err := tx.CandidateInActiveRelease(ctx, owner, id)
		if err != nil {
			return err
		}
		now := s.clock()
		by := owner
		if p.EvaluatedBy != "" {
			by = p.EvaluatedBy
		}
		ev = &bay.SkillEvaluation{ID: bay.NewID(PrefixEvaluation), Owner: owner, CandidateID: id, BenchmarkID: p.BenchmarkID,
			Score: p.Score, Passed: p.Passed, Report: p.Report, EvaluatedBy: &by, CreatedAt: now}
		if err := tx.InsertEvaluation(ctx, ev); err != nil {
			return err
		}
		if !live {
			c.Status = bay.CandidateEvaluating
			if !p.Passed {
				c.Status = bay.CandidateRejected
			}
		}
		passed := p.Passed
		c.LatestScore, c.LatestPass, c.LastEvaluatedAt, c.UpdatedAt = p.Score, &passed, &now, now
		return tx.UpdateCandidate(ctx, c)
	})
	if err != nil {
		return nil, bay.Classify(err, "Failed to evaluate candidate")
	}
	return ev, nil
}

// PromoteParams promote a candidate.
type PromoteParams struct {
	Stage              string // canary (default) or stable
	UpgradeOfReleaseID *string
	UpgradeReason      *string
	ChangeSummary      *string
	// Auto marks a release made by browser learning (release_mode auto, candidate status
	// promoted_<stage>), with its health window end and the release it was promoted from.
	Auto              bool
	HealthWindowEndAt *time.Time
	AutoPromotedFrom  *string
	PromotedBy        string // default: the owner
}

// Promote releases the owner's candidate: a new active version of its skill (the previous
// active one deactivated). It needs a passing latest evaluation.
func (s *Service) Promote(ctx context.Context, owner, id string, p PromoteParams) (*bay.SkillRelease, error) {
	if p.Stage == "" {
		p.Stage = bay.StageCanary
	}
	if !slices.Contains(Stages, p.Stage) {
		return nil, bay.Errorf(bay.CodeValidation, "Invalid release stage: %s", p.Stage)
	}
	var out *bay.SkillRelease
	err := s.releaseTx(ctx, func(tx bay.SkillTx) error {
		c, err := liveCandidate(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		if c.LatestPass == nil || !*c.LatestPass {
			return bay.Errorf(bay.CodeConflict, "Candidate has no passing evaluation; promotion is blocked").
				WithDetails(map[string]any{"candidate_id": id})
		}
		v := s.newRelease(owner, c.SkillKey, c.ID, p.Stage, p.Auto, p.PromotedBy)
		v.UpgradeOfReleaseID, v.UpgradeReason, v.ChangeSummary = p.UpgradeOfReleaseID, p.UpgradeReason, p.ChangeSummary
		v.HealthWindowEndAt, v.AutoPromotedFrom = p.HealthWindowEndAt, p.AutoPromotedFrom
		if err := insertActive(ctx, tx, v); err != nil {
			return err
		}
		c.Status = bay.CandidatePromoted
		if p.Auto {
			c.Status = "promoted_" + p.Stage
			c.AutoReleaseEligible = true
		}
		c.PromotionReleaseID, c.UpdatedAt = &v.ID, v.PromotedAt
		out = v
		return tx.UpdateCandidate(ctx, c)
	})
	if err != nil {
		return nil, bay.Classify(err, "Failed to promote candidate")
	}
	return out, nil
}

func (s *Service) newRelease(owner, key, candidateID, stage string, auto bool, by string) *bay.SkillRelease {
	if by == "" {
		by = owner
	}
	mode := bay.ReleaseModeManual
	if auto {
		mode = bay.ReleaseModeAuto
	}
	return &bay.SkillRelease{ID: bay.NewID(PrefixRelease), Owner: owner, SkillKey: key, CandidateID: candidateID,
		Stage: stage, IsActive: true, ReleaseMode: mode, PromotedBy: &by, PromotedAt: s.clock()}
}

// insertActive numbers v after every release of its skill (deleted ones included),
// deactivates the skill's releases and inserts v as the active one.
func insertActive(ctx context.Context, tx bay.SkillTx, v *bay.SkillRelease) error {
	max, err := tx.MaxReleaseVersion(ctx, v.Owner, v.SkillKey)
	if err != nil {
		return err
	}
	v.Version = max + 1
	if err := tx.DeactivateReleases(ctx, v.Owner, v.SkillKey); err != nil {
		return err
	}
	return tx.InsertRelease(ctx, v)
}

// releaseTx runs fn in a transaction, again when the store's constraints refused a write
// because a concurrent writer (another bay on the same database) took the version or the
// active slot first.
func (s *Service) releaseTx(ctx context.Context, fn func(tx bay.SkillTx) error) error {
	var err error
	for range storeAttempts {
		err = s.store.SkillTx(ctx, fn)
		if !errors.Is(err, bay.ErrConflict) {
			return err
		}
	}
	return err
}

// ListReleases returns the owner's non-deleted releases, newest promotion first.
func (s *Service) ListReleases(ctx context.Context, q bay.ReleaseQuery) (*Page[bay.SkillRelease], error) {
	if q.Stage != "" && !slices.Contains(Stages, q.Stage) {
		return nil, bay.Errorf(bay.CodeValidation, "Invalid release stage: %s", q.Stage)
	}
	items, total, err := s.store.SkillReads().ListReleases(ctx, q)
	return page(items, total, err, "releases")
}

// Deleted is the outcome of a soft delete.
type Deleted struct {
	ID string
	bay.Deletion
}

// DeleteRelease soft-deletes the owner's release, active or not, and clears the candidates'
// pointers at it.
func (s *Service) DeleteRelease(ctx context.Context, owner, id string, reason *string) (*Deleted, error) {
	var out *Deleted
	err := s.store.SkillTx(ctx, func(tx bay.SkillTx) error {
		v, err := liveRelease(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		v.IsActive = false
		v.Deletion = s.deletion(owner, reason)
		if err := tx.UpdateRelease(ctx, v); err != nil {
			return err
		}
		out = &Deleted{ID: id, Deletion: v.Deletion}
		return tx.ClearPromotionRelease(ctx, owner, id)
	})
	if err != nil {
		return nil, bay.Classify(err, "Failed to delete release")
	}
	return out, nil
}

func (s *Service) deletion(owner string, reason *string) bay.Deletion {
	now := s.clock()
	by := owner
	return bay.Deletion{IsDeleted: true, DeletedAt: &now, DeletedBy: &by, Reason: reason}
}

// DeleteCandidate soft-deletes the owner's candidate unless an active release uses it.
func (s *Service) DeleteCandidate(ctx context.Context, owner, id string, reason *string) (*Deleted, error) {
	var out *Deleted
	err := s.store.SkillTx(ctx, func(tx bay.SkillTx) error {
		c, err := liveCandidate(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		live, err := tx.CandidateInActiveRelease(ctx, owner, id)
		if err != nil {
			return err
		}
		if live {
			return bay.Errorf(bay.CodeConflict, "Candidate referenced by active release cannot be deleted").
				WithDetails(map[string]any{"candidate_id": id})
		}
		c.Deletion = s.deletion(owner, reason)
		c.UpdatedAt = *c.DeletedAt
		out = &Deleted{ID: id, Deletion: c.Deletion}
		return tx.UpdateCandidate(ctx, c)
	})
	if err != nil {
		return nil, bay.Classify(err, "Failed to delete candidate")
	}
	return out, nil
}

// Rollback makes a new active release of the skill from the release before id (its candidate
// and stage), and marks the candidate of id rolled back. auto marks a rollback by browser
// learning.
func (s *Service) Rollback(ctx context.Context, owner, id string, auto bool) (*bay.SkillRelease, error) {
	var out *bay.SkillRelease
	err := s.releaseTx(ctx, func(tx bay.SkillTx) error {
		cur, err := liveRelease(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		prev, err := tx.PreviousRelease(ctx, owner, cur.SkillKey, cur.Version, false)
		if bay.IsNotFound(err) {
			return bay.Errorf(bay.CodeConflict, "Rollback is unavailable: no previous release exists").
				WithDetails(map[string]any{"release_id": id})
		}
		if err != nil {
			return err
		}
		v := s.newRelease(owner, cur.SkillKey, prev.CandidateID, prev.Stage, auto, "")
		v.RollbackOf = &cur.ID
		if err := insertActive(ctx, tx, v); err != nil {
			return err
		}
		c, err := tx.GetCandidate(ctx, owner, cur.CandidateID)
		if err != nil {
			return err
		}
		c.Status, c.UpdatedAt = bay.CandidateRolledBack, v.PromotedAt
		out = v
		return tx.UpdateCandidate(ctx, c)
	})
	if err != nil {
		return nil, bay.Classify(err, "Failed to roll back release")
	}
	return out, nil
}
