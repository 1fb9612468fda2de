package sdk

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

func (c *Client) sandbox(s *Sandbox) *Sandbox {
	s.c = c
	return s
}

func esc(s string) string { return url.PathEscape(s) }

func sbPath(pattern, id string) string { return bayapi.SandboxPath(pattern, esc(id)) }

func checkID(kind, id string) error {
	if id == "" {
		return fmt.Errorf("sdk: empty %s id", kind)
	}
	return nil
}

// ---- health & profiles ----

// Health calls GET /health (no authentication needed).
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var out Health
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: bayapi.PathHealth}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListProfiles calls GET /v1/profiles; detail adds descriptions and containers.
func (c *Client) ListProfiles(ctx context.Context, detail bool) (*ProfileList, error) {
	q := url.Values{}
	if detail {
		q.Set("detail", "true")
	}
	var out ProfileList
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: bayapi.PathProfiles, query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ---- sandboxes ----

// CreateSandboxRequest is the body of POST /v1/sandboxes.
type CreateSandboxRequest struct {
	// Profile defaults to bay's python-default.
	Profile string
	// CargoID attaches an existing external cargo as /workspace.
	CargoID string
	// TTL is the sandbox lifetime (sent in whole seconds, rounded up); 0 = no expiry.
	TTL time.Duration
	// Skills are library skills mounted read-only at /skills/<name> on top of the profile's
	// (an unknown name is validation_error).
	Skills []string
	// Reuse asks for the caller's sandbox of a key instead of a new one (nil: a new one).
	Reuse *Reuse
	// Network tightens the profile's network policy (nil: the profile's; Allow nil: the
	// profile's list).
	Network *NetworkPolicy
}

// Reuse names the sandbox of a key (seed 002's reuse by project and agent, e.g.
// "<project>:<agent>"): bay returns the caller's live sandbox of the key, or creates it once
// however many calls race, on any bay. IdleTTL and HardTTL (seconds; 0: bay's defaults,
// reuse.idle_ttl_sec and hard_ttl_sec) retire a sandbox idle or alive longer: it is deleted
// and replaced.
type Reuse struct {
	Key              string
	IdleTTL, HardTTL time.Duration // 0: the server's default; sent as whole seconds, rounded up
}

// CreateSandbox calls POST /v1/sandboxes with an Idempotency-Key (generated unless
// WithIdempotencyKey is given), so it is retried safely. Errors: validation_error (unknown
// profile), not_found (cargo), conflict (idempotency key reused with another body).
func (c *Client) CreateSandbox(ctx context.Context, req CreateSandboxRequest, opts ...CallOption) (*Sandbox, error) {
	o := applyCallOptions(opts)
	body := bayapi.CreateSandboxRequest{}
	if req.Profile != "" {
		body.Profile = &req.Profile
	}
	if req.CargoID != "" {
		body.CargoID = &req.CargoID
	}
	if req.TTL != 0 {
		body.TTL = bayapi.IntPtr(int64(wholeSeconds(req.TTL)))
	}
	body.Skills = req.Skills
	if r := req.Reuse; r != nil {
		body.Reuse = &bayapi.ReuseSpec{Key: r.Key, IdleTTL: optSeconds(r.IdleTTL), HardTTL: optSeconds(r.HardTTL)}
	}
	if n := req.Network; n != nil {
		w := bayapi.NetworkPolicy(*n)
		body.Network = &w
	}
	var out Sandbox
	err := c.doJSON(ctx, &request{method: http.MethodPost, path: bayapi.PathSandboxes, jsonBody: body,
		idemKey: keyOr(o.idemKey), requestID: o.requestID}, &out)
	if err != nil {
		return nil, err
	}
	return c.sandbox(&out), nil
}

func keyOr(k string) string {
	if k != "" {
		return k
	}
	return NewIdempotencyKey()
}

// ListSandboxesRequest holds the query of GET /v1/sandboxes.
type ListSandboxesRequest struct {
	Limit  int    // 1..200; 0 = bay's default (50)
	Cursor string // next_cursor of the previous page
	Status string // idle|starting|ready|failed|expired; "" = all
}

// ListSandboxes returns one page of the caller's sandboxes ordered by id.
func (c *Client) ListSandboxes(ctx context.Context, req ListSandboxesRequest) (*SandboxList, error) {
	q := url.Values{}
	if req.Limit > 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	if req.Cursor != "" {
		q.Set("cursor", req.Cursor)
	}
	if req.Status != "" {
		q.Set("status", req.Status)
	}
	var out SandboxList
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: bayapi.PathSandboxes, query: q}, &out); err != nil {
		return nil, err
	}
	for _, s := range out.Items {
		c.sandbox(s)
	}
	return &out, nil
}

// GetSandbox calls GET /v1/sandboxes/{id}. Errors: not_found.
func (c *Client) GetSandbox(ctx context.Context, id string) (*Sandbox, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	var out Sandbox
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: sbPath(bayapi.PathSandbox, id)}, &out); err != nil {
		return nil, err
	}
	return c.sandbox(&out), nil
}

// ExtendTTL calls POST /v1/sandboxes/{id}/extend_ttl with an Idempotency-Key (generated
// unless given). Errors: validation_error (seconds <= 0), not_found, sandbox_expired,
// sandbox_ttl_infinite, conflict.
func (c *Client) ExtendTTL(ctx context.Context, id string, by time.Duration, opts ...CallOption) (*Sandbox, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	o := applyCallOptions(opts)
	var out Sandbox
	err := c.doJSON(ctx, &request{method: http.MethodPost, path: sbPath(bayapi.PathExtendTTL, id),
		jsonBody: bayapi.ExtendTTLRequest{ExtendBy: bayapi.IntPtr(int64(wholeSeconds(by)))},
		idemKey:  keyOr(o.idemKey), requestID: o.requestID}, &out)
	if err != nil {
		return nil, err
	}
	return c.sandbox(&out), nil
}

// Keepalive calls POST /v1/sandboxes/{id}/keepalive (refreshes the idle timer; never starts
// a session).
func (c *Client) Keepalive(ctx context.Context, id string) error {
	if err := checkID("sandbox", id); err != nil {
		return err
	}
	return c.doJSON(ctx, &request{method: http.MethodPost, path: sbPath(bayapi.PathKeepalive, id)}, nil)
}

// StopSandbox calls POST /v1/sandboxes/{id}/stop (idempotent; the workspace is kept).
func (c *Client) StopSandbox(ctx context.Context, id string) error {
	if err := checkID("sandbox", id); err != nil {
		return err
	}
	return c.doJSON(ctx, &request{method: http.MethodPost, path: sbPath(bayapi.PathStop, id)}, nil)
}

// DeleteSandbox calls DELETE /v1/sandboxes/{id} (204; repeated deletes succeed).
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	if err := checkID("sandbox", id); err != nil {
		return err
	}
	return c.doJSON(ctx, &request{method: http.MethodDelete, path: sbPath(bayapi.PathSandbox, id)}, nil)
}

// ---- exec ----

// ExecOptions are the optional fields common to python and shell exec.
type ExecOptions struct {
	// Timeout of the execution, 1 s..300 s (sent in whole seconds, rounded up); 0 = bay's
	// default (30 s).
	Timeout time.Duration
	// IncludeCode echoes the code/command in the response.
	IncludeCode bool
	// Description and Tags (comma-separated) are stored in the execution history.
	Description string
	Tags        string
}

// PythonRequest is the body of POST .../python/exec.
type PythonRequest struct {
	Code string
	ExecOptions
}

// ShellRequest is the body of POST .../shell/exec.
type ShellRequest struct {
	Command string
	// Cwd is relative to /workspace; "" = /workspace.
	Cwd string
	ExecOptions
}

// execTimeout bounds one attempt of an execution whose own timeout is t (0 = bay's default of
// def seconds): the execution time plus a grace for bay's bookkeeping, and never less than
// the client's timeout.
func (c *Client) execTimeout(t time.Duration, def int) time.Duration {
	if t <= 0 {
		t = time.Duration(def) * time.Second
	}
	d := time.Duration(wholeSeconds(t))*time.Second + 15*time.Second
	if c.timeout == 0 {
		return 0
	}
	return max(d, c.timeout)
}

func optStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optInt(n int) *bayapi.Int {
	if n == 0 {
		return nil
	}
	return bayapi.IntPtr(int64(n))
}

// optSeconds is d on the wire: whole seconds rounded up, or absent for 0 (bay's default).
func optSeconds(d time.Duration) *bayapi.Int { return optInt(wholeSeconds(d)) }

// wholeSeconds rounds d up to whole seconds, the wire's unit (a negative d stays negative, for
// bay to refuse).
func wholeSeconds(d time.Duration) int {
	if d < 0 {
		return -int((-d + time.Second - 1) / time.Second)
	}
	return int((d + time.Second - 1) / time.Second)
}

// ExecPython runs code in the sandbox's persistent IPython kernel (POST .../python/exec).
// A Python exception is a successful call with Success false and the traceback in Error.
// The call is never retried (except on session_not_ready, when nothing ran).
func (c *Client) ExecPython(ctx context.Context, id string, req PythonRequest) (*PythonResult, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	body := bayapi.PythonExecRequest{Code: &req.Code, Timeout: optSeconds(req.Timeout), IncludeCode: req.IncludeCode,
		Description: optStr(req.Description), Tags: optStr(req.Tags)}
	var out PythonResult
	if err := c.doJSON(ctx, &request{method: http.MethodPost, path: sbPath(bayapi.PathPythonExec, id), jsonBody: body,
		timeout: c.execTimeout(req.Timeout, bayapi.DefaultExecTimeout)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExecShell runs a command with bash in the sandbox (POST .../shell/exec). A non-zero exit
// status is a successful call with ExitCode set. Never retried (except on session_not_ready).
func (c *Client) ExecShell(ctx context.Context, id string, req ShellRequest) (*ShellResult, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	body := bayapi.ShellExecRequest{Command: &req.Command, Timeout: optSeconds(req.Timeout), Cwd: optStr(req.Cwd),
		IncludeCode: req.IncludeCode, Description: optStr(req.Description), Tags: optStr(req.Tags)}
	var out ShellResult
	if err := c.doJSON(ctx, &request{method: http.MethodPost, path: sbPath(bayapi.PathShellExec, id), jsonBody: body,
		timeout: c.execTimeout(req.Timeout, bayapi.DefaultExecTimeout)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ---- filesystem ----

// ReadFile returns a UTF-8 text file of the workspace (GET .../filesystem/files).
func (c *Client) ReadFile(ctx context.Context, id, path string) (string, error) {
	if err := checkID("sandbox", id); err != nil {
		return "", err
	}
	var out bayapi.FileContentResponse
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: sbPath(bayapi.PathFiles, id),
		query: url.Values{"path": {path}}}, &out); err != nil {
		return "", err
	}
	return out.Content, nil
}

// WriteFile writes a text file, creating parent directories (PUT .../filesystem/files).
func (c *Client) WriteFile(ctx context.Context, id, path, content string) error {
	if err := checkID("sandbox", id); err != nil {
		return err
	}
	return c.doJSON(ctx, &request{method: http.MethodPut, path: sbPath(bayapi.PathFiles, id),
		jsonBody: bayapi.WriteFileRequest{Path: &path, Content: &content}}, nil)
}

// DeleteFile removes a file or a directory tree (DELETE .../filesystem/files).
func (c *Client) DeleteFile(ctx context.Context, id, path string) error {
	if err := checkID("sandbox", id); err != nil {
		return err
	}
	return c.doJSON(ctx, &request{method: http.MethodDelete, path: sbPath(bayapi.PathFiles, id),
		query: url.Values{"path": {path}}}, nil)
}

// ListFiles lists a workspace directory ("" = "."); hidden entries are not listed.
func (c *Client) ListFiles(ctx context.Context, id, path string) ([]FileInfo, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	if path == "" {
		path = "."
	}
	var out struct {
		Entries []FileInfo `json:"entries"`
	}
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: sbPath(bayapi.PathDirectories, id),
		query: url.Values{"path": {path}}}, &out); err != nil {
		return nil, err
	}
	return out.Entries, nil
}

// ---- history ----

// HistoryRequest is the query of GET .../history.
type HistoryRequest struct {
	ExecType       string // python|shell|browser|browser_batch; "" = all
	SuccessOnly    bool
	Limit          int // 1..500; 0 = bay's default (100)
	Offset         int
	Tags           string
	HasNotes       *bool
	HasDescription *bool
}

// ListHistory returns the sandbox's execution history, newest first.
func (c *Client) ListHistory(ctx context.Context, id string, req HistoryRequest) (*History, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	q := url.Values{}
	if req.ExecType != "" {
		q.Set("exec_type", req.ExecType)
	}
	if req.SuccessOnly {
		q.Set("success_only", "true")
	}
	if req.Limit > 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	if req.Offset > 0 {
		q.Set("offset", strconv.Itoa(req.Offset))
	}
	if req.Tags != "" {
		q.Set("tags", req.Tags)
	}
	if req.HasNotes != nil {
		q.Set("has_notes", strconv.FormatBool(*req.HasNotes))
	}
	if req.HasDescription != nil {
		q.Set("has_description", strconv.FormatBool(*req.HasDescription))
	}
	var out History
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: sbPath(bayapi.PathHistory, id), query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// LastExecution returns the newest history entry (of execType if non-empty). Errors: not_found.
func (c *Client) LastExecution(ctx context.Context, id, execType string) (*HistoryEntry, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	q := url.Values{}
	if execType != "" {
		q.Set("exec_type", execType)
	}
	var out HistoryEntry
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: sbPath(bayapi.PathHistoryLast, id), query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func historyEntryPath(id, execID string) string {
	return sbPath(bayapi.PathHistory, id) + "/" + esc(execID)
}

// GetExecution returns one history entry. Errors: not_found.
func (c *Client) GetExecution(ctx context.Context, id, executionID string) (*HistoryEntry, error) {
	if err := errors.Join(checkID("sandbox", id), checkID("execution", executionID)); err != nil {
		return nil, err
	}
	var out HistoryEntry
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: historyEntryPath(id, executionID)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AnnotateExecution sets description, tags and/or notes of a history entry (nil = unchanged)
// and returns the updated entry (PATCH .../history/{execution_id}).
func (c *Client) AnnotateExecution(ctx context.Context, id, executionID string, req AnnotateRequest) (*HistoryEntry, error) {
	if err := errors.Join(checkID("sandbox", id), checkID("execution", executionID)); err != nil {
		return nil, err
	}
	var out HistoryEntry
	if err := c.doJSON(ctx, &request{method: http.MethodPatch, path: historyEntryPath(id, executionID), jsonBody: bayapi.AnnotateExecutionRequest(req)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ---- cargos ----

// CreateCargo creates an external cargo (persistent workspace volume). sizeLimitMB 0 = bay's
// default. It always sends a JSON body (fixing the reference SDK's 422) and an
// Idempotency-Key (generated unless given).
func (c *Client) CreateCargo(ctx context.Context, sizeLimitMB int, opts ...CallOption) (*Cargo, error) {
	o := applyCallOptions(opts)
	var out Cargo
	err := c.doJSON(ctx, &request{method: http.MethodPost, path: bayapi.PathCargos,
		jsonBody: bayapi.CreateCargoRequest{SizeLimitMB: optInt(sizeLimitMB)},
		idemKey:  keyOr(o.idemKey), requestID: o.requestID}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ListCargosRequest is the query of GET /v1/cargos.
type ListCargosRequest struct {
	Limit  int
	Cursor string
	// Managed selects managed (true) or external (false) cargos; nil = bay's default (external).
	Managed *bool
}

// ListCargos returns one page of cargos.
func (c *Client) ListCargos(ctx context.Context, req ListCargosRequest) (*CargoList, error) {
	q := url.Values{}
	if req.Limit > 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	if req.Cursor != "" {
		q.Set("cursor", req.Cursor)
	}
	if req.Managed != nil {
		q.Set("managed", strconv.FormatBool(*req.Managed))
	}
	var out CargoList
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: bayapi.PathCargos, query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func cargoPath(id string) string { return bayapi.PathCargos + "/" + esc(id) }

// GetCargo returns one cargo. Errors: not_found.
func (c *Client) GetCargo(ctx context.Context, id string) (*Cargo, error) {
	if err := checkID("cargo", id); err != nil {
		return nil, err
	}
	var out Cargo
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: cargoPath(id)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteCargo deletes a cargo. Errors: not_found, conflict (still used by a sandbox).
func (c *Client) DeleteCargo(ctx context.Context, id string) error {
	if err := checkID("cargo", id); err != nil {
		return err
	}
	return c.doJSON(ctx, &request{method: http.MethodDelete, path: cargoPath(id)}, nil)
}

// ---- admin ----

// RunGC runs one GC cycle now (POST /v1/admin/gc/run). Errors: gc_running (423).
// Not retried.
func (c *Client) RunGC(ctx context.Context, req GCRequest) (*GCResult, error) {
	var out GCResult
	if err := c.doJSON(ctx, &request{method: http.MethodPost, path: bayapi.PathGCRun, jsonBody: bayapi.GCRunRequest(req),
		timeout: max(c.timeout, 5*time.Minute)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GCStatus returns the GC scheduler's state (GET /v1/admin/gc/status).
func (c *Client) GCStatus(ctx context.Context) (*GCStatus, error) {
	var out GCStatus
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: bayapi.PathGCStatus}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
