package sdk

import (
	"encoding/json"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// The result types of the skill library and the skill lifecycle. See wire.go for the rules
// that map them to the wire.

// ---- the library ----

// SkillSummary is one skill of the library: the light first step of progressive loading.
type SkillSummary struct {
	Name        string
	Description string
	Version     string // sha256 hex of the content
	Kind        string // knowledge or invocable
	HasScripts  bool
	// HasTemplates, HasReferences and HasAssets say the skill has those folders.
	HasTemplates  bool
	HasReferences bool
	HasAssets     bool
	// Manifest is the invocable skill's interface; nil for a knowledge skill.
	Manifest  *ManifestSummary
	SizeBytes int64
	// CreatedAt is when this version was first stored.
	CreatedAt      time.Time
	UploadedBy     string
	MountPath      string // where a sandbox sees it
	FileCount      int
	ManifestSHA256 string
}

// ManifestSummary is the part of an invocable skill's manifest.json a client needs to pick
// and call it; Inputs and Outputs are the JSON Schemas of interface.inputs and .outputs.
type ManifestSummary struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Image       string         `json:"image"`
	Inputs      map[string]any `json:"inputs"`
	Outputs     map[string]any `json:"outputs"`
}

func summaryFromWire(w *bayapi.SkillSummary) SkillSummary {
	s := SkillSummary{Name: w.Name, Description: w.Description, Version: w.Version, Kind: w.Kind, HasScripts: w.HasScripts,
		HasTemplates: w.HasTemplates, HasReferences: w.HasReferences, HasAssets: w.HasAssets, SizeBytes: w.SizeBytes,
		CreatedAt: w.CreatedAt.Time, UploadedBy: w.UploadedBy, MountPath: w.MountPath, FileCount: w.FileCount, ManifestSHA256: w.ManifestSHA256}
	if w.Manifest != nil {
		m := ManifestSummary(*w.Manifest)
		s.Manifest = &m
	}
	return s
}

func (s *SkillSummary) wire() bayapi.SkillSummary {
	w := bayapi.SkillSummary{Name: s.Name, Description: s.Description, Version: s.Version, Kind: s.Kind, HasScripts: s.HasScripts,
		HasTemplates: s.HasTemplates, HasReferences: s.HasReferences, HasAssets: s.HasAssets, SizeBytes: s.SizeBytes,
		CreatedAt: wtime(s.CreatedAt), UploadedBy: s.UploadedBy, MountPath: s.MountPath, FileCount: s.FileCount, ManifestSHA256: s.ManifestSHA256}
	if s.Manifest != nil {
		m := bayapi.ManifestSummary(*s.Manifest)
		w.Manifest = &m
	}
	return w
}

// MarshalJSON renders the summary as bay's skill summary.
func (s SkillSummary) MarshalJSON() ([]byte, error) { return json.Marshal(s.wire()) }

// UnmarshalJSON reads bay's skill summary.
func (s *SkillSummary) UnmarshalJSON(b []byte) error { return decodeAs(b, s, summaryFromWire) }

// SkillList is the library.
type SkillList struct {
	Items []SkillSummary `json:"items"`
}

// SkillFile is one file of a skill version.
type SkillFile struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256,omitempty"`
	Executable bool   `json:"executable,omitempty"`
	Link       string `json:"link,omitempty"` // a symbolic link's target
}

// SkillDetail is one skill: its summary, SKILL.md, the whole manifest.json (nil for a
// knowledge skill) and its files.
type SkillDetail struct {
	SkillSummary
	SkillMD      string
	ManifestJSON map[string]any
	Files        []SkillFile
}

// MarshalJSON renders the skill as bay's skill object.
func (d SkillDetail) MarshalJSON() ([]byte, error) {
	return json.Marshal(bayapi.SkillDetail{SkillSummary: d.SkillSummary.wire(), SkillMD: d.SkillMD, Manifest: d.ManifestJSON,
		Files: convert(d.Files, func(f *SkillFile) bayapi.SkillFile { return bayapi.SkillFile(*f) })})
}

// UnmarshalJSON reads bay's skill object.
func (d *SkillDetail) UnmarshalJSON(b []byte) error {
	return decodeAs(b, d, func(w *bayapi.SkillDetail) SkillDetail {
		return SkillDetail{SkillSummary: summaryFromWire(&w.SkillSummary), SkillMD: w.SkillMD, ManifestJSON: w.Manifest,
			Files: convert(w.Files, func(f *bayapi.SkillFile) SkillFile { return SkillFile(*f) })}
	})
}

// SkillProblem is one validation finding: the file (a path inside the skill, or the archive
// entry), the field (a front matter key, a JSON pointer into manifest.json, or "" for the
// whole file) and what is wrong.
type SkillProblem struct {
	File    string `json:"file"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// SkillValidation is the verdict on a skill archive.
type SkillValidation struct {
	Valid    bool           `json:"valid"`
	Name     string         `json:"name,omitempty"`
	Version  string         `json:"version,omitempty"`
	Kind     string         `json:"kind,omitempty"`
	Errors   []SkillProblem `json:"errors"`
	Warnings []SkillProblem `json:"warnings"`
}

// SkillUpload is the answer of an upload: the stored version; Created is false when that
// exact version already was current.
type SkillUpload struct {
	Skill    SkillSummary   `json:"skill"`
	Created  bool           `json:"created"`
	Warnings []SkillProblem `json:"warnings"`
}

// ---- the lifecycle ----

// SkillPayloadRef names a stored payload.
type SkillPayloadRef struct {
	PayloadRef string `json:"payload_ref"` // blob:<id>
	Kind       string `json:"kind"`
}

// SkillPayload is a stored payload with its JSON content.
type SkillPayload struct {
	PayloadRef string          `json:"payload_ref"`
	Kind       string          `json:"kind"`
	Payload    json.RawMessage `json:"payload"`
}

// SkillCandidate is a proposed skill. Optional text fields are "" when unset; times are zero
// when the event has not happened.
type SkillCandidate struct {
	ID                  string
	SkillKey            string
	ScenarioKey         string
	PayloadRef          string
	SkillType           string
	AutoReleaseEligible bool
	AutoReleaseReason   string
	Summary             string
	UsageNotes          string
	Preconditions       json.RawMessage
	Postconditions      json.RawMessage
	SourceExecutionIDs  []string
	Status              string
	// LatestScore is the latest evaluation's score (nil: none gave one); LatestPass its
	// verdict (nil: never evaluated).
	LatestScore        *float64
	LatestPass         *bool
	LastEvaluatedAt    time.Time
	PromotionReleaseID string
	CreatedBy          string
	CreatedAt          time.Time
	UpdatedAt          time.Time
	IsDeleted          bool
	DeletedAt          time.Time
	DeletedBy          string
	DeleteReason       string
}

func candidateFromWire(w *bayapi.SkillCandidateResponse) SkillCandidate {
	return SkillCandidate{ID: w.ID, SkillKey: w.SkillKey, ScenarioKey: str(w.ScenarioKey), PayloadRef: str(w.PayloadRef),
		SkillType: w.SkillType, AutoReleaseEligible: w.AutoReleaseEligible, AutoReleaseReason: str(w.AutoReleaseReason),
		Summary: str(w.Summary), UsageNotes: str(w.UsageNotes), Preconditions: w.Preconditions, Postconditions: w.Postconditions,
		SourceExecutionIDs: w.SourceExecutionIDs, Status: w.Status, LatestScore: w.LatestScore, LatestPass: w.LatestPass,
		LastEvaluatedAt: optTime(w.LastEvaluatedAt), PromotionReleaseID: str(w.PromotionReleaseID), CreatedBy: str(w.CreatedBy),
		CreatedAt: w.CreatedAt.Time, UpdatedAt: w.UpdatedAt.Time, IsDeleted: w.IsDeleted, DeletedAt: optTime(w.DeletedAt),
		DeletedBy: str(w.DeletedBy), DeleteReason: str(w.DeleteReason)}
}

func (c *SkillCandidate) wire() bayapi.SkillCandidateResponse {
	return bayapi.SkillCandidateResponse{ID: c.ID, SkillKey: c.SkillKey, ScenarioKey: optStr(c.ScenarioKey), PayloadRef: optStr(c.PayloadRef),
		SkillType: c.SkillType, AutoReleaseEligible: c.AutoReleaseEligible, AutoReleaseReason: optStr(c.AutoReleaseReason),
		Summary: optStr(c.Summary), UsageNotes: optStr(c.UsageNotes), Preconditions: c.Preconditions, Postconditions: c.Postconditions,
		SourceExecutionIDs: c.SourceExecutionIDs, Status: c.Status, LatestScore: c.LatestScore, LatestPass: c.LatestPass,
		LastEvaluatedAt: wOptTime(c.LastEvaluatedAt), PromotionReleaseID: optStr(c.PromotionReleaseID), CreatedBy: optStr(c.CreatedBy),
		CreatedAt: wtime(c.CreatedAt), UpdatedAt: wtime(c.UpdatedAt), IsDeleted: c.IsDeleted, DeletedAt: wOptTime(c.DeletedAt),
		DeletedBy: optStr(c.DeletedBy), DeleteReason: optStr(c.DeleteReason)}
}

// MarshalJSON renders the candidate as bay's candidate object.
func (c SkillCandidate) MarshalJSON() ([]byte, error) { return json.Marshal(c.wire()) }

// UnmarshalJSON reads bay's candidate object.
func (c *SkillCandidate) UnmarshalJSON(b []byte) error { return decodeAs(b, c, candidateFromWire) }

// SkillCandidateList is a page of candidates, newest first.
type SkillCandidateList struct {
	Items []SkillCandidate `json:"items"`
	Total int              `json:"total"`
}

// SkillEvaluation is a recorded evaluation of a candidate.
type SkillEvaluation struct {
	ID          string
	CandidateID string
	BenchmarkID string
	// Score is nil when the evaluation gave none.
	Score       *float64
	Passed      bool
	Report      string
	EvaluatedBy string
	CreatedAt   time.Time
}

// MarshalJSON renders the evaluation as bay's evaluation object.
func (e SkillEvaluation) MarshalJSON() ([]byte, error) {
	return json.Marshal(bayapi.SkillEvaluationResponse{ID: e.ID, CandidateID: e.CandidateID, BenchmarkID: optStr(e.BenchmarkID),
		Score: e.Score, Passed: e.Passed, Report: optStr(e.Report), EvaluatedBy: optStr(e.EvaluatedBy), CreatedAt: wtime(e.CreatedAt)})
}

// UnmarshalJSON reads bay's evaluation object.
func (e *SkillEvaluation) UnmarshalJSON(b []byte) error {
	return decodeAs(b, e, func(w *bayapi.SkillEvaluationResponse) SkillEvaluation {
		return SkillEvaluation{ID: w.ID, CandidateID: w.CandidateID, BenchmarkID: str(w.BenchmarkID), Score: w.Score, Passed: w.Passed,
			Report: str(w.Report), EvaluatedBy: str(w.EvaluatedBy), CreatedAt: w.CreatedAt.Time}
	})
}

// SkillRelease is a released skill version. Optional text fields are "" when unset; times
// are zero when the event has not happened.
type SkillRelease struct {
	ID                 string
	SkillKey           string
	CandidateID        string
	Version            int
	Stage              string // canary or stable
	IsActive           bool
	ReleaseMode        string
	PromotedBy         string
	PromotedAt         time.Time
	RollbackOf         string
	AutoPromotedFrom   string
	HealthWindowEndAt  time.Time
	UpgradeOfReleaseID string
	UpgradeReason      string
	ChangeSummary      string
	IsDeleted          bool
	DeletedAt          time.Time
	DeletedBy          string
	DeleteReason       string
}

func releaseFromWire(w *bayapi.SkillReleaseResponse) SkillRelease {
	return SkillRelease{ID: w.ID, SkillKey: w.SkillKey, CandidateID: w.CandidateID, Version: w.Version, Stage: w.Stage,
		IsActive: w.IsActive, ReleaseMode: w.ReleaseMode, PromotedBy: str(w.PromotedBy), PromotedAt: w.PromotedAt.Time,
		RollbackOf: str(w.RollbackOf), AutoPromotedFrom: str(w.AutoPromotedFrom), HealthWindowEndAt: optTime(w.HealthWindowEndAt),
		UpgradeOfReleaseID: str(w.UpgradeOfReleaseID), UpgradeReason: str(w.UpgradeReason), ChangeSummary: str(w.ChangeSummary),
		IsDeleted: w.IsDeleted, DeletedAt: optTime(w.DeletedAt), DeletedBy: str(w.DeletedBy), DeleteReason: str(w.DeleteReason)}
}

func (r *SkillRelease) wire() bayapi.SkillReleaseResponse {
	return bayapi.SkillReleaseResponse{ID: r.ID, SkillKey: r.SkillKey, CandidateID: r.CandidateID, Version: r.Version, Stage: r.Stage,
		IsActive: r.IsActive, ReleaseMode: r.ReleaseMode, PromotedBy: optStr(r.PromotedBy), PromotedAt: wtime(r.PromotedAt),
		RollbackOf: optStr(r.RollbackOf), AutoPromotedFrom: optStr(r.AutoPromotedFrom), HealthWindowEndAt: wOptTime(r.HealthWindowEndAt),
		UpgradeOfReleaseID: optStr(r.UpgradeOfReleaseID), UpgradeReason: optStr(r.UpgradeReason), ChangeSummary: optStr(r.ChangeSummary),
		IsDeleted: r.IsDeleted, DeletedAt: wOptTime(r.DeletedAt), DeletedBy: optStr(r.DeletedBy), DeleteReason: optStr(r.DeleteReason)}
}

// MarshalJSON renders the release as bay's release object.
func (r SkillRelease) MarshalJSON() ([]byte, error) { return json.Marshal(r.wire()) }

// UnmarshalJSON reads bay's release object.
func (r *SkillRelease) UnmarshalJSON(b []byte) error { return decodeAs(b, r, releaseFromWire) }

// SkillReleaseList is a page of releases, newest first.
type SkillReleaseList struct {
	Items []SkillRelease `json:"items"`
	Total int            `json:"total"`
}

// Deleted is the answer of a skill lifecycle DELETE.
type Deleted struct {
	ID           string
	DeletedAt    time.Time
	DeletedBy    string
	DeleteReason string
}

// MarshalJSON renders the answer as bay's deletion object.
func (d Deleted) MarshalJSON() ([]byte, error) {
	return json.Marshal(bayapi.DeletedResponse{ID: d.ID, DeletedAt: wOptTime(d.DeletedAt), DeletedBy: optStr(d.DeletedBy), DeleteReason: optStr(d.DeleteReason)})
}

// UnmarshalJSON reads bay's deletion object.
func (d *Deleted) UnmarshalJSON(b []byte) error {
	return decodeAs(b, d, func(w *bayapi.DeletedResponse) Deleted {
		return Deleted{ID: w.ID, DeletedAt: optTime(w.DeletedAt), DeletedBy: str(w.DeletedBy), DeleteReason: str(w.DeleteReason)}
	})
}

// HealthThresholds are the thresholds a release's health was judged with.
type HealthThresholds struct {
	SuccessDrop         float64 `json:"success_drop"`
	ErrorRateMultiplier float64 `json:"error_rate_multiplier"`
}

// ReleaseHealth is a release's health over its window against the previous release.
type ReleaseHealth struct {
	ReleaseID           string
	SkillKey            string
	Stage               string
	WindowStartAt       time.Time
	WindowEndAt         time.Time
	WindowComplete      bool
	Samples             int
	SuccessRate         float64
	ErrorRate           float64
	P95Duration         time.Duration // milliseconds on the wire
	BaselineSuccessRate float64
	BaselineErrorRate   float64
	BaselineSamples     int
	SuccessDrop         float64
	ErrorRateMultiplier float64
	Healthy             bool
	ShouldRollback      bool
	RollbackReasons     []string
	Thresholds          HealthThresholds
}

// MarshalJSON renders the health as bay's release health object.
func (h ReleaseHealth) MarshalJSON() ([]byte, error) {
	return json.Marshal(bayapi.ReleaseHealthResponse{ReleaseID: h.ReleaseID, SkillKey: h.SkillKey, Stage: h.Stage,
		WindowStartAt: wtime(h.WindowStartAt), WindowEndAt: wtime(h.WindowEndAt), WindowComplete: h.WindowComplete, Samples: h.Samples,
		SuccessRate: h.SuccessRate, ErrorRate: h.ErrorRate, P95Duration: h.P95Duration.Milliseconds(), BaselineSuccessRate: h.BaselineSuccessRate,
		BaselineErrorRate: h.BaselineErrorRate, BaselineSamples: h.BaselineSamples, SuccessDrop: h.SuccessDrop,
		ErrorRateMultiplier: h.ErrorRateMultiplier, Healthy: h.Healthy, ShouldRollback: h.ShouldRollback,
		RollbackReasons: h.RollbackReasons, Thresholds: bayapi.HealthThresholds(h.Thresholds)})
}

// UnmarshalJSON reads bay's release health object.
func (h *ReleaseHealth) UnmarshalJSON(b []byte) error {
	return decodeAs(b, h, func(w *bayapi.ReleaseHealthResponse) ReleaseHealth {
		return ReleaseHealth{ReleaseID: w.ReleaseID, SkillKey: w.SkillKey, Stage: w.Stage, WindowStartAt: w.WindowStartAt.Time,
			WindowEndAt: w.WindowEndAt.Time, WindowComplete: w.WindowComplete, Samples: w.Samples, SuccessRate: w.SuccessRate,
			ErrorRate: w.ErrorRate, P95Duration: millis(w.P95Duration), BaselineSuccessRate: w.BaselineSuccessRate,
			BaselineErrorRate: w.BaselineErrorRate, BaselineSamples: w.BaselineSamples, SuccessDrop: w.SuccessDrop,
			ErrorRateMultiplier: w.ErrorRateMultiplier, Healthy: w.Healthy, ShouldRollback: w.ShouldRollback,
			RollbackReasons: w.RollbackReasons, Thresholds: HealthThresholds(w.Thresholds)}
	})
}

// BrowserTrace is a kept browser trace.
type BrowserTrace struct {
	TraceRef string          `json:"trace_ref"`
	Trace    json.RawMessage `json:"trace"`
}

// SkillRunResult is the answer of a browser skill replay: the replayed batch and the release.
type SkillRunResult struct {
	SkillKey       string
	ReleaseID      string
	ExecutionID    string
	ExecutionTime  time.Duration // milliseconds on the wire
	TraceRef       string        // "" unless the request asked for a trace
	Results        []BrowserStep
	TotalSteps     int
	CompletedSteps int
	Success        bool
	Duration       time.Duration // milliseconds on the wire
}

// MarshalJSON renders the result as bay's skill run answer.
func (r SkillRunResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(bayapi.SkillRunResponse{SkillKey: r.SkillKey, ReleaseID: r.ReleaseID, ExecutionID: r.ExecutionID,
		ExecutionTimeMS: r.ExecutionTime.Milliseconds(), TraceRef: optStr(r.TraceRef), Results: convert(r.Results, (*BrowserStep).wire),
		TotalSteps: r.TotalSteps, CompletedSteps: r.CompletedSteps, Success: r.Success, DurationMS: r.Duration.Milliseconds()})
}

// UnmarshalJSON reads bay's skill run answer.
func (r *SkillRunResult) UnmarshalJSON(b []byte) error {
	return decodeAs(b, r, func(w *bayapi.SkillRunResponse) SkillRunResult {
		return SkillRunResult{SkillKey: w.SkillKey, ReleaseID: w.ReleaseID, ExecutionID: w.ExecutionID,
			ExecutionTime: millis(w.ExecutionTimeMS), TraceRef: str(w.TraceRef), Results: convert(w.Results, stepFromWire),
			TotalSteps: w.TotalSteps, CompletedSteps: w.CompletedSteps, Success: w.Success, Duration: millis(w.DurationMS)}
	})
}
