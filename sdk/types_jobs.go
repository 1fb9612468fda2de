package sdk

import (
	"encoding/json"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// The result types of jobs and audited execs. See wire.go for the rules that map them to the
// wire.

// ---- jobs ----

// Job is a handle on a job: its last known state and the calls about it.
type Job struct {
	JobID     string
	SandboxID string
	Kind      string // shell or python
	// Command is the command line, or the Python code.
	Command string
	Cwd     string // "" = /workspace
	// Status is running, succeeded, failed, timed_out, cancelled or lost.
	Status string
	// ExitCode is the process's exit status; meaningful only when Exited is true (a job
	// still running, lost or cancelled before it started has none: null on the wire).
	ExitCode int
	Exited   bool
	// Reason says why the job is lost, timed out or cancelled; "" otherwise.
	Reason      string
	Timeout     time.Duration // whole seconds on the wire
	Description string
	Tags        string
	CreatedAt   time.Time
	// StartedAt and EndedAt are zero until the job started or ended.
	StartedAt time.Time
	EndedAt   time.Time
	Stdout    JobStream
	Stderr    JobStream
	// CreatedArtifacts are the files the job created or changed under its output paths; nil
	// while it runs, empty when it changed nothing.
	CreatedArtifacts []JobArtifact
	// ArtifactsNote says why the artifact list is incomplete; "" when it is not.
	ArtifactsNote string

	c *Client
}

// JobStream describes one output stream of a job.
type JobStream struct {
	// Bytes is what is kept and readable.
	Bytes int64 `json:"bytes"`
	// Truncated says the stream went over the runtime's cap; what followed was dropped.
	Truncated bool `json:"truncated"`
}

// JobArtifact is a file a job created or changed.
type JobArtifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"` // "" past the bytes bay hashes per job
	Change string `json:"change"`           // created or modified
}

func jobFromWire(w *bayapi.JobResponse) Job {
	j := Job{JobID: w.JobID, SandboxID: w.SandboxID, Kind: w.Kind, Command: w.Command, Cwd: str(w.Cwd), Status: w.Status,
		Reason: str(w.Reason), Timeout: seconds(w.TimeoutSeconds), Description: str(w.Description), Tags: str(w.Tags),
		CreatedAt: w.CreatedAt.Time, StartedAt: optTime(w.StartedAt), EndedAt: optTime(w.EndedAt),
		Stdout: JobStream(w.Stdout), Stderr: JobStream(w.Stderr), ArtifactsNote: str(w.ArtifactsNote),
		CreatedArtifacts: convert(w.CreatedArtifacts, func(a *bayapi.Artifact) JobArtifact { return JobArtifact(*a) })}
	if w.ExitCode != nil {
		j.ExitCode, j.Exited = *w.ExitCode, true
	}
	return j
}

func (j *Job) wire() bayapi.JobResponse {
	w := bayapi.JobResponse{JobID: j.JobID, SandboxID: j.SandboxID, Kind: j.Kind, Command: j.Command, Cwd: optStr(j.Cwd), Status: j.Status,
		Reason: optStr(j.Reason), TimeoutSeconds: int64(j.Timeout / time.Second), Description: optStr(j.Description), Tags: optStr(j.Tags),
		CreatedAt: wtime(j.CreatedAt), StartedAt: wOptTime(j.StartedAt), EndedAt: wOptTime(j.EndedAt),
		Stdout: bayapi.JobStream(j.Stdout), Stderr: bayapi.JobStream(j.Stderr), ArtifactsNote: optStr(j.ArtifactsNote),
		CreatedArtifacts: convert(j.CreatedArtifacts, func(a *JobArtifact) bayapi.Artifact { return bayapi.Artifact(*a) })}
	if j.Exited {
		n := j.ExitCode
		w.ExitCode = &n
	}
	return w
}

// MarshalJSON renders the job as bay's job object.
func (j Job) MarshalJSON() ([]byte, error) { return json.Marshal(j.wire()) }

// UnmarshalJSON reads bay's job object; the client binding is kept.
func (j *Job) UnmarshalJSON(b []byte) error {
	c := j.c
	err := decodeAs(b, j, jobFromWire)
	j.c = c
	return err
}

// JobList is a sandbox's jobs, newest first, bound to the client.
type JobList struct {
	Items []*Job `json:"items"`
	Total int    `json:"total"`
}

// MarshalJSON renders the list as bay's job list.
func (l JobList) MarshalJSON() ([]byte, error) {
	w := bayapi.JobList{Items: make([]bayapi.JobResponse, 0, len(l.Items)), Total: l.Total}
	for _, j := range l.Items {
		w.Items = append(w.Items, j.wire())
	}
	return json.Marshal(w)
}

// JobChunk is the bytes [Offset, Next) of one stream as text (invalid UTF-8 shows as U+FFFD;
// offsets count the stored bytes).
type JobChunk struct {
	Offset int64  `json:"offset"`
	Next   int64  `json:"next"`
	Data   string `json:"data"`
}

// JobOutput is what a job's streams hold from the asked offsets (at most 1 MiB each; read on
// from each chunk's Next), with the job's state.
type JobOutput struct {
	Job    Job      `json:"job"`
	Stdout JobChunk `json:"stdout"`
	Stderr JobChunk `json:"stderr"`
}

// Display is one rich output of a Python cell (display() or the cell's value): Type is
// display_data or execute_result, Data maps MIME types (text/plain, text/html, image/png as
// base64, ...) to their content.
type Display struct {
	Type string            `json:"type"`
	Data map[string]string `json:"data"`
}

// ---- audited execs ----

// Exec is an audited exec's record. Paths are relative to the workspace root.
type Exec struct {
	ExecID string
	// Status is queued, running, succeeded, failed, timed_out, cancelled or lost.
	Status string
	// ExitCode is meaningful only when Exited is true (null on the wire before the end, or
	// when the process never ran).
	ExitCode        int
	Exited          bool
	ErrorReason     string
	ProjectID       string
	TaskID          string
	ConversationID  string
	SkillID         string
	SkillVersion    string
	Image           string
	Kind            string
	Cmd             string
	Args            []string
	Cwd             string
	EnvKeys         []string
	PolicySnapshot  json.RawMessage
	ArtifactsDir    string
	StdoutPath      string
	StderrPath      string
	StdoutTruncated bool
	StderrTruncated bool
	CreatedAt       time.Time
	// StartedAt and EndedAt are zero until the exec started or ended.
	StartedAt time.Time
	EndedAt   time.Time
	Duration  time.Duration // milliseconds on the wire
}

func execFromWire(w *bayapi.ExecResponse) Exec {
	e := Exec{ExecID: w.ExecID, Status: w.Status, ErrorReason: w.ErrorReason, ProjectID: w.ProjectID, TaskID: w.TaskID,
		ConversationID: w.ConversationID, SkillID: w.SkillID, SkillVersion: w.SkillVersion, Image: w.Image, Kind: w.Kind, Cmd: w.Cmd,
		Args: w.Args, Cwd: w.Cwd, EnvKeys: w.EnvKeys, PolicySnapshot: w.PolicySnapshot, ArtifactsDir: w.ArtifactsDir,
		StdoutPath: w.StdoutPath, StderrPath: w.StderrPath, StdoutTruncated: w.StdoutTruncated, StderrTruncated: w.StderrTruncated,
		CreatedAt: w.CreatedAt, StartedAt: optStdTime(w.StartedAt), EndedAt: optStdTime(w.EndedAt), Duration: millis(w.DurationMS)}
	if w.ExitCode != nil {
		e.ExitCode, e.Exited = *w.ExitCode, true
	}
	return e
}

func (e *Exec) wire() bayapi.ExecResponse {
	w := bayapi.ExecResponse{ExecID: e.ExecID, Status: e.Status, ErrorReason: e.ErrorReason, ProjectID: e.ProjectID, TaskID: e.TaskID,
		ConversationID: e.ConversationID, SkillID: e.SkillID, SkillVersion: e.SkillVersion, Image: e.Image, Kind: e.Kind, Cmd: e.Cmd,
		Args: e.Args, Cwd: e.Cwd, EnvKeys: e.EnvKeys, PolicySnapshot: e.PolicySnapshot, ArtifactsDir: e.ArtifactsDir,
		StdoutPath: e.StdoutPath, StderrPath: e.StderrPath, StdoutTruncated: e.StdoutTruncated, StderrTruncated: e.StderrTruncated,
		CreatedAt: e.CreatedAt, StartedAt: wOptStdTime(e.StartedAt), EndedAt: wOptStdTime(e.EndedAt), DurationMS: e.Duration.Milliseconds()}
	if e.Exited {
		n := e.ExitCode
		w.ExitCode = &n
	}
	return w
}

// MarshalJSON renders the record as bay's exec object.
func (e Exec) MarshalJSON() ([]byte, error) { return json.Marshal(e.wire()) }

// UnmarshalJSON reads bay's exec object.
func (e *Exec) UnmarshalJSON(b []byte) error { return decodeAs(b, e, execFromWire) }

// ExecList is one page of execs, newest first.
type ExecList struct {
	Items  []Exec `json:"items"`
	Total  int    `json:"total"`
	Limit  int    `json:"limit"`
	Offset int    `json:"offset"`
}

// ArtifactFile is one file of an exec's artifacts.
type ArtifactFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Artifacts is an exec's manifest: the files kept, those dropped for the caps (and why), and
// the entries skipped for not being regular files.
type Artifacts struct {
	ExecID     string         `json:"exec_id"`
	Files      []ArtifactFile `json:"files"`
	TotalBytes int64          `json:"total_bytes"`
	Dropped    []ArtifactFile `json:"dropped,omitempty"`
	DropReason string         `json:"drop_reason,omitempty"`
	Skipped    []string       `json:"skipped,omitempty"`
}

// SchemaViolation is one way a document fails a JSON Schema: the instance's JSON pointer
// ("/" is the whole document) and why.
type SchemaViolation struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// InvokeResult is a skill invocation: its exec record and, once the exec is final, the
// outputs and how they fail the skill's interface.outputs.
type InvokeResult struct {
	Exec Exec
	// Outputs are nil until the exec is final. OutputsSource is "artifacts/outputs.json"
	// when the skill wrote that file, else "exec" (exit_code, stdout and stderr restricted to
	// what interface.outputs declares).
	Outputs       map[string]any
	OutputsSource string
	// OutputsChecked says the outputs were checked against interface.outputs (null on the
	// wire until then); OutputsValid is the verdict, OutputsErrors the violations.
	OutputsChecked bool
	OutputsValid   bool
	OutputsErrors  []SchemaViolation
}

// MarshalJSON renders the result as bay's invoke answer.
func (r InvokeResult) MarshalJSON() ([]byte, error) {
	w := bayapi.InvokeSkillResponse{Exec: r.Exec.wire(), Outputs: r.Outputs, OutputsSource: r.OutputsSource,
		OutputsErrors: convert(r.OutputsErrors, func(v *SchemaViolation) bayapi.SchemaViolation { return bayapi.SchemaViolation(*v) })}
	if r.OutputsChecked {
		v := r.OutputsValid
		w.OutputsValid = &v
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads bay's invoke answer.
func (r *InvokeResult) UnmarshalJSON(b []byte) error {
	return decodeAs(b, r, func(w *bayapi.InvokeSkillResponse) InvokeResult {
		out := InvokeResult{Exec: execFromWire(&w.Exec), Outputs: w.Outputs, OutputsSource: w.OutputsSource,
			OutputsErrors: convert(w.OutputsErrors, func(v *bayapi.SchemaViolation) SchemaViolation { return SchemaViolation(*v) })}
		if w.OutputsValid != nil {
			out.OutputsChecked, out.OutputsValid = true, *w.OutputsValid
		}
		return out
	})
}
