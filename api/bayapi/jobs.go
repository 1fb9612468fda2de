package bayapi

// Jobs: long-running commands in a sandbox, started without waiting (202), followed live
// through Server-Sent Events with byte offsets per stream, cancelled as a whole process group.

// Paths of the jobs API.
const (
	PathJobs      = "/v1/sandboxes/{sandbox_id}/jobs"
	PathJob       = "/v1/sandboxes/{sandbox_id}/jobs/{job_id}"
	PathJobOutput = "/v1/sandboxes/{sandbox_id}/jobs/{job_id}/output"
	PathJobCancel = "/v1/sandboxes/{sandbox_id}/jobs/{job_id}/cancel"
)

// Job kinds and statuses (running is the only status that is not final).
const (
	JobKindShell  = "shell"
	JobKindPython = "python"

	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
	JobTimedOut  = "timed_out"
	JobCancelled = "cancelled"
	JobLost      = "lost"
)

// JobStatuses lists every job status, for filters.
var JobStatuses = []string{JobRunning, JobSucceeded, JobFailed, JobTimedOut, JobCancelled, JobLost}

// Bounds of the jobs API.
const (
	DefaultJobTimeout = 24 * 3600 // seconds
	MaxJobCommandLen  = 1 << 20   // bytes of a command or of Python code
	MaxJobEnvVars     = 256
	MaxJobEnvBytes    = 64 << 10 // keys and values together
	DefaultJobsLimit  = 50
	MaxJobsLimit      = 500
)

// StartJobRequest is POST /v1/sandboxes/{id}/jobs.
type StartJobRequest struct {
	Kind        string            `json:"kind" enum:"shell,python"`
	Command     *string           `json:"command,omitempty" doc:"bash command line (kind shell)"`
	Code        *string           `json:"code,omitempty" doc:"Python program (kind python)"`
	Cwd         *string           `json:"cwd,omitempty" maxLength:"4000"`
	Env         map[string]string `json:"env,omitempty"`
	Timeout     *Int              `json:"timeout,omitempty" minimum:"1" doc:"seconds, default and maximum jobs.max_duration (24 h)"`
	Description *string           `json:"description,omitempty" maxLength:"4096"`
	Tags        *string           `json:"tags,omitempty" maxLength:"1024"`
	OutputPaths []string          `json:"output_paths,omitempty" doc:"workspace paths whose created or changed files are reported as created_artifacts (default the workspace; at most 32)"`
}

// MaxJobOutputPaths bounds a job's output paths.
const MaxJobOutputPaths = 32

// Artifact is a file a job created or changed under its output paths.
type Artifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty" doc:"missing past 256 MiB hashed per job"`
	Change string `json:"change" enum:"created,modified"`
}

// StartJobResponse is the 202 answer of a job start.
type StartJobResponse struct {
	JobID     string `json:"job_id"`
	Status    string `json:"status"`
	StartedAt Time   `json:"started_at"`
}

// JobStream describes one output stream of a job.
type JobStream struct {
	Bytes     int64 `json:"bytes" doc:"bytes kept and readable"`
	Truncated bool  `json:"truncated" doc:"the stream went over the runtime's cap; what followed was dropped"`
}

// JobResponse describes a job.
type JobResponse struct {
	JobID          string    `json:"job_id"`
	SandboxID      string    `json:"sandbox_id"`
	Kind           string    `json:"kind"`
	Command        string    `json:"command" doc:"the command line, or the Python code"`
	Cwd            *string   `json:"cwd"`
	Status         string    `json:"status"`
	ExitCode       *int      `json:"exit_code"`
	Reason         *string   `json:"reason" doc:"why the job is lost, timed out or cancelled"`
	TimeoutSeconds int64     `json:"timeout"`
	Description    *string   `json:"description"`
	Tags           *string   `json:"tags"`
	CreatedAt      Time      `json:"created_at"`
	StartedAt      *Time     `json:"started_at"`
	EndedAt        *Time     `json:"ended_at"`
	Stdout         JobStream `json:"stdout"`
	Stderr         JobStream `json:"stderr"`
	// CreatedArtifacts: set once the job ended ([] when it created or changed nothing).
	CreatedArtifacts []Artifact `json:"created_artifacts"`
	ArtifactsNote    *string    `json:"artifacts_note,omitempty"`
}

// JobList is GET /v1/sandboxes/{id}/jobs, newest first.
type JobList struct {
	Items []JobResponse `json:"items"`
	Total int           `json:"total"`
}

// JobChunk is a slice [Offset, Next) of one stream. Data is text: invalid UTF-8 shows as U+FFFD,
// offsets count the stored bytes. While a job runs a chunk never ends inside a UTF-8 sequence.
type JobChunk struct {
	Offset int64  `json:"offset"`
	Next   int64  `json:"next"`
	Data   string `json:"data"`
}

// JobOutputResponse is GET .../output without follow: what exists from the offsets (at most
// 1 MiB per stream; read on from Next).
type JobOutputResponse struct {
	Job    JobResponse `json:"job"`
	Stdout JobChunk    `json:"stdout"`
	Stderr JobChunk    `json:"stderr"`
}

// Server-Sent Events of GET .../output?follow=true (or Accept: text/event-stream). Each data
// event ("stdout" or "stderr") carries a JobChunk and the id "<stdout next>:<stderr next>", so
// a client that reconnects with that id as Last-Event-ID (or as stdout_offset and
// stderr_offset) resumes exactly. "end" carries the final JobResponse and closes the stream.
// Comments (": ping") keep an idle stream open.
const (
	JobEventStdout = "stdout"
	JobEventStderr = "stderr"
	JobEventEnd    = "end"
)

// Server-Sent Events of a streamed exec (POST .../shell/exec or .../python/exec with Accept:
// text/event-stream): "stdout" and "stderr" carry a JobChunk as the code prints, "display" (python)
// an ExecDisplayEvent per rich output as the kernel publishes it, and "result" the JSON a
// plain exec answers; "error" carries the error envelope of a failure after the first event.
const (
	ExecEventDisplay = "display"
	ExecEventResult  = "result"
	ExecEventError   = "error"
)

// ExecDisplayEvent is one rich output of a Python cell (display() or the cell's value): the
// string-valued MIME types of its bundle, such as text/plain, text/html and image/png (base64).
type ExecDisplayEvent struct {
	Type string            `json:"type"` // display_data or execute_result
	Data map[string]string `json:"data"`
}
