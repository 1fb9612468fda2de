package bayapi

import "encoding/json"

// Paths of the skill lifecycle (payloads, candidates, evaluations, releases).
const (
	PathSkillPayloads = "/v1/skills/payloads"
	// PathSkillPayload takes one path segment: the reference allows "/" in a payload ref, but
	// bay's refs (blob:<id>) never contain one, and a multi-segment pattern here would
	// collide with the library's /v1/skills/{name}/files/{path...}.
	PathSkillPayload      = "/v1/skills/payloads/{payload_ref}"
	PathSkillCandidates   = "/v1/skills/candidates"
	PathSkillCandidate    = "/v1/skills/candidates/{candidate_id}"
	PathSkillEvaluate     = "/v1/skills/candidates/{candidate_id}/evaluate"
	PathSkillPromote      = "/v1/skills/candidates/{candidate_id}/promote"
	PathSkillReleases     = "/v1/skills/releases"
	PathSkillRelease      = "/v1/skills/releases/{release_id}"
	PathSkillHealth       = "/v1/skills/releases/{release_id}/health"
	PathSkillRollback     = "/v1/skills/releases/{release_id}/rollback"
	PathBrowserTrace      = "/v1/sandboxes/{sandbox_id}/browser/traces/{trace_ref}"
	PathBrowserSkillRun   = "/v1/sandboxes/{sandbox_id}/browser/skills/{skill_key}/run"
	DefaultSkillListLimit = 100
	MaxSkillListLimit     = 500
	// Bounds of the skill lifecycle's fields.
	MaxSkillKeyLen      = 256
	MaxSkillTextLen     = 16 << 10 // summary, usage notes, report, reasons
	MaxSourceExecutions = 1000
	MaxSkillIDLen       = 128 // ids and refs in bodies and paths
)

// CreatePayloadRequest is POST /v1/skills/payloads.
type CreatePayloadRequest struct {
	Payload json.RawMessage `json:"payload"` // required: object or array
	Kind    *string         `json:"kind,omitempty" maxLength:"128" doc:"default generic"`
}

// PayloadCreated is the answer of POST /v1/skills/payloads.
type PayloadCreated struct {
	PayloadRef string `json:"payload_ref"`
	Kind       string `json:"kind"`
}

// PayloadResponse is the answer of GET /v1/skills/payloads/{payload_ref}.
type PayloadResponse struct {
	PayloadRef string          `json:"payload_ref"`
	Kind       string          `json:"kind"`
	Payload    json.RawMessage `json:"payload"`
}

// CreateCandidateRequest is POST /v1/skills/candidates.
type CreateCandidateRequest struct {
	SkillKey           *string         `json:"skill_key"`            // required
	SourceExecutionIDs []string        `json:"source_execution_ids"` // required, not empty
	ScenarioKey        *string         `json:"scenario_key,omitempty"`
	PayloadRef         *string         `json:"payload_ref,omitempty"`
	Summary            *string         `json:"summary,omitempty"`
	UsageNotes         *string         `json:"usage_notes,omitempty"`
	Preconditions      json.RawMessage `json:"preconditions,omitempty"`
	Postconditions     json.RawMessage `json:"postconditions,omitempty"`
}

// SkillCandidateResponse is a candidate skill.
type SkillCandidateResponse struct {
	ID                  string          `json:"id"`
	SkillKey            string          `json:"skill_key"`
	ScenarioKey         *string         `json:"scenario_key"`
	PayloadRef          *string         `json:"payload_ref"`
	SkillType           string          `json:"skill_type"`
	AutoReleaseEligible bool            `json:"auto_release_eligible"`
	AutoReleaseReason   *string         `json:"auto_release_reason"`
	Summary             *string         `json:"summary"`
	UsageNotes          *string         `json:"usage_notes"`
	Preconditions       json.RawMessage `json:"preconditions"`
	Postconditions      json.RawMessage `json:"postconditions"`
	SourceExecutionIDs  []string        `json:"source_execution_ids"`
	Status              string          `json:"status"`
	LatestScore         *float64        `json:"latest_score"`
	LatestPass          *bool           `json:"latest_pass"`
	LastEvaluatedAt     *Time           `json:"last_evaluated_at"`
	PromotionReleaseID  *string         `json:"promotion_release_id"`
	CreatedBy           *string         `json:"created_by"`
	CreatedAt           Time            `json:"created_at"`
	UpdatedAt           Time            `json:"updated_at"`
	IsDeleted           bool            `json:"is_deleted"`
	DeletedAt           *Time           `json:"deleted_at"`
	DeletedBy           *string         `json:"deleted_by"`
	DeleteReason        *string         `json:"delete_reason"`
}

// SkillCandidateList is GET /v1/skills/candidates.
type SkillCandidateList struct {
	Items []SkillCandidateResponse `json:"items"`
	Total int                      `json:"total"`
}

// EvaluateRequest is POST /v1/skills/candidates/{id}/evaluate.
type EvaluateRequest struct {
	Passed      *bool    `json:"passed"` // required
	Score       *float64 `json:"score,omitempty"`
	BenchmarkID *string  `json:"benchmark_id,omitempty"`
	Report      *string  `json:"report,omitempty"`
}

// SkillEvaluationResponse is a recorded evaluation.
type SkillEvaluationResponse struct {
	ID          string   `json:"id"`
	CandidateID string   `json:"candidate_id"`
	BenchmarkID *string  `json:"benchmark_id"`
	Score       *float64 `json:"score"`
	Passed      bool     `json:"passed"`
	Report      *string  `json:"report"`
	EvaluatedBy *string  `json:"evaluated_by"`
	CreatedAt   Time     `json:"created_at"`
}

// PromoteRequest is POST /v1/skills/candidates/{id}/promote.
type PromoteRequest struct {
	Stage              *string `json:"stage,omitempty" doc:"canary (default) or stable"`
	UpgradeOfReleaseID *string `json:"upgrade_of_release_id,omitempty"`
	UpgradeReason      *string `json:"upgrade_reason,omitempty"`
	ChangeSummary      *string `json:"change_summary,omitempty"`
}

// SkillReleaseResponse is a release.
type SkillReleaseResponse struct {
	ID                 string  `json:"id"`
	SkillKey           string  `json:"skill_key"`
	CandidateID        string  `json:"candidate_id"`
	Version            int     `json:"version"`
	Stage              string  `json:"stage"`
	IsActive           bool    `json:"is_active"`
	ReleaseMode        string  `json:"release_mode"`
	PromotedBy         *string `json:"promoted_by"`
	PromotedAt         Time    `json:"promoted_at"`
	RollbackOf         *string `json:"rollback_of"`
	AutoPromotedFrom   *string `json:"auto_promoted_from"`
	HealthWindowEndAt  *Time   `json:"health_window_end_at"`
	UpgradeOfReleaseID *string `json:"upgrade_of_release_id"`
	UpgradeReason      *string `json:"upgrade_reason"`
	ChangeSummary      *string `json:"change_summary"`
	IsDeleted          bool    `json:"is_deleted"`
	DeletedAt          *Time   `json:"deleted_at"`
	DeletedBy          *string `json:"deleted_by"`
	DeleteReason       *string `json:"delete_reason"`
}

// SkillReleaseList is GET /v1/skills/releases.
type SkillReleaseList struct {
	Items []SkillReleaseResponse `json:"items"`
	Total int                    `json:"total"`
}

// DeleteReasonRequest is the optional body of the skill DELETE endpoints.
type DeleteReasonRequest struct {
	Reason *string `json:"reason,omitempty"`
}

// DeletedResponse is the answer of the skill DELETE endpoints.
type DeletedResponse struct {
	ID           string  `json:"id"`
	DeletedAt    *Time   `json:"deleted_at"`
	DeletedBy    *string `json:"deleted_by"`
	DeleteReason *string `json:"delete_reason"`
}

// HealthThresholds are the thresholds a release health was judged with.
type HealthThresholds struct {
	SuccessDrop         float64 `json:"success_drop"`
	ErrorRateMultiplier float64 `json:"error_rate_multiplier"`
}

// ReleaseHealthResponse is GET /v1/skills/releases/{id}/health.
type ReleaseHealthResponse struct {
	ReleaseID           string           `json:"release_id"`
	SkillKey            string           `json:"skill_key"`
	Stage               string           `json:"stage"`
	WindowStartAt       Time             `json:"window_start_at"`
	WindowEndAt         Time             `json:"window_end_at"`
	WindowComplete      bool             `json:"window_complete"`
	Samples             int              `json:"samples"`
	SuccessRate         float64          `json:"success_rate"`
	ErrorRate           float64          `json:"error_rate"`
	P95Duration         int64            `json:"p95_duration"`
	BaselineSuccessRate float64          `json:"baseline_success_rate"`
	BaselineErrorRate   float64          `json:"baseline_error_rate"`
	BaselineSamples     int              `json:"baseline_samples"`
	SuccessDrop         float64          `json:"success_drop"`
	ErrorRateMultiplier float64          `json:"error_rate_multiplier"`
	Healthy             bool             `json:"healthy"`
	ShouldRollback      bool             `json:"should_rollback"`
	RollbackReasons     []string         `json:"rollback_reasons"`
	Thresholds          HealthThresholds `json:"thresholds"`
}

// BrowserTraceResponse is GET .../browser/traces/{trace_ref}.
type BrowserTraceResponse struct {
	TraceRef string          `json:"trace_ref"`
	Trace    json.RawMessage `json:"trace"`
}

// SkillRunRequest is POST .../browser/skills/{skill_key}/run.
type SkillRunRequest struct {
	Timeout      *Int    `json:"timeout,omitempty" minimum:"1" maximum:"600" doc:"seconds for the whole replay, default 60"`
	StopOnError  *bool   `json:"stop_on_error,omitempty" doc:"default true"`
	IncludeTrace bool    `json:"include_trace,omitempty"`
	Description  *string `json:"description,omitempty" maxLength:"4096"`
	Tags         *string `json:"tags,omitempty" maxLength:"1024"`
}

// SkillRunResponse is the answer of a skill run: the replayed batch and the release.
type SkillRunResponse struct {
	SkillKey        string        `json:"skill_key"`
	ReleaseID       string        `json:"release_id"`
	ExecutionID     string        `json:"execution_id"`
	ExecutionTimeMS int64         `json:"execution_time_ms"`
	TraceRef        *string       `json:"trace_ref"`
	Results         []BrowserStep `json:"results"`
	TotalSteps      int           `json:"total_steps"`
	CompletedSteps  int           `json:"completed_steps"`
	Success         bool          `json:"success"`
	DurationMS      int64         `json:"duration_ms"`
}
