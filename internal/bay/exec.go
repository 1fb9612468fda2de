package bay

import "time"

// ExecStatus is where an audited execution stands.
type ExecStatus string

const (
	ExecQueued    ExecStatus = "queued"
	ExecRunning   ExecStatus = "running"
	ExecSucceeded ExecStatus = "succeeded"
	ExecFailed    ExecStatus = "failed"
	ExecTimedOut  ExecStatus = "timed_out"
	ExecCancelled ExecStatus = "cancelled"
	// ExecLost: bay stopped while the execution ran and, on its return (or when another bay
	// adopted it from a bay that went away), its container was gone or it could not go on.
	ExecLost ExecStatus = "lost"
)

// Valid reports whether s is one of the statuses.
func (s ExecStatus) Valid() bool {
	switch s {
	case ExecQueued, ExecRunning, ExecSucceeded, ExecFailed, ExecTimedOut, ExecCancelled, ExecLost:
		return true
	}
	return false
}

// Final reports whether the status is an outcome (nothing changes it any more).
func (s ExecStatus) Final() bool { return s != ExecQueued && s != ExecRunning }

// PrefixExec starts the id of an audited execution.
const PrefixExec = "sbx-exec"

// ExecInstancePrefix starts the driver instance name of an audited execution.
const ExecInstancePrefix = "bay-exec-"

// CodeQuotaExceeded: a bounded resource (the execution queue) is full; try again later.
const CodeQuotaExceeded = "quota_exceeded"

// ExecRecord is the audit record of one audited execution: written before its container starts,
// finalised on every outcome. It never holds an environment value, only the keys.
type ExecRecord struct {
	ID             string `json:"exec_id"`
	Owner          string `json:"owner"`
	ProjectID      string `json:"project_id"`
	TaskID         string `json:"task_id,omitempty"`
	ConversationID string `json:"conversation_id,omitempty"`
	SkillID        string `json:"skill_id,omitempty"`
	// SkillVersion is the version of SkillID the exec ran (mounted at /skills/<id>).
	SkillVersion string     `json:"skill_version,omitempty"`
	Image        string     `json:"image"`
	Kind         string     `json:"kind"`
	Cmd          string     `json:"cmd"`
	Args         []string   `json:"args"`
	Cwd          string     `json:"cwd"`
	EnvKeys      []string   `json:"env_keys"`
	Policy       ExecPolicy `json:"policy_snapshot"`
	Status       ExecStatus `json:"status"`
	ExitCode     *int       `json:"exit_code"`
	ErrorReason  string     `json:"error_reason,omitempty"`
	// ArtifactsPath is the execution's artifact directory relative to the workspace root
	// ("projects/<owner>/<project>/artifacts/<exec_id>").
	ArtifactsPath   string     `json:"artifacts_path"`
	StdoutTruncated bool       `json:"stdout_truncated"`
	StderrTruncated bool       `json:"stderr_truncated"`
	Instance        string     `json:"instance"`
	BayInstance     string     `json:"bay_instance"` // the bay (instance id) that ran it
	CreatedAt       time.Time  `json:"created_at"`
	StartedAt       *time.Time `json:"started_at"`
	EndedAt         *time.Time `json:"ended_at"`
	DurationMS      int64      `json:"duration_ms"`
}

// ExecQuery selects audited executions, newest first (created_at DESC, id DESC). Zero fields
// do not filter.
type ExecQuery struct {
	Owner     string
	ProjectID string
	TaskID    string
	Statuses  []ExecStatus
	Limit     int // 0 = no limit
	Offset    int
}
