// Package shipstub is an in-memory stand-in for the Ship runtime API, for tests of bay's ship
// client, lifecycle service and HTTP layer. It keeps files in a map, runs no code (python and
// shell calls echo their input unless a handler is scripted), and answers errors in Ship's
// shape ({"detail", "code"}). Like ship it refuses every call but /health without a runtime
// token (401 unauthorized): any non-empty token, or exactly Token when set. The contract tests
// of internal/bay/shipclient hold it to the real ship. Use New to get an httptest server.
package shipstub

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"

	"github.com/shipyard-dev/shipyard/api/shipapi"
)

// Stub is a fake ship. Its fields may be set before use; the maps are guarded by mu.
type Stub struct {
	mu    sync.Mutex
	files map[string][]byte // workspace-relative path -> content

	// Python, when set, answers /ipython/exec.
	Python func(req shipapi.ExecPythonRequest) (int, any)
	// Shell, when set, answers /shell/exec.
	Shell func(req shipapi.ExecShellRequest) (int, any)
	// Unhealthy makes /health answer 503.
	Unhealthy atomic.Bool
	// Token, when set, is the only runtime token accepted; otherwise any non-empty one is.
	Token string
	// Fault, when set, is asked first for every request but /health and /meta: ok answers
	// the request with status and {"detail", "code"}.
	Fault func(r *http.Request) (status int, code, detail string, ok bool)
	// Block, when set, is called after reading a /shell/exec request, before answering it (a
	// test holds a call open).
	Block func(r *http.Request)

	// TermClosed counts terminal sessions that ended.
	TermClosed atomic.Int64
	Requests   atomic.Int64
	Server     *httptest.Server
}

// New starts a stub server; it is closed when the test ends (t.Cleanup by the caller, or
// Close).
func New() *Stub {
	s := &Stub{files: map[string][]byte{}}
	s.Server = httptest.NewServer(s)
	return s
}

// URL is the stub's base URL (the endpoint a fake driver should report).
func (s *Stub) URL() string { return s.Server.URL }

// Close stops the server.
func (s *Stub) Close() { s.Server.Close() }

// File returns a stored file.
func (s *Stub) File(p string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.files[p]
	return b, ok
}

// SetFile stores a file.
func (s *Stub) SetFile(p string, b []byte) {
	s.mu.Lock()
	s.files[p] = b
	s.mu.Unlock()
}

func fail(w http.ResponseWriter, status int, code, detail string) {
	writeJSON(w, status, shipapi.ErrorResponse{Detail: detail, Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func decode(r *http.Request, v any) bool { return json.NewDecoder(r.Body).Decode(v) == nil }

func (s *Stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.Requests.Add(1)
	if r.URL.Path != shipapi.PathHealth && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ship"`)
		fail(w, http.StatusUnauthorized, shipapi.CodeUnauthorized, "Missing or wrong runtime token")
		return
	}
	if s.Fault != nil && r.URL.Path != shipapi.PathHealth && r.URL.Path != shipapi.PathMeta {
		if status, code, detail, ok := s.Fault(r); ok {
			fail(w, status, code, detail)
			return
		}
	}
	switch r.URL.Path {
	case shipapi.PathTerminal:
		s.terminal(w, r)
	case shipapi.PathHealth:
		if s.Unhealthy.Load() {
			fail(w, 503, shipapi.CodeInternal, "starting")
			return
		}
		writeJSON(w, 200, shipapi.HealthResponse{Status: "healthy", Version: "stub"})
	case shipapi.PathMeta:
		caps := map[string]shipapi.Capability{}
		for _, c := range []string{"filesystem", "shell", "python", "terminal"} {
			caps[c] = shipapi.Capability{Operations: []string{"x"}, Endpoints: map[string]string{}}
		}
		writeJSON(w, 200, shipapi.MetaResponse{Runtime: shipapi.MetaRuntime{Name: "ship", Version: "stub", APIVersion: "v1"},
			Workspace: shipapi.MetaWorkspace{MountPath: "/workspace"}, Capabilities: caps})
	case shipapi.PathPythonExec:
		var req shipapi.ExecPythonRequest
		if !decode(r, &req) {
			fail(w, 400, shipapi.CodeBadRequest, "bad body")
			return
		}
		if s.Python != nil {
			st, v := s.Python(req)
			writeJSON(w, st, v)
			return
		}
		n := 1
		writeJSON(w, 200, shipapi.ExecPythonResponse{Success: true, ExecutionCount: &n, Output: shipapi.PythonOutput{Text: req.Code, Images: []map[string]string{}}})
	case shipapi.PathShellExec:
		var req shipapi.ExecShellRequest
		if !decode(r, &req) {
			fail(w, 400, shipapi.CodeBadRequest, "bad body")
			return
		}
		if s.Block != nil {
			s.Block(r)
		}
		if s.Shell != nil {
			st, v := s.Shell(req)
			writeJSON(w, st, v)
			return
		}
		out := req.Command
		if req.Cwd != nil {
			out += " @" + *req.Cwd
		}
		writeJSON(w, 200, shipapi.ExecShellResponse{Success: true, Stdout: out + "\n", Stderr: "warn\n"})
	case shipapi.PathFSRead:
		var req shipapi.ReadFileRequest
		decode(r, &req)
		if strings.HasPrefix(req.Path, "escape") {
			fail(w, 403, shipapi.CodeAccessDenied, "Access denied: path must be within workspace /workspace")
			return
		}
		b, ok := s.File(req.Path)
		if !ok {
			fail(w, 404, shipapi.CodeNotFound, "File not found: /workspace/"+req.Path)
			return
		}
		writeJSON(w, 200, shipapi.ReadFileResponse{Content: string(b), Path: "/workspace/" + req.Path, Size: int64(len(b))})
	case shipapi.PathFSWrite:
		var req shipapi.WriteFileRequest
		decode(r, &req)
		s.SetFile(req.Path, []byte(req.Content))
		writeJSON(w, 200, shipapi.WriteFileResponse{Success: true, Path: "/workspace/" + req.Path, Size: int64(len(req.Content))})
	case shipapi.PathFSDelete:
		var req shipapi.DeleteFileRequest
		decode(r, &req)
		s.mu.Lock()
		_, ok := s.files[req.Path]
		delete(s.files, req.Path)
		s.mu.Unlock()
		if !ok {
			fail(w, 404, shipapi.CodeNotFound, "Path not found: /workspace/"+req.Path)
			return
		}
		writeJSON(w, 200, shipapi.DeleteFileResponse{Success: true})
	case shipapi.PathFSList:
		var req shipapi.ListDirRequest
		decode(r, &req)
		s.mu.Lock()
		var names []string
		for p := range s.files {
			names = append(names, p)
		}
		s.mu.Unlock()
		sort.Strings(names)
		files := []shipapi.FileInfo{}
		for _, n := range names {
			size := int64(0)
			files = append(files, shipapi.FileInfo{Name: n, Path: "/workspace/" + n, IsFile: true, Size: &size})
		}
		writeJSON(w, 200, shipapi.ListDirResponse{Files: files, CurrentPath: "/workspace/" + req.Path})
	case shipapi.PathFSUpload:
		mr, err := r.MultipartReader()
		if err != nil {
			fail(w, 400, shipapi.CodeBadRequest, "not multipart")
			return
		}
		var path string
		for {
			part, err := mr.NextPart()
			if err != nil {
				break
			}
			switch part.FormName() {
			case shipapi.UploadPathField:
				b, _ := io.ReadAll(part)
				path = string(b)
			case shipapi.UploadFileField:
				if path == "" {
					fail(w, 400, shipapi.CodeBadRequest, "file_path must come first")
					return
				}
				b, err := io.ReadAll(part)
				if err != nil {
					fail(w, 400, shipapi.CodeBadRequest, "read")
					return
				}
				s.SetFile(path, b)
				writeJSON(w, 200, shipapi.UploadResponse{Success: true, FilePath: "/workspace/" + path, Size: int64(len(b))})
				return
			}
		}
		fail(w, 400, shipapi.CodeBadRequest, "no file")
	case shipapi.PathFSDownload:
		p := r.URL.Query().Get(shipapi.DownloadPathParam)
		b, ok := s.File(p)
		if !ok {
			fail(w, 404, shipapi.CodeNotFound, "File not found")
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(b)
	default:
		fail(w, 404, shipapi.CodeNotFound, "no route")
	}
}

// authorized reports whether the request carries the runtime token as ship accepts it: a
// Bearer token or the password of Basic credentials.
func (s *Stub) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		_, tok, _ = r.BasicAuth()
	}
	if s.Token != "" {
		return tok == s.Token
	}
	return tok != ""
}

// terminal is an echo terminal: every message comes back prefixed with "cols x rows: " of the
// query; it ends when the peer closes.
func (s *Stub) terminal(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer s.TermClosed.Add(1)
	defer c.CloseNow()
	prefix := r.URL.Query().Get("cols") + "x" + r.URL.Query().Get("rows") + ": "
	for {
		typ, b, err := c.Read(r.Context())
		if err != nil {
			return
		}
		if n, ok := strings.CutPrefix(string(b), "exit "); ok {
			// Like ship when the shell exits: a normal closure naming its status.
			c.Close(websocket.StatusNormalClosure, shipapi.TerminalExitReason+strings.TrimSpace(n))
			return
		}
		if err := c.Write(r.Context(), typ, append([]byte(prefix), b...)); err != nil {
			return
		}
	}
}
