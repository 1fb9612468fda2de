package sdk

import (
	"encoding/json"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
)

// The result types of sandboxes, executions, files, history, cargos, profiles, GC and
// metrics. See wire.go for the rules that map them to the wire.

// Health is bay's liveness answer (GET /health).
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// ---- sandboxes ----

// Sandbox is a snapshot of a sandbox bound to the client that fetched it; its methods act on
// the sandbox by id.
type Sandbox struct {
	ID string
	// Status is idle, starting, ready, failed or expired (computed by bay when read).
	Status       string
	Profile      string
	CargoID      string
	Capabilities []string
	CreatedAt    time.Time
	// ExpiresAt is when the TTL ends; zero: the sandbox never expires.
	ExpiresAt time.Time
	// IdleExpiresAt is when the idle session stops; zero: no session runs.
	IdleExpiresAt time.Time
	// Containers are the session's containers; nil unless the sandbox was read (GET) while
	// ready.
	Containers []Container
	// Network is the effective network policy; its Mode is "" when bay did not send one.
	Network NetworkPolicy

	c *Client
}

// Container is one container of a ready sandbox's session.
type Container struct {
	Name         string
	RuntimeType  string
	Status       string
	Version      string // "" when the runtime did not report one
	Capabilities []string
	// Healthy is the runtime's last health check; nil: not checked.
	Healthy *bool
}

// NetworkPolicy is a sandbox's network policy: Mode none, allowlist or open; Allow and Deny
// are host names ("*.example.com" too), IP addresses or CIDR ranges with an optional :port.
type NetworkPolicy struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow"`
	Deny  []string `json:"deny"`
}

// SandboxList is one page of sandboxes, bound to the client.
type SandboxList struct {
	Items []*Sandbox
	// NextCursor continues the listing (ListSandboxesRequest.Cursor); "" on the last page.
	NextCursor string
}

// Client returns the client the sandbox is bound to.
func (s *Sandbox) Client() *Client { return s.c }

func sandboxFromWire(w *bayapi.SandboxResponse) Sandbox {
	s := Sandbox{ID: w.ID, Status: w.Status, Profile: w.Profile, CargoID: w.CargoID, Capabilities: w.Capabilities,
		CreatedAt: w.CreatedAt.Time, ExpiresAt: optTime(w.ExpiresAt), IdleExpiresAt: optTime(w.IdleExpiresAt),
		Containers: convert(w.Containers, func(c *bayapi.ContainerRuntime) Container {
			return Container{Name: c.Name, RuntimeType: c.RuntimeType, Status: c.Status, Version: str(c.Version),
				Capabilities: c.Capabilities, Healthy: c.Healthy}
		})}
	if w.Network != nil {
		s.Network = NetworkPolicy(*w.Network)
	}
	return s
}

func (s *Sandbox) wire() bayapi.SandboxResponse {
	w := bayapi.SandboxResponse{ID: s.ID, Status: s.Status, Profile: s.Profile, CargoID: s.CargoID, Capabilities: s.Capabilities,
		CreatedAt: wtime(s.CreatedAt), ExpiresAt: wOptTime(s.ExpiresAt), IdleExpiresAt: wOptTime(s.IdleExpiresAt),
		Containers: convert(s.Containers, func(c *Container) bayapi.ContainerRuntime {
			return bayapi.ContainerRuntime{Name: c.Name, RuntimeType: c.RuntimeType, Status: c.Status, Version: optStr(c.Version),
				Capabilities: c.Capabilities, Healthy: c.Healthy}
		})}
	if s.Network.Mode != "" {
		n := bayapi.NetworkPolicy(s.Network)
		w.Network = &n
	}
	return w
}

// MarshalJSON renders the sandbox as bay's sandbox object.
func (s Sandbox) MarshalJSON() ([]byte, error) { return json.Marshal(s.wire()) }

// UnmarshalJSON reads bay's sandbox object; the client binding is kept.
func (s *Sandbox) UnmarshalJSON(b []byte) error {
	c := s.c
	err := decodeAs(b, s, sandboxFromWire)
	s.c = c
	return err
}

// UnmarshalJSON reads bay's list object (the sandboxes are not bound to a client).
func (l *SandboxList) UnmarshalJSON(b []byte) error {
	var w struct {
		Items      []*Sandbox `json:"items"`
		NextCursor *string    `json:"next_cursor"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*l = SandboxList{Items: w.Items, NextCursor: str(w.NextCursor)}
	return nil
}

// MarshalJSON renders the page as bay's list object.
func (l SandboxList) MarshalJSON() ([]byte, error) {
	w := bayapi.SandboxList{Items: make([]bayapi.SandboxResponse, 0, len(l.Items)), NextCursor: optStr(l.NextCursor)}
	for _, s := range l.Items {
		w.Items = append(w.Items, s.wire())
	}
	return json.Marshal(w)
}

// ---- executions ----

// PythonResult is the answer of a Python execution. A Python exception is Success false with
// the traceback in Error.
type PythonResult struct {
	Success bool
	// Output is what the cell printed (stdout and stderr) followed by the text of its rich
	// outputs; Stdout and Stderr are the two streams apart.
	Output string
	Stdout string
	Stderr string
	// Error is the traceback or error text; "" when the cell succeeded.
	Error string
	Data  PythonData
	// ExecutionID names the execution in the sandbox's history.
	ExecutionID   string
	ExecutionTime time.Duration // milliseconds on the wire
	// Code is the code run, when the request asked for it (IncludeCode); else "".
	Code string
	// KernelRestarted says the kernel was restarted during or since the previous call: every
	// variable and import is gone; KernelNotice says why.
	KernelRestarted bool
	KernelNotice    string
	// OutputTruncated, ImagesTruncated and ErrorTruncated say the text, the images or the
	// error text were cut at the runtime's or bay's limits.
	OutputTruncated bool
	ImagesTruncated bool
	ErrorTruncated  bool
	// Notice says what the runtime did on its own to run the call.
	Notice string
	// TimedOut says the cell ran past its timeout and was interrupted (Success is false).
	TimedOut bool
}

// PythonData is the kernel's view of a cell.
type PythonData struct {
	// ExecutionCount is the kernel's cell counter; 0 when the kernel gave none.
	ExecutionCount int
	// Text is the text of the cell's rich outputs and printed output.
	Text string
	// Images are the images the cell displayed, each MIME type -> base64 data (e.g.
	// {"image/png": "iVBOR..."}).
	Images []map[string]string
}

func pythonFromWire(w *bayapi.PythonExecResponse) PythonResult {
	r := PythonResult{Success: w.Success, Output: w.Output, Stdout: w.Stdout, Stderr: w.Stderr, Error: str(w.Error),
		Data:        PythonData{Text: w.Data.Output.Text, Images: w.Data.Output.Images},
		ExecutionID: w.ExecutionID, ExecutionTime: millis(w.ExecutionTimeMS), Code: str(w.Code),
		KernelRestarted: w.KernelRestarted, KernelNotice: w.KernelNotice, OutputTruncated: w.OutputTruncated,
		ImagesTruncated: w.ImagesTruncated, ErrorTruncated: w.ErrorTruncated, Notice: w.Notice, TimedOut: w.TimedOut}
	if w.Data.ExecutionCount != nil {
		r.Data.ExecutionCount = *w.Data.ExecutionCount
	}
	return r
}

func (r *PythonResult) wire() bayapi.PythonExecResponse {
	w := bayapi.PythonExecResponse{Success: r.Success, Output: r.Output, Stdout: r.Stdout, Stderr: r.Stderr, Error: optStr(r.Error),
		Data:        bayapi.PythonExecData{Output: shipapi.PythonOutput{Text: r.Data.Text, Images: r.Data.Images}},
		ExecutionID: r.ExecutionID, ExecutionTimeMS: r.ExecutionTime.Milliseconds(), Code: optStr(r.Code),
		KernelRestarted: r.KernelRestarted, KernelNotice: r.KernelNotice, OutputTruncated: r.OutputTruncated,
		ImagesTruncated: r.ImagesTruncated, ErrorTruncated: r.ErrorTruncated, Notice: r.Notice, TimedOut: r.TimedOut}
	if r.Data.ExecutionCount != 0 {
		n := r.Data.ExecutionCount
		w.Data.ExecutionCount = &n
	}
	return w
}

// MarshalJSON renders the result as bay's python/exec answer.
func (r PythonResult) MarshalJSON() ([]byte, error) { return json.Marshal(r.wire()) }

// UnmarshalJSON reads bay's python/exec answer.
func (r *PythonResult) UnmarshalJSON(b []byte) error { return decodeAs(b, r, pythonFromWire) }

// ShellResult is the answer of a shell execution. A non-zero exit status is Success false with
// ExitCode set.
type ShellResult struct {
	Success bool
	// Output is the command's stdout (trimmed); Error its stderr or the runtime's error, ""
	// when there was none.
	Output        string
	Error         string
	ExitCode      int
	ExecutionID   string
	ExecutionTime time.Duration // milliseconds on the wire
	// Command is the command run, when the request asked for it (IncludeCode); else "".
	Command string
	// StdoutTruncated and StderrTruncated say Output or Error was cut at the runtime's or
	// bay's limits.
	StdoutTruncated bool
	StderrTruncated bool
	Notice          string
	// TimedOut says the command ran past its timeout and was killed (ExitCode -1).
	TimedOut bool
}

func shellFromWire(w *bayapi.ShellExecResponse) ShellResult {
	return ShellResult{Success: w.Success, Output: w.Output, Error: str(w.Error), ExitCode: w.ExitCode, ExecutionID: w.ExecutionID,
		ExecutionTime: millis(w.ExecutionTimeMS), Command: str(w.Command), StdoutTruncated: w.StdoutTruncated,
		StderrTruncated: w.StderrTruncated, Notice: w.Notice, TimedOut: w.TimedOut}
}

// MarshalJSON renders the result as bay's shell/exec answer.
func (r ShellResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(bayapi.ShellExecResponse{Success: r.Success, Output: r.Output, Error: optStr(r.Error), ExitCode: r.ExitCode,
		ExecutionID: r.ExecutionID, ExecutionTimeMS: r.ExecutionTime.Milliseconds(), Command: optStr(r.Command),
		StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated, Notice: r.Notice, TimedOut: r.TimedOut})
}

// UnmarshalJSON reads bay's shell/exec answer.
func (r *ShellResult) UnmarshalJSON(b []byte) error { return decodeAs(b, r, shellFromWire) }

// BrowserResult is the answer of one browser command. A failing command is Success false with
// ExitCode set and its stderr in Error.
type BrowserResult struct {
	Success       bool
	Output        string
	Error         string // the command's stderr; "" when empty
	ExitCode      int
	ExecutionID   string
	ExecutionTime time.Duration // milliseconds on the wire
	// TraceRef names the kept trace (BrowserTrace) when the request asked for one; else "".
	TraceRef string
}

func browserFromWire(w *bayapi.BrowserExecResponse) BrowserResult {
	return BrowserResult{Success: w.Success, Output: w.Output, Error: str(w.Error), ExitCode: w.ExitCode,
		ExecutionID: w.ExecutionID, ExecutionTime: millis(w.ExecutionTimeMS), TraceRef: str(w.TraceRef)}
}

// MarshalJSON renders the result as bay's browser/exec answer.
func (r BrowserResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(bayapi.BrowserExecResponse{Success: r.Success, Output: r.Output, Error: optStr(r.Error), ExitCode: r.ExitCode,
		ExecutionID: r.ExecutionID, ExecutionTimeMS: r.ExecutionTime.Milliseconds(), TraceRef: optStr(r.TraceRef)})
}

// UnmarshalJSON reads bay's browser/exec answer.
func (r *BrowserResult) UnmarshalJSON(b []byte) error { return decodeAs(b, r, browserFromWire) }

// BrowserStep is one command of a browser batch or skill replay.
type BrowserStep struct {
	Cmd       string
	Stdout    string
	Stderr    string
	ExitCode  int
	StepIndex int
	Duration  time.Duration // milliseconds on the wire
}

func stepFromWire(w *bayapi.BrowserStep) BrowserStep {
	return BrowserStep{Cmd: w.Cmd, Stdout: w.Stdout, Stderr: w.Stderr, ExitCode: w.ExitCode, StepIndex: w.StepIndex, Duration: millis(w.DurationMS)}
}

func (s *BrowserStep) wire() bayapi.BrowserStep {
	return bayapi.BrowserStep{Cmd: s.Cmd, Stdout: s.Stdout, Stderr: s.Stderr, ExitCode: s.ExitCode, StepIndex: s.StepIndex, DurationMS: s.Duration.Milliseconds()}
}

// MarshalJSON renders the step as bay's step object.
func (s BrowserStep) MarshalJSON() ([]byte, error) { return json.Marshal(s.wire()) }

// UnmarshalJSON reads bay's step object.
func (s *BrowserStep) UnmarshalJSON(b []byte) error { return decodeAs(b, s, stepFromWire) }

// BrowserBatchResult is the answer of a browser batch: one step per command that ran.
type BrowserBatchResult struct {
	Results        []BrowserStep
	TotalSteps     int
	CompletedSteps int
	Success        bool
	// Duration is the time the steps took; ExecutionTime the whole call's.
	Duration      time.Duration
	ExecutionID   string
	ExecutionTime time.Duration
	TraceRef      string // "" unless the request asked for a trace
}

func batchFromWire(w *bayapi.BrowserBatchResponse) BrowserBatchResult {
	return BrowserBatchResult{Results: convert(w.Results, stepFromWire), TotalSteps: w.TotalSteps, CompletedSteps: w.CompletedSteps,
		Success: w.Success, Duration: millis(w.DurationMS), ExecutionID: w.ExecutionID, ExecutionTime: millis(w.ExecutionTimeMS),
		TraceRef: str(w.TraceRef)}
}

// MarshalJSON renders the result as bay's browser/exec_batch answer.
func (r BrowserBatchResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(bayapi.BrowserBatchResponse{Results: convert(r.Results, (*BrowserStep).wire), TotalSteps: r.TotalSteps,
		CompletedSteps: r.CompletedSteps, Success: r.Success, DurationMS: r.Duration.Milliseconds(), ExecutionID: r.ExecutionID,
		ExecutionTimeMS: r.ExecutionTime.Milliseconds(), TraceRef: optStr(r.TraceRef)})
}

// UnmarshalJSON reads bay's browser/exec_batch answer.
func (r *BrowserBatchResult) UnmarshalJSON(b []byte) error { return decodeAs(b, r, batchFromWire) }

// ---- files ----

// FileInfo is one entry of a workspace directory.
type FileInfo struct {
	Name   string
	Path   string // absolute, e.g. /workspace/src
	IsFile bool
	IsDir  bool
	// Size is the file's size in bytes; 0 for a directory (null on the wire).
	Size     int64
	Modified time.Time
}

func fileFromWire(w *shipapi.FileInfo) FileInfo {
	f := FileInfo{Name: w.Name, Path: w.Path, IsFile: w.IsFile, IsDir: w.IsDir, Modified: unixTime(w.ModifiedTime)}
	if w.Size != nil {
		f.Size = *w.Size
	}
	return f
}

func (f *FileInfo) wire() shipapi.FileInfo {
	w := shipapi.FileInfo{Name: f.Name, Path: f.Path, IsFile: f.IsFile, IsDir: f.IsDir, ModifiedTime: unixSeconds(f.Modified)}
	if !f.IsDir {
		n := f.Size
		w.Size = &n
	}
	return w
}

// MarshalJSON renders the entry as the wire's directory entry.
func (f FileInfo) MarshalJSON() ([]byte, error) { return json.Marshal(f.wire()) }

// UnmarshalJSON reads the wire's directory entry.
func (f *FileInfo) UnmarshalJSON(b []byte) error { return decodeAs(b, f, fileFromWire) }

// UploadResult is the answer of an upload.
type UploadResult struct {
	Status string `json:"status"`
	Path   string `json:"path"`
	Size   int64  `json:"size"`
}

// ---- history ----

// History is a page of a sandbox's execution history, newest first.
type History struct {
	Entries []HistoryEntry
	Total   int // entries matching the filter, on every page
}

// HistoryEntry is one recorded execution.
type HistoryEntry struct {
	ID        string
	SessionID string
	// ExecType is python, shell, browser, browser_batch, or a job's kind.
	ExecType      string
	Code          string
	Success       bool
	ExecutionTime time.Duration // milliseconds on the wire
	// Output is what the execution printed; "" also when none was recorded (jobs record
	// none: null on the wire).
	Output string
	// Error, PayloadRef, Description, Tags and Notes are "" when unset.
	Error        string
	PayloadRef   string
	Description  string
	Tags         string
	Notes        string
	LearnEnabled bool
	LearnStatus  string
	LearnError   string
	// LearnProcessedAt is zero until skill learning processed the entry.
	LearnProcessedAt time.Time
	CreatedAt        time.Time
	// Images are the images a Python call returned (MIME type -> base64), on single-entry
	// reads only; ImageCount is their number on every read.
	Images     []map[string]string
	ImageCount int

	noOutput bool // the wire's output was null (kept so that the entry renders as it came)
}

func entryFromWire(w *bayapi.ExecutionHistoryEntry) HistoryEntry {
	return HistoryEntry{ID: w.ID, SessionID: str(w.SessionID), ExecType: w.ExecType, Code: w.Code, Success: w.Success,
		ExecutionTime: millis(w.ExecutionTimeMS), Output: str(w.Output), Error: str(w.Error), PayloadRef: str(w.PayloadRef),
		Description: str(w.Description), Tags: str(w.Tags), Notes: str(w.Notes), LearnEnabled: w.LearnEnabled,
		LearnStatus: str(w.LearnStatus), LearnError: str(w.LearnError), LearnProcessedAt: optTime(w.LearnProcessedAt),
		CreatedAt: w.CreatedAt.Time, Images: w.Images, ImageCount: w.ImageCount, noOutput: w.Output == nil}
}

func (e *HistoryEntry) wire() bayapi.ExecutionHistoryEntry {
	w := bayapi.ExecutionHistoryEntry{ID: e.ID, SessionID: optStr(e.SessionID), ExecType: e.ExecType, Code: e.Code, Success: e.Success,
		ExecutionTimeMS: e.ExecutionTime.Milliseconds(), Error: optStr(e.Error), PayloadRef: optStr(e.PayloadRef),
		Description: optStr(e.Description), Tags: optStr(e.Tags), Notes: optStr(e.Notes), LearnEnabled: e.LearnEnabled,
		LearnStatus: optStr(e.LearnStatus), LearnError: optStr(e.LearnError), LearnProcessedAt: wOptTime(e.LearnProcessedAt),
		CreatedAt: wtime(e.CreatedAt), Images: e.Images, ImageCount: e.ImageCount}
	if e.Output != "" || !e.noOutput {
		o := e.Output
		w.Output = &o
	}
	return w
}

// MarshalJSON renders the entry as bay's history entry.
func (e HistoryEntry) MarshalJSON() ([]byte, error) { return json.Marshal(e.wire()) }

// UnmarshalJSON reads bay's history entry.
func (e *HistoryEntry) UnmarshalJSON(b []byte) error { return decodeAs(b, e, entryFromWire) }

// MarshalJSON renders the page as bay's history list.
func (h History) MarshalJSON() ([]byte, error) {
	return json.Marshal(bayapi.ExecutionHistoryList{Entries: convert(h.Entries, (*HistoryEntry).wire), Total: h.Total})
}

// UnmarshalJSON reads bay's history list.
func (h *History) UnmarshalJSON(b []byte) error {
	return decodeAs(b, h, func(w *bayapi.ExecutionHistoryList) History {
		return History{Entries: convert(w.Entries, entryFromWire), Total: w.Total}
	})
}

// AnnotateRequest sets the description, tags and notes of a history entry; a nil field is
// left unchanged, "" clears it.
type AnnotateRequest struct {
	Description, Tags, Notes *string
}

// ---- cargos ----

// Cargo is a workspace volume.
type Cargo struct {
	ID      string
	Managed bool
	// ManagedBySandboxID is the sandbox a managed cargo belongs to; "" for an external one.
	ManagedBySandboxID string
	Backend            string
	SizeLimitMB        int
	CreatedAt          time.Time
	LastAccessedAt     time.Time
	// Usage is known on GetCargo only (nil in lists, and when bay could not measure it).
	Usage *CargoUsage
}

// CargoUsage is what a cargo holds against its limit.
type CargoUsage struct {
	// LimitEnforced says writes beyond SizeLimitMB fail ("No space left on device").
	LimitEnforced bool
	// UsedBytes is the bytes the cargo holds; -1 when unknown.
	UsedBytes int64
}

func cargoFromWire(w *bayapi.CargoResponse) Cargo {
	c := Cargo{ID: w.ID, Managed: w.Managed, ManagedBySandboxID: str(w.ManagedBySandboxID), Backend: w.Backend,
		SizeLimitMB: w.SizeLimitMB, CreatedAt: w.CreatedAt.Time, LastAccessedAt: w.LastAccessedAt.Time}
	if w.SizeLimitEnforced != nil || w.SizeUsedBytes != nil {
		c.Usage = &CargoUsage{UsedBytes: -1}
		if w.SizeLimitEnforced != nil {
			c.Usage.LimitEnforced = *w.SizeLimitEnforced
		}
		if w.SizeUsedBytes != nil {
			c.Usage.UsedBytes = *w.SizeUsedBytes
		}
	}
	return c
}

func (c *Cargo) wire() bayapi.CargoResponse {
	w := bayapi.CargoResponse{ID: c.ID, Managed: c.Managed, ManagedBySandboxID: optStr(c.ManagedBySandboxID), Backend: c.Backend,
		SizeLimitMB: c.SizeLimitMB, CreatedAt: wtime(c.CreatedAt), LastAccessedAt: wtime(c.LastAccessedAt)}
	if u := c.Usage; u != nil {
		e := u.LimitEnforced
		w.SizeLimitEnforced = &e
		if u.UsedBytes >= 0 {
			n := u.UsedBytes
			w.SizeUsedBytes = &n
		}
	}
	return w
}

// MarshalJSON renders the cargo as bay's cargo object.
func (c Cargo) MarshalJSON() ([]byte, error) { return json.Marshal(c.wire()) }

// UnmarshalJSON reads bay's cargo object.
func (c *Cargo) UnmarshalJSON(b []byte) error { return decodeAs(b, c, cargoFromWire) }

// CargoList is one page of cargos.
type CargoList struct {
	Items      []Cargo
	NextCursor string // "" on the last page
}

// MarshalJSON renders the page as bay's list object.
func (l CargoList) MarshalJSON() ([]byte, error) {
	return json.Marshal(bayapi.CargoList{Items: convert(l.Items, (*Cargo).wire), NextCursor: optStr(l.NextCursor)})
}

// UnmarshalJSON reads bay's list object.
func (l *CargoList) UnmarshalJSON(b []byte) error {
	return decodeAs(b, l, func(w *bayapi.CargoList) CargoList {
		return CargoList{Items: convert(w.Items, cargoFromWire), NextCursor: str(w.NextCursor)}
	})
}

// ---- profiles ----

// Resources are a container's CPU and memory limits.
type Resources struct {
	CPUs   float64 `json:"cpus"`
	Memory string  `json:"memory"` // e.g. "1g"
}

// ProfileContainer is one container of a profile.
type ProfileContainer struct {
	Name         string    `json:"name"`
	RuntimeType  string    `json:"runtime_type"`
	Capabilities []string  `json:"capabilities"`
	Resources    Resources `json:"resources"`
}

// Profile is a sandbox profile of bay's configuration.
type Profile struct {
	ID           string
	Image        string
	Resources    Resources
	Capabilities []string
	// IdleTimeout stops a session idle longer (whole seconds on the wire).
	IdleTimeout time.Duration
	// Description and Containers are filled when the list was asked with detail ("" and nil
	// otherwise).
	Description string
	Containers  []ProfileContainer
}

func profileFromWire(w *bayapi.ProfileResponse) Profile {
	return Profile{ID: w.ID, Image: w.Image, Resources: Resources(w.Resources), Capabilities: w.Capabilities,
		IdleTimeout: seconds(int64(w.IdleTimeout)), Description: str(w.Description),
		Containers: convert(w.Containers, func(c *bayapi.ProfileContainer) ProfileContainer {
			return ProfileContainer{Name: c.Name, RuntimeType: c.RuntimeType, Capabilities: c.Capabilities, Resources: Resources(c.Resources)}
		})}
}

func (p *Profile) wire() bayapi.ProfileResponse {
	return bayapi.ProfileResponse{ID: p.ID, Image: p.Image, Resources: bayapi.Resources(p.Resources), Capabilities: p.Capabilities,
		IdleTimeout: int(p.IdleTimeout / time.Second), Description: optStr(p.Description),
		Containers: convert(p.Containers, func(c *ProfileContainer) bayapi.ProfileContainer {
			return bayapi.ProfileContainer{Name: c.Name, RuntimeType: c.RuntimeType, Capabilities: c.Capabilities, Resources: bayapi.Resources(c.Resources)}
		})}
}

// MarshalJSON renders the profile as bay's profile object.
func (p Profile) MarshalJSON() ([]byte, error) { return json.Marshal(p.wire()) }

// UnmarshalJSON reads bay's profile object.
func (p *Profile) UnmarshalJSON(b []byte) error { return decodeAs(b, p, profileFromWire) }

// ProfileList is bay's configured profiles, in configuration order.
type ProfileList struct {
	Items []Profile `json:"items"`
}

// ---- admin GC ----

// GCRequest selects what a GC run does.
type GCRequest struct {
	// Tasks are the tasks to run (idle_session, expired_sandbox, orphan_cargo,
	// orphan_container); nil: every enabled task.
	Tasks []string
	// DryRun reports what would be removed and removes nothing.
	DryRun bool
}

// GCTaskResult is what one GC task did.
type GCTaskResult struct {
	TaskName     string   `json:"task_name"`
	CleanedCount int      `json:"cleaned_count"`
	SkippedCount int      `json:"skipped_count"`
	Errors       []string `json:"errors"`
	// WouldClean lists what a dry run would remove (empty otherwise).
	WouldClean []string `json:"would_clean,omitempty"`
}

// GCResult is the answer of a GC run.
type GCResult struct {
	Results      []GCTaskResult
	TotalCleaned int
	TotalErrors  int
	Duration     time.Duration // milliseconds on the wire
}

// MarshalJSON renders the result as bay's gc/run answer.
func (r GCResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(bayapi.GCRunResponse{Results: convert(r.Results, func(t *GCTaskResult) bayapi.GCTaskResult { return bayapi.GCTaskResult(*t) }),
		TotalCleaned: r.TotalCleaned, TotalErrors: r.TotalErrors, DurationMS: r.Duration.Milliseconds()})
}

// UnmarshalJSON reads bay's gc/run answer.
func (r *GCResult) UnmarshalJSON(b []byte) error {
	return decodeAs(b, r, func(w *bayapi.GCRunResponse) GCResult {
		return GCResult{Results: convert(w.Results, func(t *bayapi.GCTaskResult) GCTaskResult { return GCTaskResult(*t) }),
			TotalCleaned: w.TotalCleaned, TotalErrors: w.TotalErrors, Duration: millis(w.DurationMS)}
	})
}

// GCStatus is the GC scheduler's state.
type GCStatus struct {
	Enabled    bool
	IsRunning  bool
	InstanceID string
	Interval   time.Duration // whole seconds on the wire
	// Tasks says for each task name whether it is enabled.
	Tasks map[string]bool
	// LastRunAt is zero when no run finished since bay started.
	LastRunAt time.Time
}

// MarshalJSON renders the status as bay's gc/status answer.
func (s GCStatus) MarshalJSON() ([]byte, error) {
	w := bayapi.GCStatusResponse{Enabled: s.Enabled, IsRunning: s.IsRunning, InstanceID: s.InstanceID,
		IntervalSeconds: int(s.Interval / time.Second), LastRunAt: wOptTime(s.LastRunAt)}
	if s.Tasks != nil {
		w.Tasks = make(map[string]bayapi.GCTaskStatus, len(s.Tasks))
		for k, v := range s.Tasks {
			w.Tasks[k] = bayapi.GCTaskStatus{Enabled: v}
		}
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads bay's gc/status answer.
func (s *GCStatus) UnmarshalJSON(b []byte) error {
	return decodeAs(b, s, func(w *bayapi.GCStatusResponse) GCStatus {
		out := GCStatus{Enabled: w.Enabled, IsRunning: w.IsRunning, InstanceID: w.InstanceID,
			Interval: seconds(int64(w.IntervalSeconds)), LastRunAt: optTime(w.LastRunAt)}
		if w.Tasks != nil {
			out.Tasks = make(map[string]bool, len(w.Tasks))
			for k, v := range w.Tasks {
				out.Tasks[k] = v.Enabled
			}
		}
		return out
	})
}

// ---- metrics ----

// SandboxMetrics is a sandbox's resource use now. Without running compute Containers is empty
// and Disk.Measured false.
type SandboxMetrics struct {
	SandboxID string
	Status    string
	// Containers are the running containers of the current session, the primary first.
	Containers []ContainerMetrics
	Disk       DiskMetrics
}

// ContainerMetrics is one container's resource use; a limit of 0 means unlimited (null on the
// wire).
type ContainerMetrics struct {
	Name string
	// CPUSeconds is the CPU time consumed since the container started (all cores).
	CPUSeconds       float64
	CPULimitCores    float64
	MemoryBytes      int64
	MemoryLimitBytes int64
	Pids             int64
	PidsLimit        int64
}

// DiskMetrics is the cargo volume's use against its size limit.
type DiskMetrics struct {
	// Measured says UsedBytes was measured (in the running primary container; null on the
	// wire without running compute).
	Measured   bool
	UsedBytes  int64
	LimitBytes int64
}

func nonZero[N int64 | float64](n N) *N {
	if n == 0 {
		return nil
	}
	return &n
}

func deref[N int64 | float64](p *N) N {
	if p == nil {
		return 0
	}
	return *p
}

// MarshalJSON renders the metrics as bay's metrics object.
func (m SandboxMetrics) MarshalJSON() ([]byte, error) {
	w := bayapi.SandboxMetrics{SandboxID: m.SandboxID, Status: m.Status,
		Containers: convert(m.Containers, func(c *ContainerMetrics) bayapi.ContainerMetrics {
			return bayapi.ContainerMetrics{Name: c.Name, CPUSeconds: c.CPUSeconds, CPULimitCores: nonZero(c.CPULimitCores),
				MemoryBytes: c.MemoryBytes, MemoryLimitBytes: nonZero(c.MemoryLimitBytes), Pids: c.Pids, PidsLimit: nonZero(c.PidsLimit)}
		}),
		Disk: bayapi.DiskMetrics{LimitBytes: m.Disk.LimitBytes}}
	if m.Disk.Measured {
		n := m.Disk.UsedBytes
		w.Disk.UsedBytes = &n
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads bay's metrics object.
func (m *SandboxMetrics) UnmarshalJSON(b []byte) error {
	return decodeAs(b, m, func(w *bayapi.SandboxMetrics) SandboxMetrics {
		return SandboxMetrics{SandboxID: w.SandboxID, Status: w.Status,
			Containers: convert(w.Containers, func(c *bayapi.ContainerMetrics) ContainerMetrics {
				return ContainerMetrics{Name: c.Name, CPUSeconds: c.CPUSeconds, CPULimitCores: deref(c.CPULimitCores),
					MemoryBytes: c.MemoryBytes, MemoryLimitBytes: deref(c.MemoryLimitBytes), Pids: c.Pids, PidsLimit: deref(c.PidsLimit)}
			}),
			Disk: DiskMetrics{Measured: w.Disk.UsedBytes != nil, UsedBytes: deref(w.Disk.UsedBytes), LimitBytes: w.Disk.LimitBytes}}
	})
}
