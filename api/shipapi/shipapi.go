// Package shipapi holds the wire types of the Ship runtime HTTP API (the daemon inside every
// sandbox container, :8123). Field names and JSON shapes are those of the Python Shipyard Neo
// runtime, so that Bay and any client written against that runtime agree on the wire.
//
// This package depends on the standard library only; both cmd/ship and bay's ship client import it.
package shipapi

// DefaultPort is the port ship listens on inside a sandbox container.
const DefaultPort = 8123

// EnvPort names the environment variable holding the port ship listens on (all addresses)
// when its --listen flag is not given; default DefaultPort. Bay sets it to the profile's
// runtime_port: the containers of a sandbox share one network namespace, so two runtimes of
// one type need ports of their own.
const EnvPort = "SHIP_PORT"

// EnvAuthToken names the environment variable holding the token ship requires on every
// request but /health, as "Authorization: Bearer <token>" or as the password of Basic
// credentials. Ship removes it from the environment its kernel, shells and terminals get.
// Without it ship requires nothing (a runtime started by hand on a host).
const EnvAuthToken = "SHIP_AUTH_TOKEN"

// EnvSandboxUser names the environment variable ("uid:gid", the image sets 1000:1000) that asks
// ship to separate privileges when it is started as root: it switches to its own system user
// keeping only CAP_SETUID, CAP_SETGID and CAP_KILL and runs all user code as this user with no
// capability. Started as another user ship runs everything as that user; without the variable
// ship never changes its user.
const EnvSandboxUser = "SHIP_SANDBOX_USER"

// EnvProfileEnvKeys names the environment variable in which bay lists, comma-separated, the
// variables of the sandbox profile's environment. Ship writes them to ProfileEnvFile at start
// as `export KEY='value'` lines, so a shell that does not inherit ship's environment (a login
// shell of another tool, a cron job) can source them.
const EnvProfileEnvKeys = "SHIP_PROFILE_ENV_KEYS"

// EnvNoKernel, set to 1, makes ship start its Python kernel on the first /ipython call instead
// of at boot (as --no-kernel): a profile that pairs ship with a browser runtime sets it on the
// ship container, so that Chromium does not share its start with the kernel's. The first python
// call then waits for the kernel to start.
const EnvNoKernel = "SHIP_NO_KERNEL"

// ProfileEnvFile is the file, relative to the workspace, ship writes the profile's environment to.
const ProfileEnvFile = ".bay_env.sh"

// DefaultWorkspace is the workspace mount path inside a sandbox container.
const DefaultWorkspace = "/workspace"

// APIVersion is the version of this wire API reported by /meta.
const APIVersion = "v1"

// Paths of the Ship API.
const (
	PathHealth        = "/health"
	PathMeta          = "/meta"
	PathStat          = "/stat"
	PathFSCreate      = "/fs/create_file"
	PathFSRead        = "/fs/read_file"
	PathFSWrite       = "/fs/write_file"
	PathFSEdit        = "/fs/edit_file"
	PathFSDelete      = "/fs/delete_file"
	PathFSList        = "/fs/list_dir"
	PathFSUpload      = "/fs/upload"
	PathFSDownload    = "/fs/download"
	PathPythonExec    = "/ipython/exec"
	PathKernelStatus  = "/ipython/kernel/status"
	PathKernelRestart = "/ipython/kernel/restart"
	PathShellExec     = "/shell/exec"
	PathShellProcs    = "/shell/processes"
	PathTerminal      = "/term/ws"
)

// ErrorResponse is the body of every non-2xx Ship answer: {"detail": "..."}, as FastAPI
// produced it, plus a stable machine-readable code that Bay maps onto its own error codes.
type ErrorResponse struct {
	Detail string `json:"detail"`
	// Code is one of the Code* constants below.
	Code string `json:"code,omitempty"`
}

// Error codes carried in ErrorResponse.Code. They are stable: clients (bay) branch on them, so
// a code is never renamed or reused for another meaning; new codes may be added. The HTTP status
// of each is fixed and given here. A shell cwd gets the codes of a file API path (its detail
// starts with "cwd: "): access_denied when it leads outside the workspace (a symlink
// included), not_found, not_directory, invalid_path.
const (
	CodeBadRequest    = "bad_request"     // 400: malformed body or arguments (a truncated upload included)
	CodeNotFound      = "not_found"       // 404: file, directory, process or kernel missing
	CodeAccessDenied  = "access_denied"   // 403: path escapes the workspace, or the sandbox user may not access it
	CodeIsDirectory   = "is_directory"    // 400: a directory where a file is expected (the path "." included)
	CodeNotDirectory  = "not_directory"   // 400: a file where a directory is expected
	CodeInvalidPath   = "invalid_path"    // 400: NUL byte, a name over 255 bytes, a path over 4095 bytes
	CodeInvalidUTF8   = "invalid_utf8"    // 400: text read of a binary file
	CodeTooLarge      = "too_large"       // 413: request body or upload over the size limit
	CodeFileTooLarge  = "file_too_large"  // 413: text read (read_file) of more than its limit; download the file instead (PathFSDownload)
	CodeConflict      = "conflict"        // 400: edit_file ambiguity (multiple matches etc.)
	CodeKernelDied    = "kernel_died"     // 500 on exec: kernel died during the call and was restarted
	CodeKernelStartup = "kernel_starting" // 503: kernel not ready in time
	CodeInternal      = "internal_error"  // 500
	CodeUnauthorized  = "unauthorized"    // 401: missing or wrong runtime token (EnvAuthToken)
	// CodeResourcesExhausted (503): the sandbox ran out of processes (its pids limit) and ship
	// could not start the kernel or a command even after killing every process of the sandbox
	// user. A response that succeeded only after that clean-up says so in its Notice instead.
	CodeResourcesExhausted = "resources_exhausted"
)

// statusOf is the one code -> HTTP status table.
var statusOf = map[string]int{
	CodeBadRequest: 400, CodeNotFound: 404, CodeAccessDenied: 403, CodeIsDirectory: 400,
	CodeInvalidPath: 400, CodeFileTooLarge: 413, CodeResourcesExhausted: 503, CodeNotDirectory: 400,
	CodeInvalidUTF8: 400, CodeTooLarge: 413, CodeConflict: 400, CodeKernelDied: 500,
	CodeKernelStartup: 503, CodeInternal: 500, CodeUnauthorized: 401,
}

// StatusOf is the HTTP status ship answers an error code with (500 for a code it does not know).
func StatusOf(code string) int {
	if st, ok := statusOf[code]; ok {
		return st
	}
	return 500
}

// HealthResponse is GET /health.
type HealthResponse struct {
	Status  string `json:"status"` // "healthy"
	Version string `json:"version"`
}

// StatResponse is GET /stat.
type StatResponse struct {
	Service string `json:"service"`
	Version string `json:"version"`
	Status  string `json:"status"`
	Author  string `json:"author"`
	// Extra, not in the reference: process figures useful for benchmarks.
	UptimeSeconds float64 `json:"uptime_seconds"`
	RSSBytes      int64   `json:"rss_bytes"`
	KernelRSS     int64   `json:"kernel_rss_bytes"`
}

// MetaResponse is GET /meta.
type MetaResponse struct {
	Runtime       MetaRuntime           `json:"runtime"`
	Workspace     MetaWorkspace         `json:"workspace"`
	Capabilities  map[string]Capability `json:"capabilities"`
	BuiltInSkills []BuiltInSkill        `json:"built_in_skills"`
}

type MetaRuntime struct {
	Name       string    `json:"name"` // "ship"
	Version    string    `json:"version"`
	APIVersion string    `json:"api_version"`
	Build      MetaBuild `json:"build"`
}

type MetaBuild struct {
	Image       string  `json:"image"`
	ImageDigest *string `json:"image_digest"`
	GitSHA      *string `json:"git_sha"`
}

type MetaWorkspace struct {
	MountPath string `json:"mount_path"`
}

// Capability describes one capability in /meta.
type Capability struct {
	Operations []string          `json:"operations"`
	PathMode   string            `json:"path_mode,omitempty"`
	Engine     string            `json:"engine,omitempty"`
	Protocol   string            `json:"protocol,omitempty"`
	Endpoints  map[string]string `json:"endpoints"`
}

// BuiltInSkill is one SKILL.md folder shipped with the runtime.
type BuiltInSkill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Path        string `json:"path"`
}

// ---- filesystem ----

type CreateFileRequest struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Mode    *int   `json:"mode,omitempty"` // unix permission bits, default 0o644 (420)
}

type CreateFileResponse struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
	Path    string `json:"path"`
}

type ReadFileRequest struct {
	Path     string `json:"path"`
	Encoding string `json:"encoding,omitempty"` // only "utf-8" is supported
	Offset   *int   `json:"offset,omitempty"`   // 1-based first line
	Limit    *int   `json:"limit,omitempty"`    // number of lines
}

type ReadFileResponse struct {
	Content string `json:"content"`
	Path    string `json:"path"`
	Size    int64  `json:"size"` // bytes of the whole file
}

type WriteFileRequest struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Mode     string `json:"mode,omitempty"` // "w" (default) or "a"
	Encoding string `json:"encoding,omitempty"`
}

type WriteFileResponse struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
	Path    string `json:"path"`
	Size    int64  `json:"size"`
}

type EditFileRequest struct {
	Path       string `json:"path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
	Encoding   string `json:"encoding,omitempty"`
}

type EditFileResponse struct {
	Success      bool   `json:"success"`
	Message      string `json:"message"`
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
	Size         int64  `json:"size"`
}

type DeleteFileRequest struct {
	Path string `json:"path"`
}

type DeleteFileResponse struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
}

type ListDirRequest struct {
	Path       string `json:"path"`
	ShowHidden bool   `json:"show_hidden"`
}

// FileInfo is one directory entry; Bay passes it through verbatim.
type FileInfo struct {
	Name         string  `json:"name"`
	Path         string  `json:"path"` // absolute, e.g. /workspace/src
	IsFile       bool    `json:"is_file"`
	IsDir        bool    `json:"is_dir"`
	Size         *int64  `json:"size"` // null for directories
	ModifiedTime float64 `json:"modified_time"`
}

type ListDirResponse struct {
	Files       []FileInfo `json:"files"`
	CurrentPath string     `json:"current_path"`
}

// Upload is multipart/form-data with a file part "file" and a text field "file_path".
const (
	UploadFileField = "file"
	UploadPathField = "file_path"
	// DownloadPathParam is the query parameter of GET /fs/download.
	DownloadPathParam = "file_path"
)

type UploadResponse struct {
	Success  bool    `json:"success"`
	Message  string  `json:"message"`
	FilePath string  `json:"file_path"`
	Size     int64   `json:"size"`
	Error    *string `json:"error"`
}

// ---- python ----

type ExecPythonRequest struct {
	Code    string `json:"code"`
	Timeout int    `json:"timeout,omitempty"` // seconds, default 30
	Silent  bool   `json:"silent"`
}

// PythonOutput is the collected output of one execution.
type PythonOutput struct {
	Text   string              `json:"text"`
	Images []map[string]string `json:"images"` // [{"image/png": "<base64>"}]
}

type ExecPythonResponse struct {
	Success        bool         `json:"success"`
	ExecutionCount *int         `json:"execution_count"`
	Output         PythonOutput `json:"output"`
	// Stdout and Stderr are the cell's two streams apart (Output.Text has both, in the order
	// printed, with the rich outputs' text), each bounded as Output.Text is.
	Stdout string  `json:"stdout"`
	Stderr string  `json:"stderr"`
	Error  *string `json:"error"`
	// TimedOut is set when the cell was interrupted after its timeout (kernel state kept,
	// unless KernelRestarted).
	TimedOut bool `json:"timed_out,omitempty"`
	// KernelRestarted is set when the kernel was restarted during or since the previous call (a
	// cell ignoring the interrupt after its timeout, or a dead kernel): every variable and
	// import of the session is gone. KernelNotice says why. Set on the call that caused the
	// restart and on the next one.
	KernelRestarted bool   `json:"kernel_restarted,omitempty"`
	KernelNotice    string `json:"kernel_notice,omitempty"`
	// TextTruncated and ImagesTruncated are set when output was cut at ship's limits.
	TextTruncated   bool `json:"text_truncated,omitempty"`
	ImagesTruncated bool `json:"images_truncated,omitempty"`
	// Notice reports what ship did on its own to run the call, e.g. that it killed every
	// process of the sandbox user because the pids limit was reached.
	Notice string `json:"notice,omitempty"`
}

type KernelStatusResponse struct {
	Status    string `json:"status"` // not_started | starting | alive | dead | restarting
	HasKernel bool   `json:"has_kernel"`
	Workspace string `json:"workspace"`
	PID       int    `json:"pid,omitempty"`
	Restarts  int    `json:"restarts"`
}

type KernelRestartResponse struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
}

// ---- shell ----

type ExecShellRequest struct {
	Command    string            `json:"command"`
	Cwd        *string           `json:"cwd,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Timeout    *int              `json:"timeout,omitempty"` // seconds, default 30
	Shell      *bool             `json:"shell,omitempty"`   // default true
	Background bool              `json:"background"`
}

type ExecShellResponse struct {
	Success         bool    `json:"success"`
	ReturnCode      int     `json:"return_code"` // -1 on timeout
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	PID             *int    `json:"pid"`
	ProcessID       *string `json:"process_id"`
	Error           *string `json:"error"`
	StdoutTruncated bool    `json:"stdout_truncated,omitempty"`
	StderrTruncated bool    `json:"stderr_truncated,omitempty"`
	TimedOut        bool    `json:"timed_out,omitempty"`
	// Notice: see ExecPythonResponse.Notice.
	Notice string `json:"notice,omitempty"`
}

// ProcessInfo describes one background process.
type ProcessInfo struct {
	ProcessID       string   `json:"process_id"`
	PID             int      `json:"pid"`
	Command         string   `json:"command"`
	Status          string   `json:"status"` // running | completed | failed | killed
	ReturnCode      *int     `json:"return_code"`
	StartedAt       float64  `json:"started_at"`
	FinishedAt      *float64 `json:"finished_at"`
	Stdout          string   `json:"stdout,omitempty"`
	Stderr          string   `json:"stderr,omitempty"`
	StdoutTruncated bool     `json:"stdout_truncated,omitempty"`
	StderrTruncated bool     `json:"stderr_truncated,omitempty"`
}

type ListProcessesResponse struct {
	Processes []ProcessInfo `json:"processes"`
}

// ---- terminal ----

// TerminalExitReason prefixes the reason of the normal closure ship sends when the terminal's
// shell exited by itself: "exit 3" (a shell killed by signal N gives 128+N, as bash reports
// it). bay relays close codes and reasons as they are, so a client can exit with the status.
const TerminalExitReason = "exit "

// ResizeMessage is a text frame on /term/ws that resizes the PTY instead of being typed.
type ResizeMessage struct {
	Type string `json:"type"` // "resize"
	Cols int    `json:"cols"`
	Rows int    `json:"rows"`
}

// Background process paths: GET PathShellProcs lists; GET PathShellProcs+"/{process_id}" inspects;
// POST PathShellProcs+"/{process_id}/kill" kills the process group.
const PathShellProcKillSuffix = "/kill"
