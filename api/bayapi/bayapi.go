// Package bayapi holds the wire types of the Bay HTTP API v1: request and response bodies,
// error codes, header names and the timestamp format. It is wire-compatible with the reference
// contract (shipyard-neo-contract.md sections 0-4), so clients of the Python Shipyard Neo work
// unchanged. It depends on the standard library (and api/shipapi) only; bay, the SDK, the CLI and
// the MCP server all share it.
package bayapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
)

// DefaultPort is bay's default listen port.
const DefaultPort = 8114

// Header names.
const (
	HeaderRequestID      = "X-Request-Id"
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderOwner          = "X-Owner"
	HeaderAuthorization  = "Authorization"
	BearerPrefix         = "Bearer "
)

// WebSocket subprotocols of the terminal (ours). A browser cannot set headers on a WebSocket,
// so a client may offer its API key as the subprotocol BearerSubprotocolPrefix +
// base64url(key) (no padding) next to TerminalSubprotocol; bay reads the key from there when
// there is no Authorization header and answers with TerminalSubprotocol, never echoing the key.
const (
	TerminalSubprotocol     = "shipyard.terminal.v1"
	BearerSubprotocolPrefix = "shipyard.bearer."
)

// Default values used by the API.
const (
	DefaultProfile     = "python-default"
	DefaultExecTimeout = 30
	MaxExecTimeout     = 300
	DefaultListLimit   = 50
	MaxListLimit       = 200
	DefaultHistLimit   = 100
	MaxHistLimit       = 500
	// MaxTTL bounds ttl and extend_by (seconds, 366 days; ours): a larger value is a 422
	// (a sandbox that should never expire is created with ttl null or 0).
	MaxTTL = 366 * 24 * 3600
	// MaxOffset bounds the history offset query parameter.
	MaxOffset = 1<<31 - 1
	// Bounds of text fields and query strings (bytes; ours): larger is a 422.
	MaxDescriptionLen = 4 << 10
	MaxTagsLen        = 1 << 10
	MaxNotesLen       = 64 << 10
	MaxCursorLen      = 256
	MaxProfileLen     = 256
	MaxIDLen          = 256
	// MaxPathLen and MaxNameLen bound a workspace path and each of its names (bytes; the
	// limits of Linux file systems, less room for the workspace prefix): longer is 400
	// invalid_path.
	MaxPathLen = 4000
	MaxNameLen = 255
)

// Sandbox statuses as computed by bay (never stored).
const (
	StatusIdle     = "idle"
	StatusStarting = "starting"
	StatusReady    = "ready"
	StatusFailed   = "failed"
	StatusExpired  = "expired"
)

// Capabilities.
const (
	CapFilesystem = "filesystem"
	CapShell      = "shell"
	CapPython     = "python"
	CapBrowser    = "browser"
	CapTerminal   = "terminal"
)

// Error codes, as the reference API sends them. The HTTP status of each is fixed; see StatusOf.
const (
	CodeNotFound               = "not_found"                // 404
	CodeUnauthorized           = "unauthorized"             // 401
	CodeForbidden              = "forbidden"                // 403
	CodeQuotaExceeded          = "quota_exceeded"           // 429
	CodeValidation             = "validation_error"         // 400 (semantic) or 422 (schema)
	CodeInvalidPath            = "invalid_path"             // 400
	CodeCapabilityNotSupported = "capability_not_supported" // 400
	CodeConflict               = "conflict"                 // 409
	CodeSandboxExpired         = "sandbox_expired"          // 409
	CodeSandboxTTLInfinite     = "sandbox_ttl_infinite"     // 409
	CodeFileNotFound           = "file_not_found"           // 404
	CodeIsADirectory           = "is_a_directory"           // 400 (ours: a directory where a file is expected)
	CodeNotADirectory          = "not_a_directory"          // 400 (ours: a file where a directory is expected)
	CodeSessionNotReady        = "session_not_ready"        // 503
	CodeShipError              = "ship_error"               // 502
	CodeTimeout                = "timeout"                  // 504
	CodePayloadTooLarge        = "payload_too_large"        // 413 (ours: upload size limit)
	CodeGCRunning              = "gc_running"               // 423 (ours: the reference used {"detail"})
	CodeUnavailable            = "unavailable"              // 503 (ours: GC scheduler missing etc.)
	CodeMethodNotAllowed       = "method_not_allowed"       // 405 (ours: the reference answered plain 405)
	CodeHeadersTooLarge        = "headers_too_large"        // 431 (ours: request header fields too large)
	CodePolicyViolation        = "policy_violation"         // 400 (ours: an execution asks more than its policy allows)
	CodeInternal               = "internal_error"           // 500
)

// StatusOf returns the HTTP status for an error code (500 for unknown codes). Schema validation
// failures use CodeValidation with 422, which callers set explicitly.
func StatusOf(code string) int {
	switch code {
	case CodeNotFound, CodeFileNotFound:
		return 404
	case CodeUnauthorized:
		return 401
	case CodeForbidden:
		return 403
	case CodeQuotaExceeded:
		return 429
	case CodeValidation, CodeInvalidPath, CodeCapabilityNotSupported, CodeIsADirectory, CodeNotADirectory, CodePolicyViolation:
		return 400
	case CodeConflict, CodeSandboxExpired, CodeSandboxTTLInfinite:
		return 409
	case CodeSessionNotReady, CodeUnavailable:
		return 503
	case CodeShipError:
		return 502
	case CodeTimeout:
		return 504
	case CodePayloadTooLarge:
		return 413
	case CodeGCRunning:
		return 423
	case CodeMethodNotAllowed:
		return 405
	case CodeHeadersTooLarge:
		return 431
	default:
		return 500
	}
}

// ErrorEnvelope is the one shape of every bay error response:
// {"error": {"code", "message", "request_id", "details"?}}.
// A 422 schema-validation error additionally carries FastAPI's top-level "detail" list so that
// clients written against the reference keep parsing it.
type ErrorEnvelope struct {
	Error  ErrorBody         `json:"error"`
	Detail []ValidationIssue `json:"detail,omitempty"`
}

// ErrorBody is the inner error object. Details is omitted when empty.
type ErrorBody struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	RequestID string         `json:"request_id"`
	Details   map[string]any `json:"details,omitempty"`
}

// ValidationIssue is one entry of a 422 response, in FastAPI's shape.
type ValidationIssue struct {
	Type  string         `json:"type"`
	Loc   []any          `json:"loc"`
	Msg   string         `json:"msg"`
	Input any            `json:"input"`
	Ctx   map[string]any `json:"ctx,omitempty"`
}

// ---- time ----

// TimeLayout is the wire format of timestamps: naive UTC ISO-8601 without an offset, with
// microseconds when non-zero ("2026-03-01T10:00:00.123456" or "2026-03-01T10:00:00").
const TimeLayout = "2006-01-02T15:04:05"

// Time is a UTC timestamp with the reference's offset-less wire format. Parsing accepts that
// format and RFC 3339 (with Z or an offset).
type Time struct{ time.Time }

// NewTime returns t as a wire Time, truncated to microseconds.
func NewTime(t time.Time) Time { return Time{t.UTC().Truncate(time.Microsecond)} }

// TimePtr returns nil for a nil pointer, else the wire Time.
func TimePtr(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	v := NewTime(*t)
	return &v
}

// FormatTime formats t in the wire format.
func FormatTime(t time.Time) string {
	t = t.UTC()
	s := t.Format(TimeLayout)
	if us := t.Nanosecond() / 1000; us != 0 {
		s += fmt.Sprintf(".%06d", us)
	}
	return s
}

// ParseTime parses the wire format or RFC 3339.
func ParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.UTC)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse time %q: %w", s, err)
	}
	return t, nil
}

func (t Time) MarshalJSON() ([]byte, error) { return []byte(`"` + FormatTime(t.Time) + `"`), nil }

func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseTime(s)
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}

// ---- lax integers ----

// Int is an integer that decodes leniently like the reference's pydantic lax mode: a JSON
// number with an integral value (60, 60.0) or a string holding an integer ("60").
type Int int64

// ErrNotInteger is returned by Int.UnmarshalJSON for a value that is not an integer.
var ErrNotInteger = fmt.Errorf("value is not a valid integer")

func (n *Int) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return ErrNotInteger
		}
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return ErrNotInteger
		}
		*n = Int(v)
		return nil
	}
	var f json.Number
	if err := json.Unmarshal(b, &f); err != nil {
		return ErrNotInteger
	}
	if v, err := f.Int64(); err == nil {
		*n = Int(v)
		return nil
	}
	v, err := f.Float64()
	if err != nil || v != math.Trunc(v) || math.Abs(v) > 1<<53 {
		return ErrNotInteger
	}
	*n = Int(v)
	return nil
}

// IntPtr is a helper for optional request fields.
func IntPtr(v int64) *Int { n := Int(v); return &n }

// ---- health ----

type HealthResponse struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// ---- sandboxes ----

// CreateSandboxRequest is POST /v1/sandboxes. A JSON body is required (may be {}).
type CreateSandboxRequest struct {
	Profile *string `json:"profile,omitempty" maxLength:"256"` // default python-default
	CargoID *string `json:"cargo_id,omitempty" maxLength:"256"`
	TTL     *Int    `json:"ttl,omitempty" maximum:"31622400" doc:"seconds; null, 0 or negative = no expiry; at most 366 days"`
	// Skills (ours) are library skills mounted read-only at /skills/<name> on top of the
	// profile's, at the version current when a session starts; an unknown name is 400.
	Skills []string `json:"skills,omitempty" doc:"library skills to mount at /skills/<name> (at most 32); unknown names are 400"`
	// Reuse (ours): the owner's sandbox of a key, created when there is none.
	Reuse *ReuseSpec `json:"reuse,omitempty"`
	// Network tightens the profile's network policy (ours).
	Network *NetworkPolicy `json:"network,omitempty"`
}

// SandboxResponse is the shared sandbox object. Field order is the reference's.
type SandboxResponse struct {
	ID            string             `json:"id"`
	Status        string             `json:"status"`
	Profile       string             `json:"profile"`
	CargoID       string             `json:"cargo_id"`
	Capabilities  []string           `json:"capabilities"`
	CreatedAt     Time               `json:"created_at"`
	ExpiresAt     *Time              `json:"expires_at"`
	IdleExpiresAt *Time              `json:"idle_expires_at"`
	Containers    []ContainerRuntime `json:"containers"`        // null unless GET of a ready sandbox
	Network       *NetworkPolicy     `json:"network,omitempty"` // ours: the effective policy
}

// ContainerRuntime describes one container of a ready sandbox's session.
type ContainerRuntime struct {
	Name         string   `json:"name"`
	RuntimeType  string   `json:"runtime_type"`
	Status       string   `json:"status"`
	Version      *string  `json:"version"`
	Capabilities []string `json:"capabilities"`
	Healthy      *bool    `json:"healthy"`
}

type SandboxList struct {
	Items      []SandboxResponse `json:"items"`
	NextCursor *string           `json:"next_cursor"`
}

// ExtendTTLRequest is POST /v1/sandboxes/{id}/extend_ttl.
type ExtendTTLRequest struct {
	ExtendBy *Int `json:"extend_by" minimum:"1" maximum:"31622400" doc:"seconds, at most 366 days"` // required
}

// StatusResponse is {"status": "ok"} / {"status": "stopped"}.
type StatusResponse struct {
	Status string `json:"status"`
}

// ---- capabilities ----

type PythonExecRequest struct {
	Code        *string `json:"code"` // required
	Timeout     *Int    `json:"timeout,omitempty" minimum:"1" maximum:"300" doc:"seconds, default 30"`
	IncludeCode bool    `json:"include_code,omitempty"`
	Description *string `json:"description,omitempty" maxLength:"4096"`
	Tags        *string `json:"tags,omitempty" maxLength:"1024"`
}

type PythonExecData struct {
	ExecutionCount *int                 `json:"execution_count"`
	Output         shipapi.PythonOutput `json:"output"`
}

type PythonExecResponse struct {
	Success bool   `json:"success"`
	Output  string `json:"output"`
	// Ours. Stdout and Stderr are the cell's two streams apart; output has both, with the text
	// of its rich outputs.
	Stdout          string         `json:"stdout" doc:"what the cell printed to stdout"`
	Stderr          string         `json:"stderr" doc:"what the cell printed to stderr"`
	Error           *string        `json:"error"`
	Data            PythonExecData `json:"data"`
	ExecutionID     string         `json:"execution_id"`
	ExecutionTimeMS int64          `json:"execution_time_ms"`
	Code            *string        `json:"code"`
	// Ours. KernelRestarted says the kernel was restarted during or since the previous call (a
	// cell that ignored the interrupt after its timeout, or a dead kernel): every variable and
	// import is gone; KernelNotice says why.
	KernelRestarted bool   `json:"kernel_restarted" doc:"the kernel was restarted during or since the previous call: its state is gone"`
	KernelNotice    string `json:"kernel_notice,omitempty" doc:"why the kernel was restarted"`
	// OutputTruncated and ImagesTruncated say the runtime cut the text or images it returns.
	OutputTruncated bool `json:"output_truncated" doc:"the text output was longer than the runtime or limits.stdout_max_bytes keeps and was cut"`
	ImagesTruncated bool `json:"images_truncated" doc:"the images were larger than the runtime or limits.total_output_max_bytes keeps and some were dropped"`
	// ErrorTruncated (ours) says the error text was cut at limits.stderr_max_bytes.
	ErrorTruncated bool `json:"error_truncated" doc:"the error text was longer than limits.stderr_max_bytes and was cut"`
	// Notice says what the runtime did on its own to run the call (for example that it killed
	// every process of the sandbox because its process limit was reached).
	Notice string `json:"notice,omitempty" doc:"what the runtime did on its own to run the call"`
	// TimedOut (ours) says the cell ran past its timeout and was interrupted (success is false).
	TimedOut bool `json:"timed_out,omitempty" doc:"the cell ran past its timeout and was interrupted"`
}

type ShellExecRequest struct {
	Command     *string `json:"command"` // required
	Timeout     *Int    `json:"timeout,omitempty" minimum:"1" maximum:"300" doc:"seconds, default 30"`
	Cwd         *string `json:"cwd,omitempty" maxLength:"4000"`
	IncludeCode bool    `json:"include_code,omitempty"`
	Description *string `json:"description,omitempty" maxLength:"4096"`
	Tags        *string `json:"tags,omitempty" maxLength:"1024"`
}

type ShellExecResponse struct {
	Success         bool    `json:"success"`
	Output          string  `json:"output"`
	Error           *string `json:"error"`
	ExitCode        int     `json:"exit_code"`
	ExecutionID     string  `json:"execution_id"`
	ExecutionTimeMS int64   `json:"execution_time_ms"`
	Command         *string `json:"command"`
	// StdoutTruncated and StderrTruncated (ours) say that the command's stdout (output) or
	// stderr (error) was longer than the runtime keeps and was cut.
	StdoutTruncated bool `json:"stdout_truncated" doc:"the command's stdout was longer than the runtime or limits.stdout_max_bytes keeps and output was cut"`
	StderrTruncated bool `json:"stderr_truncated" doc:"the command's stderr was longer than the runtime or limits.stderr_max_bytes keeps and error was cut"`
	// Notice: see PythonExecResponse.Notice.
	Notice string `json:"notice,omitempty" doc:"what the runtime did on its own to run the call"`
	// TimedOut (ours) says the command ran past its timeout and was killed (exit_code is -1).
	TimedOut bool `json:"timed_out,omitempty" doc:"the command ran past its timeout and was killed (exit_code -1)"`
}

// BrowserExecRequest is POST .../browser/exec: one agent-browser command line (without the
// "agent-browser" prefix; split into words like a POSIX shell, never run by one).
type BrowserExecRequest struct {
	Cmd          *string `json:"cmd"` // required
	Timeout      *Int    `json:"timeout,omitempty" minimum:"1" maximum:"300" doc:"seconds, default 30"`
	Description  *string `json:"description,omitempty" maxLength:"4096"`
	Tags         *string `json:"tags,omitempty" maxLength:"1024"`
	Learn        bool    `json:"learn,omitempty"`
	IncludeTrace bool    `json:"include_trace,omitempty"`
}

// BrowserExecResponse is the answer of POST .../browser/exec. Error is the command's stderr,
// null when empty.
type BrowserExecResponse struct {
	Success         bool    `json:"success"`
	Output          string  `json:"output"`
	Error           *string `json:"error"`
	ExitCode        int     `json:"exit_code"`
	ExecutionID     string  `json:"execution_id"`
	ExecutionTimeMS int64   `json:"execution_time_ms"`
	TraceRef        *string `json:"trace_ref"`
}

// BrowserBatchRequest is POST .../browser/exec_batch. Timeout is the budget of the whole batch.
type BrowserBatchRequest struct {
	Commands     []string `json:"commands"` // at least one
	Timeout      *Int     `json:"timeout,omitempty" minimum:"1" maximum:"600" doc:"seconds for the whole batch, default 60"`
	StopOnError  *bool    `json:"stop_on_error,omitempty" doc:"default true"`
	Description  *string  `json:"description,omitempty" maxLength:"4096"`
	Tags         *string  `json:"tags,omitempty" maxLength:"1024"`
	Learn        bool     `json:"learn,omitempty"`
	IncludeTrace bool     `json:"include_trace,omitempty"`
}

// BrowserStep is one command of a batch.
type BrowserStep struct {
	Cmd        string `json:"cmd"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	ExitCode   int    `json:"exit_code"`
	StepIndex  int    `json:"step_index"`
	DurationMS int64  `json:"duration_ms"`
}

// BrowserBatchResponse is the answer of POST .../browser/exec_batch.
type BrowserBatchResponse struct {
	Results         []BrowserStep `json:"results"`
	TotalSteps      int           `json:"total_steps"`
	CompletedSteps  int           `json:"completed_steps"`
	Success         bool          `json:"success"`
	DurationMS      int64         `json:"duration_ms"`
	ExecutionID     string        `json:"execution_id"`
	ExecutionTimeMS int64         `json:"execution_time_ms"`
	TraceRef        *string       `json:"trace_ref"`
}

// FileContentResponse is GET .../filesystem/files.
type FileContentResponse struct {
	Content string `json:"content"`
}

// WriteFileRequest is PUT .../filesystem/files.
type WriteFileRequest struct {
	Path    *string `json:"path"`    // required
	Content *string `json:"content"` // required
}

// DirectoryResponse is GET .../filesystem/directories; entries are Ship's FileInfo verbatim.
type DirectoryResponse struct {
	Entries []shipapi.FileInfo `json:"entries"`
}

// Upload form fields of POST .../filesystem/upload (multipart/form-data).
const (
	UploadFileField = "file"
	UploadPathField = "path"
)

type UploadResponse struct {
	Status string `json:"status"`
	Path   string `json:"path"`
	Size   int64  `json:"size"`
}

// ---- history ----

type ExecutionHistoryEntry struct {
	ID               string  `json:"id"`
	SessionID        *string `json:"session_id"`
	ExecType         string  `json:"exec_type"`
	Code             string  `json:"code"`
	Success          bool    `json:"success"`
	ExecutionTimeMS  int64   `json:"execution_time_ms"`
	Output           *string `json:"output"`
	Error            *string `json:"error"`
	PayloadRef       *string `json:"payload_ref"`
	Description      *string `json:"description"`
	Tags             *string `json:"tags"`
	Notes            *string `json:"notes"`
	LearnEnabled     bool    `json:"learn_enabled"`
	LearnStatus      *string `json:"learn_status"`
	LearnError       *string `json:"learn_error"`
	LearnProcessedAt *Time   `json:"learn_processed_at"`
	CreatedAt        Time    `json:"created_at"`
	// Ours: the images a Python call returned ([{"image/png": "<base64>"}]), on GET of one
	// entry (and history/last); lists give ImageCount only.
	Images     []map[string]string `json:"images,omitempty" doc:"images the Python call returned (MIME type -> base64); on single-entry reads only"`
	ImageCount int                 `json:"image_count" doc:"how many images the call returned"`
}

type ExecutionHistoryList struct {
	Entries []ExecutionHistoryEntry `json:"entries"`
	Total   int                     `json:"total"`
}

// AnnotateExecutionRequest is PATCH .../history/{id}; null/absent fields are unchanged.
type AnnotateExecutionRequest struct {
	Description *string `json:"description,omitempty" maxLength:"4096"`
	Tags        *string `json:"tags,omitempty" maxLength:"1024"`
	Notes       *string `json:"notes,omitempty" maxLength:"65536"`
}

// Exec types of history entries.
const (
	ExecPython       = "python"
	ExecShell        = "shell"
	ExecBrowser      = "browser"
	ExecBrowserBatch = "browser_batch"
)

// ---- cargos ----

type CreateCargoRequest struct {
	SizeLimitMB *Int `json:"size_limit_mb,omitempty" minimum:"1" maximum:"65536" doc:"null = config default"`
}

type CargoResponse struct {
	ID                 string  `json:"id"`
	Managed            bool    `json:"managed"`
	ManagedBySandboxID *string `json:"managed_by_sandbox_id"`
	Backend            string  `json:"backend"`
	SizeLimitMB        int     `json:"size_limit_mb"`
	CreatedAt          Time    `json:"created_at"`
	LastAccessedAt     Time    `json:"last_accessed_at"`
	// Ours, on GET /v1/cargos/{id} only (absent in lists and when unknown): whether the size
	// limit is enforced (writes beyond it fail with "No space left on device") and the bytes
	// the cargo holds.
	SizeLimitEnforced *bool  `json:"size_limit_enforced,omitempty"`
	SizeUsedBytes     *int64 `json:"size_used_bytes,omitempty"`
}

type CargoList struct {
	Items      []CargoResponse `json:"items"`
	NextCursor *string         `json:"next_cursor"`
}

// ---- profiles ----

type Resources struct {
	CPUs   float64 `json:"cpus"`
	Memory string  `json:"memory"`
}

type ProfileContainer struct {
	Name         string    `json:"name"`
	RuntimeType  string    `json:"runtime_type"`
	Capabilities []string  `json:"capabilities"`
	Resources    Resources `json:"resources"`
}

type ProfileResponse struct {
	ID           string             `json:"id"`
	Image        string             `json:"image"`
	Resources    Resources          `json:"resources"`
	Capabilities []string           `json:"capabilities"`
	IdleTimeout  int                `json:"idle_timeout"`
	Description  *string            `json:"description"`
	Containers   []ProfileContainer `json:"containers"` // null unless detail=true
}

type ProfileList struct {
	Items []ProfileResponse `json:"items"`
}

// ---- admin GC ----

// GC task names.
const (
	GCIdleSession     = "idle_session"
	GCExpiredSandbox  = "expired_sandbox"
	GCOrphanCargo     = "orphan_cargo"
	GCOrphanContainer = "orphan_container"
)

type GCRunRequest struct {
	Tasks  []string `json:"tasks,omitempty"`   // null = all enabled tasks; a list selects what runs
	DryRun bool     `json:"dry_run,omitempty"` // ours: report what would be removed, remove nothing
}

type GCTaskResult struct {
	TaskName     string   `json:"task_name"`
	CleanedCount int      `json:"cleaned_count"`
	SkippedCount int      `json:"skipped_count"`
	Errors       []string `json:"errors"`
	// WouldClean lists the resources a dry run would remove (ours; empty otherwise).
	WouldClean []string `json:"would_clean,omitempty"`
}

type GCRunResponse struct {
	Results      []GCTaskResult `json:"results"`
	TotalCleaned int            `json:"total_cleaned"`
	TotalErrors  int            `json:"total_errors"`
	DurationMS   int64          `json:"duration_ms"`
}

type GCTaskStatus struct {
	Enabled bool `json:"enabled"`
}

type GCStatusResponse struct {
	Enabled         bool                    `json:"enabled"`
	IsRunning       bool                    `json:"is_running"`
	InstanceID      string                  `json:"instance_id"`
	IntervalSeconds int                     `json:"interval_seconds"`
	Tasks           map[string]GCTaskStatus `json:"tasks"`
	LastRunAt       *Time                   `json:"last_run_at,omitempty"`
}

// ---- paths ----

// Path patterns of the API (net/http.ServeMux syntax).
const (
	PathHealth       = "/health"
	PathSandboxes    = "/v1/sandboxes"
	PathSandbox      = "/v1/sandboxes/{sandbox_id}"
	PathExtendTTL    = "/v1/sandboxes/{sandbox_id}/extend_ttl"
	PathKeepalive    = "/v1/sandboxes/{sandbox_id}/keepalive"
	PathStop         = "/v1/sandboxes/{sandbox_id}/stop"
	PathPythonExec   = "/v1/sandboxes/{sandbox_id}/python/exec"
	PathShellExec    = "/v1/sandboxes/{sandbox_id}/shell/exec"
	PathBrowserExec  = "/v1/sandboxes/{sandbox_id}/browser/exec"
	PathBrowserBatch = "/v1/sandboxes/{sandbox_id}/browser/exec_batch"
	PathFiles        = "/v1/sandboxes/{sandbox_id}/filesystem/files"
	PathDirectories  = "/v1/sandboxes/{sandbox_id}/filesystem/directories"
	PathUpload       = "/v1/sandboxes/{sandbox_id}/filesystem/upload"
	PathDownload     = "/v1/sandboxes/{sandbox_id}/filesystem/download"
	PathTerminal     = "/v1/sandboxes/{sandbox_id}/terminal" // ours: WebSocket proxy of ship's /term/ws
	PathHistory      = "/v1/sandboxes/{sandbox_id}/history"
	PathHistoryLast  = "/v1/sandboxes/{sandbox_id}/history/last"
	PathHistoryEntry = "/v1/sandboxes/{sandbox_id}/history/{execution_id}"
	PathCargos       = "/v1/cargos"
	PathCargo        = "/v1/cargos/{cargo_id}"
	PathProfiles     = "/v1/profiles"
	PathGCRun        = "/v1/admin/gc/run"
	PathGCStatus     = "/v1/admin/gc/status"
	PathOpenAPI      = "/openapi.json"
	PathMCP          = "/mcp"
)

// SandboxPath fills the {sandbox_id} of a path pattern.
func SandboxPath(pattern, sandboxID string) string {
	return strings.Replace(pattern, "{sandbox_id}", sandboxID, 1)
}
