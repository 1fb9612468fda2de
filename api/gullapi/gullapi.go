// Package gullapi holds the wire types of the Gull runtime HTTP API: the
// browser daemon of a sandbox (:8115), next to ship in the same sandbox and
// sharing its workspace. Field names and JSON shapes are those Bay and
// existing clients expect from a Gull runtime.
//
// This package depends on the standard library (and the sibling wire package
// shipapi) only.
package gullapi

import "github.com/shipyard-dev/shipyard/api/shipapi"

// DefaultPort is the port gull listens on inside a sandbox container.
const DefaultPort = 8115

// EnvPort names the environment variable holding the port gull listens on (all addresses)
// when its --listen flag is not given; default DefaultPort (as shipapi.EnvPort for ship).
const EnvPort = "GULL_PORT"

// EnvAuthToken names the environment variable holding the per-session token
// gull requires on every request but /health, as "Authorization: Bearer
// <token>" or as the password of Basic credentials (the same scheme as ship;
// gull has a variable of its own so a sandbox can hold both runtimes with
// different tokens). Without it gull requires nothing (started by hand).
const EnvAuthToken = "GULL_AUTH_TOKEN"

// EnvChromiumSandbox, set to 1, makes gull keep Chromium's own sandbox; bay sets it with a
// system-call filter that allows the namespaces the sandbox needs.
const EnvChromiumSandbox = "GULL_CHROMIUM_SANDBOX"

// EnvSession names the variables holding the sandbox's session name (the
// first set wins); default DefaultSession.
var EnvSession = []string{"SANDBOX_ID", "BAY_SANDBOX_ID"}

// DefaultSession is the session name without EnvSession.
const DefaultSession = "default"

// DefaultWorkspace is the workspace mount path inside a sandbox container.
const DefaultWorkspace = "/workspace"

// ProfileDir is the browser profile, relative to the workspace: it lives in
// the cargo so cookies and logins persist across container restarts.
const ProfileDir = ".browser/profile"

// APIVersion is the version of this wire API reported by /meta.
const APIVersion = "v1"

// CapabilityVersion is the version of the browser capability in /meta.
const CapabilityVersion = "1.0"

// Paths of the Gull API.
const (
	PathHealth    = "/health"
	PathMeta      = "/meta"
	PathExec      = "/exec"
	PathExecBatch = "/exec_batch"
	// PathSessions + "/{sandbox_id}" (DELETE) ends a sandbox's browser session
	// on a shared browser service; a per-sandbox gull has one session only
	// and answers without doing anything.
	PathSessions = "/sessions"
)

// DeleteSessionResponse is the answer of DELETE /sessions/{sandbox_id}.
type DeleteSessionResponse struct {
	SandboxID string `json:"sandbox_id"`
	Destroyed bool   `json:"destroyed"`
}

// Bounds of the exec requests (seconds).
const (
	DefaultExecTimeout  = 30
	MaxExecTimeout      = 300
	DefaultBatchTimeout = 60
	MaxBatchTimeout     = 600
	// MaxBatchCommands bounds the commands of one batch; MaxCommandBytes one
	// command line.
	MaxBatchCommands = 1000
	MaxCommandBytes  = 64 << 10
)

// ExecRequest is POST /exec. Cmd is an agent-browser command line without the
// "agent-browser" prefix (e.g. "snapshot -i"), split into words like a POSIX
// shell would, never run by one.
type ExecRequest struct {
	Cmd     *string `json:"cmd"`
	Timeout *int    `json:"timeout,omitempty"` // seconds, 1..300, default 30
}

// ExecResponse is the answer of POST /exec. ExitCode is 0 on success, 1 on a
// failed command, -1 on a timeout (Stderr then says "Command timed out after
// Ns").
type ExecResponse struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
}

// ExecBatchRequest is POST /exec_batch. Timeout is the budget of the whole
// batch: each step gets what is left, and the batch stops (silently) when
// nothing is left.
type ExecBatchRequest struct {
	Commands    []string `json:"commands"`
	Timeout     *int     `json:"timeout,omitempty"`       // seconds, 1..600, default 60
	StopOnError *bool    `json:"stop_on_error,omitempty"` // default true
}

// BatchStep is one step of an ExecBatchResponse.
type BatchStep struct {
	Cmd        string `json:"cmd"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	ExitCode   int    `json:"exit_code"`
	StepIndex  int    `json:"step_index"`
	DurationMS int64  `json:"duration_ms"`
}

// ExecBatchResponse is the answer of POST /exec_batch. Success is true when
// every command ran and exited 0.
type ExecBatchResponse struct {
	Results        []BatchStep `json:"results"`
	TotalSteps     int         `json:"total_steps"`
	CompletedSteps int         `json:"completed_steps"`
	Success        bool        `json:"success"`
	DurationMS     int64       `json:"duration_ms"`
}

// Health statuses.
const (
	StatusHealthy   = "healthy"   // gull serves; the browser runs or starts on demand
	StatusDegraded  = "degraded"  // the browser died or failed to start; gull is restarting it
	StatusUnhealthy = "unhealthy" // no browser binary: browser commands cannot work
)

// HealthResponse is GET /health (no token needed). BrowserReady is true when
// Chromium runs and answers: the readiness signal of a gull container.
type HealthResponse struct {
	Status        string `json:"status"`
	BrowserActive bool   `json:"browser_active"`
	BrowserReady  bool   `json:"browser_ready"`
	Session       string `json:"session"`
	Version       string `json:"version"`
}

// MetaResponse is GET /meta.
type MetaResponse struct {
	Runtime       shipapi.MetaRuntime    `json:"runtime"` // Name "gull"
	Workspace     shipapi.MetaWorkspace  `json:"workspace"`
	Capabilities  map[string]Capability  `json:"capabilities"` // "browser"
	BuiltInSkills []shipapi.BuiltInSkill `json:"built_in_skills"`
}

// Capability describes the browser capability in /meta.
type Capability struct {
	Version    string            `json:"version"`
	Operations []string          `json:"operations"`
	Endpoints  map[string]string `json:"endpoints"`
}

// ErrorResponse is the body of every non-2xx answer, as ship's:
// {"detail": "...", "code": "..."}.
type ErrorResponse = shipapi.ErrorResponse

// Error codes carried in ErrorResponse.Code.
const (
	CodeValidation   = "validation_error" // 422: malformed body, missing cmd, timeout out of range
	CodeTooLarge     = shipapi.CodeTooLarge
	CodeNotFound     = shipapi.CodeNotFound
	CodeUnauthorized = shipapi.CodeUnauthorized // 401: missing or wrong runtime token
	CodeForbidden    = "forbidden"              // 403: a request from a web page (Origin) or for a foreign Host
	CodeInternal     = shipapi.CodeInternal
)
