package httpapi

import (
	"net/http"

	"strconv"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// route is one endpoint: the mux registration and its OpenAPI description in one place.
type route struct {
	method  string
	pattern string
	// mux, when set, is what the router matches instead of pattern (which the OpenAPI
	// document shows): for a route that would collide with another under Go's rules.
	mux     string
	auth    bool
	handler http.HandlerFunc
	doc     opDoc
}

// opDoc describes an operation for the OpenAPI document.
type opDoc struct {
	id          string
	summary     string
	tag         string
	request     any // request body type (zero value), nil = none
	optionalReq bool
	multipart   bool
	status      int   // success status
	also        []int // other success statuses with the same body (e.g. 202 when not waiting)
	response    any   // response body type, nil = none
	binary      bool
	websocket   bool
	query       []param
	idempotent  bool
	// events describes the Server-Sent Events the operation answers with Accept:
	// text/event-stream, in place of its JSON.
	events string
}

type param struct {
	name     string
	typ      string // integer | string | boolean
	required bool
	desc     string
	enum     []string
}

func itoa(n int) string { return strconv.Itoa(n) }

var (
	pathQuery  = param{name: "path", typ: "string", required: true, desc: "workspace-relative path"}
	limitParam = func(def, max int) param {
		return param{name: "limit", typ: "integer", desc: "page size (1.." + itoa(max) + ", default " + itoa(def) + ")"}
	}
	cursorParam = param{name: "cursor", typ: "string", desc: "id after which the page starts (next_cursor of the previous page)"}
	execTypes   = []string{bayapi.ExecPython, bayapi.ExecShell, bayapi.ExecBrowser, bayapi.ExecBrowserBatch}
)

// routeTable is THE list of endpoints.
func (s *Server) routeTable() []route {
	return append([]route{
		{method: "GET", pattern: bayapi.PathHealth, handler: s.health,
			doc: opDoc{id: "health", summary: "Liveness", tag: "meta", status: 200, response: bayapi.HealthResponse{}}},
		{method: "GET", pattern: bayapi.PathReady, handler: s.readyz,
			doc: opDoc{id: "ready", summary: "Readiness: the database and the container engine answer (503 unavailable with details.checks otherwise)", tag: "meta", status: 200, response: bayapi.ReadyResponse{}}},
		{method: "GET", pattern: bayapi.PathOpenAPI, handler: s.openAPI,
			doc: opDoc{id: "openapi", summary: "This OpenAPI 3.1 document", tag: "meta", status: 200, response: map[string]any{}}},
		{method: "GET", pattern: bayapi.PathProfiles, handler: s.listProfiles,
			doc: opDoc{id: "listProfiles", summary: "List profiles (no authentication)", tag: "profiles", status: 200, response: bayapi.ProfileList{},
				query: []param{{name: "detail", typ: "boolean", desc: "include description and containers"}}}},

		{method: "POST", pattern: bayapi.PathSandboxes, auth: true, handler: s.createSandbox,
			doc: opDoc{id: "createSandbox", summary: "Create a sandbox (compute starts lazily)", tag: "sandboxes", request: bayapi.CreateSandboxRequest{}, status: 201, also: []int{200}, response: bayapi.SandboxResponse{}, idempotent: true}},
		{method: "GET", pattern: bayapi.PathSandboxes, auth: true, handler: s.listSandboxes,
			doc: opDoc{id: "listSandboxes", summary: "List sandboxes", tag: "sandboxes", status: 200, response: bayapi.SandboxList{},
				query: []param{limitParam(bayapi.DefaultListLimit, bayapi.MaxListLimit), cursorParam,
					{name: "status", typ: "string", desc: "filter on the computed status", enum: []string{"idle", "starting", "ready", "failed", "expired", "deleted"}}}}},
		{method: "GET", pattern: bayapi.PathSandbox, auth: true, handler: s.getSandbox,
			doc: opDoc{id: "getSandbox", summary: "Get a sandbox", tag: "sandboxes", status: 200, response: bayapi.SandboxResponse{}}},
		{method: "DELETE", pattern: bayapi.PathSandbox, auth: true, handler: s.deleteSandbox,
			doc: opDoc{id: "deleteSandbox", summary: "Delete a sandbox (idempotent)", tag: "sandboxes", status: 204}},
		{method: "POST", pattern: bayapi.PathExtendTTL, auth: true, handler: s.extendTTL,
			doc: opDoc{id: "extendTTL", summary: "Extend a sandbox's TTL", tag: "sandboxes", request: bayapi.ExtendTTLRequest{}, status: 200, response: bayapi.SandboxResponse{}, idempotent: true}},
		{method: "POST", pattern: bayapi.PathKeepalive, auth: true, handler: s.keepalive,
			doc: opDoc{id: "keepalive", summary: "Refresh the idle deadline (never starts compute)", tag: "sandboxes", status: 200, response: bayapi.StatusResponse{}}},
		{method: "POST", pattern: bayapi.PathStop, auth: true, handler: s.stopSandbox,
			doc: opDoc{id: "stopSandbox", summary: "Stop the sandbox's compute (files kept)", tag: "sandboxes", status: 200, response: bayapi.StatusResponse{}}},
		{method: "PATCH", pattern: bayapi.PathNetwork, auth: true, handler: s.setNetwork,
			doc: opDoc{id: "setNetwork", summary: "Change the network policy within the profile's (a change of mode restarts the compute)", tag: "sandboxes", request: bayapi.NetworkPolicy{}, status: 200, response: bayapi.SandboxResponse{}}},
		{method: "GET", pattern: bayapi.PathNetworkEvents, auth: true, handler: s.networkEvents,
			doc: opDoc{id: "networkEvents", summary: "The newest refused connections and DNS queries", tag: "sandboxes", status: 200, response: bayapi.NetworkEventList{}}},

		{method: "GET", pattern: bayapi.PathSandboxMetrics, auth: true, handler: s.sandboxMetrics,
			doc: opDoc{id: "sandboxMetrics", summary: "Resource use now: CPU, memory and pids of the running containers, cargo disk use against its limit (never starts compute)", tag: "sandboxes", status: 200, response: bayapi.SandboxMetrics{}}},

		{method: "POST", pattern: bayapi.PathPythonExec, auth: true, handler: s.execPython,
			doc: opDoc{id: "execPython", summary: "Run Python in the sandbox's kernel; streamed with Accept: text/event-stream", tag: "capabilities", request: bayapi.PythonExecRequest{}, status: 200, response: bayapi.PythonExecResponse{}, idempotent: true,
				events: "stdout and stderr events (a chunk each) as the cell prints, display events (one rich output each) as the kernel publishes them, then result with the JSON answer, or error with the error envelope"}},
		{method: "POST", pattern: bayapi.PathShellExec, auth: true, handler: s.execShell,
			doc: opDoc{id: "execShell", summary: "Run a shell command; streamed with Accept: text/event-stream", tag: "capabilities", request: bayapi.ShellExecRequest{}, status: 200, response: bayapi.ShellExecResponse{}, idempotent: true,
				events: "stdout and stderr events (a chunk each) as the command prints, then result with the JSON answer, or error with the error envelope"}},
		{method: "POST", pattern: bayapi.PathBrowserExec, auth: true, handler: s.execBrowser,
			doc: opDoc{id: "execBrowser", summary: "Run one agent-browser command in the sandbox's browser", tag: "capabilities", request: bayapi.BrowserExecRequest{}, status: 200, response: bayapi.BrowserExecResponse{}}},
		{method: "POST", pattern: bayapi.PathBrowserBatch, auth: true, handler: s.execBrowserBatch,
			doc: opDoc{id: "execBrowserBatch", summary: "Run agent-browser commands in order within one time budget", tag: "capabilities", request: bayapi.BrowserBatchRequest{}, status: 200, response: bayapi.BrowserBatchResponse{}}},
		{method: "GET", pattern: bayapi.PathFiles, auth: true, handler: s.readFile,
			doc: opDoc{id: "readFile", summary: "Read a text file", tag: "filesystem", status: 200, response: bayapi.FileContentResponse{}, query: []param{pathQuery}}},
		{method: "PUT", pattern: bayapi.PathFiles, auth: true, handler: s.writeFile,
			doc: opDoc{id: "writeFile", summary: "Write a text file", tag: "filesystem", request: bayapi.WriteFileRequest{}, status: 200, response: bayapi.StatusResponse{}}},
		{method: "DELETE", pattern: bayapi.PathFiles, auth: true, handler: s.deleteFile,
			doc: opDoc{id: "deleteFile", summary: "Delete a file or directory tree (not the workspace root)", tag: "filesystem", status: 200, response: bayapi.StatusResponse{}, query: []param{pathQuery}}},
		{method: "GET", pattern: bayapi.PathDirectories, auth: true, handler: s.listDir,
			doc: opDoc{id: "listDirectory", summary: "List a directory", tag: "filesystem", status: 200, response: bayapi.DirectoryResponse{},
				query: []param{{name: "path", typ: "string", desc: "workspace-relative path (default .)"}}}},
		{method: "POST", pattern: bayapi.PathUpload, auth: true, handler: s.upload,
			doc: opDoc{id: "uploadFile", summary: "Upload a file (multipart: path field before the file part, or ?path=)", tag: "filesystem", multipart: true, status: 200, response: bayapi.UploadResponse{},
				query: []param{{name: "path", typ: "string", desc: "target path (alternative to the path form field)"}}}},
		{method: "GET", pattern: bayapi.PathDownload, auth: true, handler: s.download,
			doc: opDoc{id: "downloadFile", summary: "Download a file", tag: "filesystem", status: 200, binary: true, query: []param{pathQuery}}},
		{method: "GET", pattern: bayapi.PathTerminal, auth: true, handler: s.terminal,
			doc: opDoc{id: "terminal", summary: "Interactive terminal (WebSocket proxy of ship's PTY)", tag: "capabilities", status: 101, websocket: true,
				query: []param{{name: "cols", typ: "integer", desc: "columns (default 80)"}, {name: "rows", typ: "integer", desc: "rows (default 24)"}}}},

		{method: "GET", pattern: bayapi.PathHistory, auth: true, handler: s.listHistory,
			doc: opDoc{id: "listHistory", summary: "List execution history", tag: "history", status: 200, response: bayapi.ExecutionHistoryList{},
				query: []param{{name: "exec_type", typ: "string", enum: execTypes}, {name: "success_only", typ: "boolean"},
					limitParam(bayapi.DefaultHistLimit, bayapi.MaxHistLimit), {name: "offset", typ: "integer"},
					{name: "tags", typ: "string"}, {name: "has_notes", typ: "boolean"}, {name: "has_description", typ: "boolean"}}}},
		{method: "GET", pattern: bayapi.PathHistoryLast, auth: true, handler: s.lastHistory,
			doc: opDoc{id: "lastHistory", summary: "Newest execution", tag: "history", status: 200, response: bayapi.ExecutionHistoryEntry{},
				query: []param{{name: "exec_type", typ: "string", enum: execTypes}}}},
		{method: "GET", pattern: bayapi.PathHistoryEntry, auth: true, handler: s.getHistory,
			doc: opDoc{id: "getHistory", summary: "Get one execution", tag: "history", status: 200, response: bayapi.ExecutionHistoryEntry{}}},
		{method: "PATCH", pattern: bayapi.PathHistoryEntry, auth: true, handler: s.annotateHistory,
			doc: opDoc{id: "annotateHistory", summary: "Annotate an execution", tag: "history", request: bayapi.AnnotateExecutionRequest{}, status: 200, response: bayapi.ExecutionHistoryEntry{}}},

		{method: "POST", pattern: bayapi.PathCargos, auth: true, handler: s.createCargo,
			doc: opDoc{id: "createCargo", summary: "Create an external cargo", tag: "cargos", request: bayapi.CreateCargoRequest{}, status: 201, response: bayapi.CargoResponse{}, idempotent: true}},
		{method: "GET", pattern: bayapi.PathCargos, auth: true, handler: s.listCargos,
			doc: opDoc{id: "listCargos", summary: "List cargos (managed omitted = external only)", tag: "cargos", status: 200, response: bayapi.CargoList{},
				query: []param{limitParam(bayapi.DefaultListLimit, bayapi.MaxListLimit), cursorParam, {name: "managed", typ: "boolean"}}}},
		{method: "GET", pattern: bayapi.PathCargo, auth: true, handler: s.getCargo,
			doc: opDoc{id: "getCargo", summary: "Get a cargo", tag: "cargos", status: 200, response: bayapi.CargoResponse{}}},
		{method: "DELETE", pattern: bayapi.PathCargo, auth: true, handler: s.deleteCargo,
			doc: opDoc{id: "deleteCargo", summary: "Delete a cargo", tag: "cargos", status: 204}},

		{method: "POST", pattern: bayapi.PathGCRun, auth: true, handler: s.gcRun,
			doc: opDoc{id: "gcRun", summary: "Run one GC cycle now (admin)", tag: "admin", request: bayapi.GCRunRequest{}, optionalReq: true, status: 200, response: bayapi.GCRunResponse{}}},
		{method: "GET", pattern: bayapi.PathGCStatus, auth: true, handler: s.gcStatus,
			doc: opDoc{id: "gcStatus", summary: "GC status (admin)", tag: "admin", status: 200, response: bayapi.GCStatusResponse{}}},
	}, s.skillLifeRoutes()...)
}
