package bayapi

import (
	"encoding/json"
	"time"
)

// Audited one-shot executions (ours): POST /v1/sandbox/execs runs one command for a project
// in a fresh container without network, under a policy that may only be tightened, and keeps
// an audit record and the exec's artifacts with a manifest.
const (
	PathExecs         = "/v1/sandbox/execs"
	PathExec          = "/v1/sandbox/execs/{exec_id}"
	PathExecArtifacts = "/v1/sandbox/execs/{exec_id}/artifacts"
	PathExecArtifact  = "/v1/sandbox/execs/{exec_id}/artifacts/{path...}"
	PathExecCancel    = "/v1/sandbox/execs/{exec_id}/cancel"
	PathExecsHealth   = "/v1/sandbox/health"
	DefaultExecsLimit = 50
	MaxExecsLimit     = 200
	MaxExecsOffset    = 100_000
)

// ExecStatuses are the statuses of an exec, in the order of its life.
var ExecStatuses = []string{"queued", "running", "succeeded", "failed", "timed_out", "cancelled", "lost"}

// ExecCommand is the command of an exec: kind shell runs bash (args like ["-lc", script]),
// kind python runs python3 or python (args like ["-c", code] or ["/workspace/inputs/main.py"]).
type ExecCommand struct {
	Kind    string            `json:"kind"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// ExecInput is a file bay writes into the project's inputs/ before the exec: exactly one of
// content (text) and content_base64.
type ExecInput struct {
	Path          string  `json:"path"`
	Content       *string `json:"content,omitempty"`
	ContentBase64 *string `json:"content_base64,omitempty"`
}

// TaskRef ties an exec to the caller's task and conversation (audit only).
type TaskRef struct {
	TaskID         string `json:"task_id,omitempty"`
	ConversationID string `json:"conversation_id,omitempty"`
}

// CreateExecRequest is the body of POST /v1/sandbox/execs. policy_overrides holds policy
// fields (net_mode, timeout_ms, max_stdout_bytes, max_stderr_bytes, max_artifacts_bytes_total,
// memory_mb, cpu_cores, pids, max_input_bytes, max_inputs_bytes_total, max_output_bytes,
// max_outputs_bytes_total); each may only lower what the settings and the skill allow. wait
// defaults to true; false answers 202 at once.
type CreateExecRequest struct {
	ProjectID       string          `json:"project_id"`
	SkillID         string          `json:"skill_id,omitempty"`
	Exec            ExecCommand     `json:"exec"`
	Inputs          []ExecInput     `json:"inputs,omitempty"`
	PolicyOverrides json.RawMessage `json:"policy_overrides,omitempty"`
	TaskRef         *TaskRef        `json:"task_ref,omitempty"`
	Wait            *bool           `json:"wait,omitempty"`
}

// ExecResponse is an exec's audit record. Paths are relative to the workspace root.
type ExecResponse struct {
	ExecID          string          `json:"exec_id"`
	Status          string          `json:"status"`
	ExitCode        *int            `json:"exit_code"`
	ErrorReason     string          `json:"error_reason,omitempty"`
	ProjectID       string          `json:"project_id"`
	TaskID          string          `json:"task_id,omitempty"`
	ConversationID  string          `json:"conversation_id,omitempty"`
	SkillID         string          `json:"skill_id,omitempty"`
	SkillVersion    string          `json:"skill_version,omitempty"`
	Image           string          `json:"image"`
	Kind            string          `json:"kind"`
	Cmd             string          `json:"cmd"`
	Args            []string        `json:"args"`
	Cwd             string          `json:"cwd"`
	EnvKeys         []string        `json:"env_keys"`
	PolicySnapshot  json.RawMessage `json:"policy_snapshot"`
	ArtifactsDir    string          `json:"artifacts_dir"`
	StdoutPath      string          `json:"stdout_path"`
	StderrPath      string          `json:"stderr_path"`
	StdoutTruncated bool            `json:"stdout_truncated"`
	StderrTruncated bool            `json:"stderr_truncated"`
	CreatedAt       time.Time       `json:"created_at"`
	StartedAt       *time.Time      `json:"started_at"`
	EndedAt         *time.Time      `json:"ended_at"`
	DurationMS      int64           `json:"duration_ms"`
}

// ExecList is one page of execs, newest first.
type ExecList struct {
	Items  []ExecResponse `json:"items"`
	Total  int            `json:"total"`
	Limit  int            `json:"limit"`
	Offset int            `json:"offset"`
}

// ArtifactEntry is one file of an exec's artifacts.
type ArtifactEntry struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ArtifactList is an exec's manifest: the files kept, those dropped for the caps (and why),
// and entries skipped for not being regular files.
type ArtifactList struct {
	ExecID     string          `json:"exec_id"`
	Files      []ArtifactEntry `json:"files"`
	TotalBytes int64           `json:"total_bytes"`
	Dropped    []ArtifactEntry `json:"dropped,omitempty"`
	DropReason string          `json:"drop_reason,omitempty"`
	Skipped    []string        `json:"skipped,omitempty"`
}
