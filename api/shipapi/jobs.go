package shipapi

// Jobs are long-running commands (shell or Python) that ship starts as the sandbox user in a
// process group of their own and watches: their output goes to files ship owns (outside the
// workspace, never readable or writable by user code), bounded per stream with truncation
// flags, and readable from any byte offset while the job runs and after it ended. Their state
// is kept in a status file, so a ship that restarts reports a job it was running as lost, with
// the reason.

// Paths of the jobs API: POST PathJobs starts a job, GET PathJobs lists them, GET
// PathJobs/{id} describes one, GET PathJobs/{id}+PathJobOutputSuffix reads its output (long
// poll with wait_ms), POST PathJobs/{id}+PathJobCancelSuffix cancels it.
const (
	PathJobs            = "/jobs"
	PathJobOutputSuffix = "/output"
	PathJobCancelSuffix = "/cancel"
)

// Job kinds.
const (
	JobKindShell  = "shell"
	JobKindPython = "python"
	// JobKindKernel runs Code as a cell of the sandbox's Python kernel, the one a python exec
	// uses (its variables and imports), serialised with every other cell. Its stdout and stderr
	// are the cell's stream messages, its display stream the rich outputs (DisplayEvent, one
	// JSON line each), and once it ended its output read carries the answer a python exec
	// gives (Python) or the error one would fail with (Error). A cancel interrupts the cell;
	// cwd, env and output paths do not apply.
	JobKindKernel = "kernel"
)

// Job statuses. Running is the only one that is not final.
const (
	JobRunning   = "running"
	JobSucceeded = "succeeded" // exit code 0
	JobFailed    = "failed"    // non-zero exit, or killed by a signal nobody asked for
	JobTimedOut  = "timed_out" // ran past its timeout: its process group was terminated
	JobCancelled = "cancelled" // cancelled through the API: its process group was terminated
	JobLost      = "lost"      // ship lost track of it (Reason says why)
)

// Bounds of the jobs API.
const (
	// MaxJobIDLen bounds a job id; ids are made of [A-Za-z0-9_-].
	MaxJobIDLen = 64
	// MaxJobWaitMS bounds the wait_ms of an output read.
	MaxJobWaitMS = 60_000
	// MaxJobReadBytes bounds the bytes of each stream one output read returns.
	MaxJobReadBytes = 1 << 20
)

// StartJobRequest is POST /jobs.
type StartJobRequest struct {
	// ID is the caller's id for the job ([A-Za-z0-9_-], 1..MaxJobIDLen); empty: ship makes one.
	// Starting a job under an id ship already has returns that job and starts nothing, so a
	// caller that lost the answer may retry without running the command twice.
	ID   string `json:"id,omitempty"`
	Kind string `json:"kind"` // JobKindShell or JobKindPython
	// Command is the bash command line of a shell job (run as `bash -lc`).
	Command string `json:"command,omitempty"`
	// Code is the program of a Python job (run by the sandbox's interpreter, unbuffered).
	Code string `json:"code,omitempty"`
	// Cwd is relative to the workspace (or absolute inside it); default the workspace.
	Cwd *string           `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
	// TimeoutSeconds ends the job (timed_out) after that long; 0: ship's maximum.
	TimeoutSeconds float64 `json:"timeout,omitempty"`
	// OutputPaths are the workspace paths whose files the job creates or changes are reported
	// as its artifacts (default the whole workspace).
	OutputPaths []string `json:"output_paths,omitempty"`
}

// Artifact is a file a job created or changed under its output paths.
type Artifact struct {
	Path   string `json:"path"` // workspace-relative
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"` // empty past 256 MiB hashed per job
	Change string `json:"change"`           // "created" or "modified"
}

// JobInfo describes a job.
type JobInfo struct {
	ID        string   `json:"id"`
	Kind      string   `json:"kind"`
	Status    string   `json:"status"`
	PID       int      `json:"pid,omitempty"`
	StartedAt float64  `json:"started_at"`          // Unix seconds
	EndedAt   *float64 `json:"ended_at,omitempty"`  // Unix seconds; set once final
	ExitCode  *int     `json:"exit_code,omitempty"` // -N when killed by signal N
	Reason    string   `json:"reason,omitempty"`    // why a job is lost, timed out or cancelled
	Timeout   float64  `json:"timeout_seconds"`     // the timeout in force
	Notice    string   `json:"notice,omitempty"`    // e.g. the pids-limit clean-up before the start
	Stdout    Stream   `json:"stdout"`
	Stderr    Stream   `json:"stderr"`
	// Display is the stream of a kernel job's rich outputs (nil for other kinds).
	Display *Stream `json:"display,omitempty"`
	// CreatedArtifacts are the files created or changed under the output paths, set once the
	// job ended (ArtifactsNote says why they are missing or incomplete).
	CreatedArtifacts []Artifact `json:"created_artifacts,omitempty"`
	ArtifactsNote    string     `json:"artifacts_note,omitempty"`
}

// Stream describes one output stream of a job.
type Stream struct {
	// Bytes are kept and readable (offsets 0..Bytes); Total were produced. Truncated: Total
	// went over the cap and what came after the first Bytes was dropped.
	Bytes     int64 `json:"bytes"`
	Total     int64 `json:"total"`
	Truncated bool  `json:"truncated"`
}

// ListJobsResponse is GET /jobs: every job ship keeps, oldest first.
type ListJobsResponse struct {
	Jobs []JobInfo `json:"jobs"`
}

// JobOutputResponse is GET /jobs/{id}/output?stdout_offset=N&stderr_offset=M&display_offset=D&wait_ms=W&max_bytes=B.
// Each stream's Data starts at the offset asked for (clamped to what exists) and ends before
// Next; Data never ends inside a UTF-8 sequence while the job runs, and is text with invalid
// UTF-8 shown as U+FFFD (offsets count the stored bytes). With wait_ms the answer waits until
// either stream has data past its offset or the job is final, at most that long.
type JobOutputResponse struct {
	Job    JobInfo     `json:"job"`
	Stdout StreamChunk `json:"stdout"`
	Stderr StreamChunk `json:"stderr"`
	// Display (kernel jobs) holds whole DisplayEvent lines only while the job runs.
	Display *StreamChunk `json:"display,omitempty"`
	// Python is a kernel job's answer once it ended, as a python exec answers; Error instead
	// when the cell could not run to an answer (the kernel died, could not start, ...), as a
	// python exec would fail.
	Python *ExecPythonResponse `json:"python,omitempty"`
	Error  *ErrorResponse      `json:"error,omitempty"`
}

// DisplayEvent is one rich output of a kernel cell: a display_data or execute_result message,
// with the string-valued MIME types of its bundle (text/plain, image/png in base64,
// text/html, ...).
type DisplayEvent struct {
	Type string            `json:"type"` // display_data or execute_result
	Data map[string]string `json:"data"`
}

// StreamChunk is a slice of one stream: bytes [Offset, Next).
type StreamChunk struct {
	Offset int64  `json:"offset"`
	Next   int64  `json:"next"`
	Data   string `json:"data"`
}
