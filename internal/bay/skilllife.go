package bay

import (
	"context"
	"time"
)

// ---------------------------------------------------------------------------------------------
// The skill lifecycle: artifact blobs, candidate skills, their evaluations and releases.
// ---------------------------------------------------------------------------------------------

// Blob is a stored JSON document of an owner (a skill payload, a browser trace). It is
// referenced on the wire as "blob:<id>".
type Blob struct {
	ID        string // blob-xxxxxxxxxxxx
	Owner     string
	Kind      string // generic, browser_trace, browser_segment, or any kind a caller names
	Payload   []byte // JSON object or array
	CreatedAt time.Time
}

// Blob kinds bay itself writes.
const (
	BlobKindGeneric        = "generic"
	BlobKindBrowserTrace   = "browser_trace"
	BlobKindBrowserSegment = "browser_segment"
)

// BlobStore keeps blobs. GetBlob of another owner's or a missing blob wraps ErrNotFound; PutBlob
// of an existing id wraps ErrConflict.
type BlobStore interface {
	PutBlob(ctx context.Context, b *Blob) error
	GetBlob(ctx context.Context, owner, id string) (*Blob, error)
}

// Candidate statuses.
const (
	CandidateDraft          = "draft"
	CandidateEvaluating     = "evaluating"
	CandidatePromoted       = "promoted"
	CandidatePromotedCanary = "promoted_canary"
	CandidatePromotedStable = "promoted_stable"
	CandidateRejected       = "rejected"
	CandidateRolledBack     = "rolled_back"
)

// Release stages and modes.
const (
	StageCanary        = "canary"
	StageStable        = "stable"
	ReleaseModeManual  = "manual"
	ReleaseModeAuto    = "auto"
	SkillTypeCode      = "code"
	SkillTypeBrowser   = "browser"
	SystemAutoCreator  = "system:auto"
	ReleaseTagPrefix   = "release:"
	SkillTagPrefix     = "skill:"
	StageTagPrefix     = "stage:"
	DefaultHealthHours = 24
)

// Deletion records who soft-deleted a row, when and why.
type Deletion struct {
	IsDeleted bool
	DeletedAt *time.Time
	DeletedBy *string
	Reason    *string
}

// SkillCandidate is a skill proposed from executions, before or after evaluation and promotion.
type SkillCandidate struct {
	ID                  string // sc-xxxxxxxxxxxx
	Owner               string
	SkillKey            string
	ScenarioKey         *string
	PayloadRef          *string
	SkillType           string
	AutoReleaseEligible bool
	AutoReleaseReason   *string
	Summary             *string
	UsageNotes          *string
	Preconditions       []byte // JSON object or nil
	Postconditions      []byte
	SourceExecutionIDs  []string
	Status              string
	CreatedBy           *string
	CreatedAt           time.Time
	UpdatedAt           time.Time
	LatestScore         *float64
	LatestPass          *bool
	LastEvaluatedAt     *time.Time
	PromotionReleaseID  *string
	Deletion
}

// SkillEvaluation is one recorded evaluation of a candidate.
type SkillEvaluation struct {
	ID          string // se-xxxxxxxxxxxx
	Owner       string
	CandidateID string
	BenchmarkID *string
	Score       *float64
	Passed      bool
	Report      *string
	EvaluatedBy *string
	CreatedAt   time.Time
}

// SkillRelease is a promoted candidate: one version of a skill of an owner.
type SkillRelease struct {
	ID                 string // sr-xxxxxxxxxxxx
	Owner              string
	SkillKey           string
	CandidateID        string
	Version            int
	Stage              string
	IsActive           bool
	ReleaseMode        string
	PromotedBy         *string
	PromotedAt         time.Time
	RollbackOf         *string
	AutoPromotedFrom   *string
	HealthWindowEndAt  *time.Time
	UpgradeOfReleaseID *string
	UpgradeReason      *string
	ChangeSummary      *string
	Deletion
}

// CandidateQuery selects an owner's non-deleted candidates, newest first.
type CandidateQuery struct {
	Owner    string
	Status   string
	SkillKey string
	Limit    int
	Offset   int
}

// ReleaseQuery selects non-deleted releases, newest promotion first.
type ReleaseQuery struct {
	Owner      string // "" = every owner's (background work only)
	SkillKey   string
	Stage      string
	ActiveOnly bool
	Limit      int
	Offset     int
}

// ExecSample is what release health reads of one execution.
type ExecSample struct {
	Success    bool
	DurationMS int64
}

// SkillReader is the read side of the skill store.
type SkillReader interface {
	GetBlob(ctx context.Context, owner, id string) (*Blob, error)
	// GetCandidate and GetRelease return deleted rows too; another owner's wrap ErrNotFound.
	GetCandidate(ctx context.Context, owner, id string) (*SkillCandidate, error)
	ListCandidates(ctx context.Context, q CandidateQuery) ([]*SkillCandidate, int, error)
	GetRelease(ctx context.Context, owner, id string) (*SkillRelease, error)
	ListReleases(ctx context.Context, q ReleaseQuery) ([]*SkillRelease, int, error)
	// LatestEvaluation of a candidate, or ErrNotFound.
	LatestEvaluation(ctx context.Context, owner, candidateID string) (*SkillEvaluation, error)
	// MaxReleaseVersion over all releases (deleted included) of owner+skillKey; 0 if none.
	MaxReleaseVersion(ctx context.Context, owner, skillKey string) (int, error)
	// PreviousRelease is the highest-version release below version (deleted ones only when
	// includeDeleted), or ErrNotFound.
	PreviousRelease(ctx context.Context, owner, skillKey string, version int, includeDeleted bool) (*SkillRelease, error)
	// ActiveRelease is the active, non-deleted release of owner+skillKey, or ErrNotFound.
	ActiveRelease(ctx context.Context, owner, skillKey string) (*SkillRelease, error)
	// CandidateInActiveRelease reports whether an active, non-deleted release uses the candidate.
	CandidateInActiveRelease(ctx context.Context, owner, candidateID string) (bool, error)
	// ExecutionSamples are the owner's executions created in [from, to] whose tags contain tag
	// (case-insensitive substring).
	ExecutionSamples(ctx context.Context, owner, tag string, from, to time.Time) ([]ExecSample, error)
	// OwnsExecution reports whether the execution exists and belongs to owner.
	OwnsExecution(ctx context.Context, owner, id string) (bool, error)
	// LearningQueue returns the ids of up to limit browser executions waiting for learning
	// (learn_enabled, learn_status pending or unset, or processing: learning runs under a
	// lease, so a row still processing when a cycle starts was left by a bay that died),
	// oldest first.
	LearningQueue(ctx context.Context, limit int) ([]string, error)
}

// SkillTx is a write transaction of the skill store.
type SkillTx interface {
	SkillReader
	PutBlob(ctx context.Context, b *Blob) error
	InsertCandidate(ctx context.Context, c *SkillCandidate) error
	UpdateCandidate(ctx context.Context, c *SkillCandidate) error // every field; missing wraps ErrNotFound
	InsertEvaluation(ctx context.Context, e *SkillEvaluation) error
	// InsertRelease wraps ErrConflict when the version is taken or another release of the
	// skill is active.
	InsertRelease(ctx context.Context, r *SkillRelease) error
	UpdateRelease(ctx context.Context, r *SkillRelease) error
	// DeactivateReleases clears is_active of every release of owner+skillKey.
	DeactivateReleases(ctx context.Context, owner, skillKey string) error
	// ClearPromotionRelease clears promotion_release_id of the owner's candidates pointing at
	// releaseID.
	ClearPromotionRelease(ctx context.Context, owner, releaseID string) error
}

// SkillStore is the durable state of the skill lifecycle, in the same database as Store.
// Implementations: internal/bay/sqlite and internal/bay/postgres, both passing
// internal/bay/storetest.
type SkillStore interface {
	BlobStore
	// SkillReads reads outside a transaction.
	SkillReads() SkillReader
	// SkillTx runs fn in one write transaction, serialised with Store.Tx.
	SkillTx(ctx context.Context, fn func(tx SkillTx) error) error
}
