package bay

import (
	"context"
	"time"
)

// PrefixJob starts the id of a job.
const PrefixJob = "job"

// Job statuses. JobStarting is bay's own: the row exists, the runtime may not have the job yet
// (clients see it as running). Every other status but JobRunning is final.
const (
	JobStarting  = "starting"
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
	JobTimedOut  = "timed_out"
	JobCancelled = "cancelled"
	JobLost      = "lost"
)

// JobFinal reports whether status is final.
func JobFinal(status string) bool { return status != JobStarting && status != JobRunning }

// Job is a long-running command started in a sandbox's runtime (ship keeps its process, output
// and status; bay keeps this row). Its environment is never stored: it may hold secrets.
type Job struct {
	ID        string
	Owner     string
	SandboxID string
	SessionID string // the session whose runtime runs it
	Kind      string // "shell" or "python"
	Command   string // the shell command line, or the Python code
	Cwd       *string
	// TimeoutSeconds is the timeout in force.
	TimeoutSeconds int64
	Description    *string
	Tags           *string
	Status         string
	ExitCode       *int
	Reason         string // why it is lost, timed out or cancelled
	StdoutBytes    int64
	StderrBytes    int64
	// Truncated: the stream went over the runtime's cap; what followed was dropped.
	StdoutTruncated bool
	StderrTruncated bool
	CreatedAt       time.Time
	StartedAt       *time.Time
	EndedAt         *time.Time
	// Artifacts are the files the job created or changed under its output paths, known once
	// it ended; ArtifactsNote says why they are missing or incomplete.
	Artifacts     []Artifact
	ArtifactsNote string
}

// Artifact is a file a job created or changed.
type Artifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	Change string `json:"change"` // "created" or "modified"
}

// JobQuery selects jobs, newest first (created_at DESC, id DESC). Zero fields do not filter.
type JobQuery struct {
	Owner     string
	SandboxID string
	Statuses  []string
	Limit     int // 0 = no limit
	Offset    int
}

// JobReader reads jobs; getters wrap ErrNotFound when the row is missing.
type JobReader interface {
	GetJob(ctx context.Context, id string) (*Job, error)
	// ListJobs returns one page and the total count of matches.
	ListJobs(ctx context.Context, q JobQuery) ([]*Job, int, error)
}

// JobWriter writes jobs.
type JobWriter interface {
	// InsertJob inserts j; an existing id wraps ErrConflict.
	InsertJob(ctx context.Context, j *Job) error
	// UpdateJob writes every field of j; a missing row wraps ErrNotFound.
	UpdateJob(ctx context.Context, j *Job) error
}
