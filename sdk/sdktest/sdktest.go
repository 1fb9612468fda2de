// Package sdktest is an in-memory fake of bay's public HTTP API v1 for testing clients (the Go
// SDK, the shipyard CLI, the MCP server). It speaks the contract's wire format — the error
// envelope, idempotency replay/conflict, path validation, 204 deletes, multipart upload,
// streamed download, the terminal WebSocket, browser exec and batches — and is scriptable:
// failures can be injected per route (HTTP errors, non-JSON bodies, dropped connections),
// calls are recorded and counted, and python/shell/browser behaviour can be replaced. It is
// not bay: no containers and no browser run.
package sdktest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
)

// Call is one recorded request.
type Call struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
}

// Fault is an injected failure for the next Times requests matching Method and Path (an
// exact request path, or a prefix ending in "*").
type Fault struct {
	Method string
	Path   string
	Times  int
	// Status and Code produce the error envelope (Details optional).
	Status  int
	Code    string
	Message string
	Details map[string]any
	// Raw, when set, is sent verbatim as a text/plain body instead of the envelope.
	Raw string
	// Drop closes the connection without an answer (a transport error for the client).
	Drop bool
}

// ShellResult is what ShellFunc returns.
type ShellResult struct {
	Stdout, Stderr                   string
	ExitCode                         int
	StdoutTruncated, StderrTruncated bool
}

type file struct {
	data []byte
	size int64
	gen  bool // content is Pattern(size)
	sum  string
}

type sandbox struct {
	resp    bayapi.SandboxResponse
	files   map[string]*file
	history []bayapi.ExecutionHistoryEntry
	deleted bool
}

type idemRecord struct {
	fingerprint string
	status      int
	body        []byte
}

// Server is the fake bay. Create it with New and Close it when done.
type Server struct {
	*httptest.Server

	mu             sync.Mutex
	token          string
	pythonFunc     func(code string) bayapi.PythonExecResponse
	shellFunc      func(command, cwd string) ShellResult
	browserFunc    func(sandboxID, cmd string) BrowserResult
	uploadProgress func(received int64)

	sandboxes map[string]*sandbox
	order     []string
	cargos    map[string]*bayapi.CargoResponse
	idem      map[string]idemRecord
	reuse     map[string]string // sandbox id by reuse key
	calls     []Call
	faults    []*Fault
	termSizes [][2]int
	seq       int
}

// New starts a fake bay on a loopback port.
func New() *Server {
	s := &Server{
		sandboxes: map[string]*sandbox{},
		cargos:    map[string]*bayapi.CargoResponse{},
		idem:      map[string]idemRecord{},
		reuse:     map[string]string{},
	}
	s.Server = httptest.NewServer(s.handler())
	return s
}

// SetToken makes token the only accepted API key ("Authorization: Bearer <token>"); "" (the
// default) accepts every request.
func (s *Server) SetToken(token string) { s.mu.Lock(); s.token = token; s.mu.Unlock() }

// SetPythonFunc replaces the default python behaviour (see defaultPython); nil restores it.
func (s *Server) SetPythonFunc(f func(code string) bayapi.PythonExecResponse) {
	s.mu.Lock()
	s.pythonFunc = f
	s.mu.Unlock()
}

// SetShellFunc replaces the default shell behaviour (see defaultShell); nil restores it.
func (s *Server) SetShellFunc(f func(command, cwd string) ShellResult) {
	s.mu.Lock()
	s.shellFunc = f
	s.mu.Unlock()
}

// SetBrowserFunc replaces the default browser behaviour (see Server.defaultBrowser) for every
// browser command, of exec and of batches; nil restores it. f may store files with PutFile.
func (s *Server) SetBrowserFunc(f func(sandboxID, cmd string) BrowserResult) {
	s.mu.Lock()
	s.browserFunc = f
	s.mu.Unlock()
}

// SetUploadProgress sets a function called after every chunk an upload handler reads, with
// the number of file bytes received so far.
func (s *Server) SetUploadProgress(f func(received int64)) {
	s.mu.Lock()
	s.uploadProgress = f
	s.mu.Unlock()
}

// Endpoint is the base URL of the fake.
func (s *Server) Endpoint() string { return s.URL }

// Fail injects a failure.
func (s *Server) Fail(f Fault) {
	if f.Times == 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// Calls returns the recorded requests matching method and path ("" matches any; a path
// ending in "*" is a prefix).
func (s *Server) Calls(method, p string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if match(method, p, c.Method, c.Path) {
			out = append(out, c)
		}
	}
	return out
}

// Count is len(Calls(method, path)).
func (s *Server) Count(method, p string) int { return len(s.Calls(method, p)) }

// ResetCalls forgets the recorded calls.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// TerminalSizes returns the sizes the terminal endpoint saw: the initial cols/rows query,
// then every resize message.
func (s *Server) TerminalSizes() [][2]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][2]int(nil), s.termSizes...)
}

func match(fm, fp, m, p string) bool {
	if fm != "" && fm != m {
		return false
	}
	if fp == "" {
		return true
	}
	if strings.HasSuffix(fp, "*") {
		return strings.HasPrefix(p, strings.TrimSuffix(fp, "*"))
	}
	return fp == p
}

func (s *Server) newID(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// AddSandbox creates a sandbox directly (no request recorded) and returns its id.
func (s *Server) AddSandbox(profile string, ttl int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addSandboxLocked(profile, "", ttl).resp.ID
}

// PutFile stores a workspace file of a sandbox.
func (s *Server) PutFile(sandboxID, p string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.sandboxes[sandboxID]; sb != nil {
		sb.files[p] = &file{data: data, size: int64(len(data))}
	}
}

// PutGeneratedFile stores a file whose content is Pattern(size), generated when downloaded.
func (s *Server) PutGeneratedFile(sandboxID, p string, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.sandboxes[sandboxID]; sb != nil {
		sb.files[p] = &file{size: size, gen: true}
	}
}

// File returns a stored file: its bytes (nil for large uploads, which are only hashed), its
// size and its hex sha256.
func (s *Server) File(sandboxID, p string) (data []byte, size int64, sum string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[sandboxID]
	if sb == nil {
		return nil, 0, "", false
	}
	f := sb.files[p]
	if f == nil {
		return nil, 0, "", false
	}
	sum = f.sum
	if sum == "" && !f.gen {
		h := sha256.Sum256(f.data)
		sum = hex.EncodeToString(h[:])
	}
	return f.data, f.size, sum, true
}

// Sandbox returns the current state of a sandbox.
func (s *Server) Sandbox(id string) (bayapi.SandboxResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[id]
	if sb == nil || sb.deleted {
		return bayapi.SandboxResponse{}, false
	}
	return sb.resp, true
}

// Pattern returns a reader of size deterministic bytes (byte i = (i*31 + i>>9) mod 251).
func Pattern(size int64) io.Reader { return &patternReader{n: size} }

type patternReader struct{ off, n int64 }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	if rem := p.n - p.off; int64(len(b)) > rem {
		b = b[:rem]
	}
	for i := range b {
		x := p.off + int64(i)
		b[i] = byte((x*31 + x>>9) % 251)
	}
	p.off += int64(len(b))
	return len(b), nil
}

// ---- HTTP ----

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+bayapi.PathHealth, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, bayapi.HealthResponse{Status: "ok", Version: "fake"})
	})
	mux.HandleFunc("GET "+bayapi.PathProfiles, s.profiles)
	mux.HandleFunc("POST "+bayapi.PathSandboxes, s.auth(s.createSandbox))
	mux.HandleFunc("GET "+bayapi.PathSandboxes, s.auth(s.listSandboxes))
	mux.HandleFunc("GET "+bayapi.PathSandbox, s.auth(s.withSandbox(s.getSandbox)))
	mux.HandleFunc("DELETE "+bayapi.PathSandbox, s.auth(s.deleteSandbox))
	mux.HandleFunc("POST "+bayapi.PathExtendTTL, s.auth(s.withSandbox(s.extendTTL)))
	mux.HandleFunc("POST "+bayapi.PathKeepalive, s.auth(s.withSandbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		writeJSON(w, 200, bayapi.StatusResponse{Status: "ok"})
	})))
	mux.HandleFunc("POST "+bayapi.PathStop, s.auth(s.withSandbox(func(w http.ResponseWriter, r *http.Request, sb *sandbox) {
		s.mu.Lock()
		if sb.resp.Status == bayapi.StatusReady {
			sb.resp.Status = bayapi.StatusIdle
		}
		s.mu.Unlock()
		writeJSON(w, 200, bayapi.StatusResponse{Status: "stopped"})
	})))
	mux.HandleFunc("POST "+bayapi.PathPythonExec, s.auth(s.withSandbox(s.python)))
	mux.HandleFunc("POST "+bayapi.PathShellExec, s.auth(s.withSandbox(s.shell)))
	mux.HandleFunc("POST "+bayapi.PathBrowserExec, s.auth(s.withSandbox(s.browserExec)))
	mux.HandleFunc("POST "+bayapi.PathBrowserBatch, s.auth(s.withSandbox(s.browserBatch)))
	mux.HandleFunc("GET "+bayapi.PathFiles, s.auth(s.withSandbox(s.readFile)))
	mux.HandleFunc("PUT "+bayapi.PathFiles, s.auth(s.withSandbox(s.writeFile)))
	mux.HandleFunc("DELETE "+bayapi.PathFiles, s.auth(s.withSandbox(s.deleteFile)))
	mux.HandleFunc("GET "+bayapi.PathDirectories, s.auth(s.withSandbox(s.listDir)))
	mux.HandleFunc("POST "+bayapi.PathUpload, s.auth(s.withSandbox(s.upload)))
	mux.HandleFunc("GET "+bayapi.PathDownload, s.auth(s.withSandbox(s.download)))
	mux.HandleFunc("GET "+bayapi.PathTerminal, s.auth(s.withSandbox(s.terminal)))
	mux.HandleFunc("GET "+bayapi.PathHistory, s.auth(s.withSandbox(s.listHistory)))
	mux.HandleFunc("GET "+bayapi.PathHistoryLast, s.auth(s.withSandbox(s.lastHistory)))
	mux.HandleFunc("GET "+bayapi.PathHistoryEntry, s.auth(s.withSandbox(s.getHistory)))
	mux.HandleFunc("PATCH "+bayapi.PathHistoryEntry, s.auth(s.withSandbox(s.patchHistory)))
	mux.HandleFunc("POST "+bayapi.PathCargos, s.auth(s.createCargo))
	mux.HandleFunc("GET "+bayapi.PathCargos, s.auth(s.listCargos))
	mux.HandleFunc("GET "+bayapi.PathCargo, s.auth(s.getCargo))
	mux.HandleFunc("DELETE "+bayapi.PathCargo, s.auth(s.deleteCargo))
	mux.HandleFunc("POST "+bayapi.PathGCRun, s.auth(s.gcRun))
	mux.HandleFunc("GET "+bayapi.PathGCStatus, s.auth(s.gcStatus))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rid := r.Header.Get(bayapi.HeaderRequestID)
		if rid == "" {
			rid = s.newID("req-")
		}
		r.Header.Set(bayapi.HeaderRequestID, rid)
		w.Header().Set(bayapi.HeaderRequestID, rid)
		s.mu.Lock()
		s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone()})
		var fault *Fault
		for _, f := range s.faults {
			if f.Times > 0 && match(f.Method, f.Path, r.Method, r.URL.Path) {
				f.Times--
				fault = f
				break
			}
		}
		s.mu.Unlock()
		if fault != nil {
			s.serveFault(w, r, fault)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) serveFault(w http.ResponseWriter, r *http.Request, f *Fault) {
	switch {
	case f.Drop:
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	case f.Raw != "":
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(f.Status)
		io.WriteString(w, f.Raw)
	default:
		msg := f.Message
		if msg == "" {
			msg = "injected " + f.Code
		}
		writeErr(w, r, f.Status, f.Code, msg, f.Details)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func writeErr(w http.ResponseWriter, r *http.Request, status int, code, msg string, details map[string]any) {
	writeJSON(w, status, bayapi.ErrorEnvelope{Error: bayapi.ErrorBody{Code: code, Message: msg,
		RequestID: r.Header.Get(bayapi.HeaderRequestID), Details: details}})
}

func write422(w http.ResponseWriter, r *http.Request, loc []any, msg string) {
	writeJSON(w, 422, bayapi.ErrorEnvelope{
		Error:  bayapi.ErrorBody{Code: bayapi.CodeValidation, Message: msg, RequestID: r.Header.Get(bayapi.HeaderRequestID)},
		Detail: []bayapi.ValidationIssue{{Type: "value_error", Loc: loc, Msg: msg}},
	})
}

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		token := s.token
		s.mu.Unlock()
		if token != "" {
			a := r.Header.Get(bayapi.HeaderAuthorization)
			if !strings.HasPrefix(a, bayapi.BearerPrefix) {
				writeErr(w, r, 401, bayapi.CodeUnauthorized, "Authentication required", nil)
				return
			}
			if strings.TrimPrefix(a, bayapi.BearerPrefix) != token {
				writeErr(w, r, 401, bayapi.CodeUnauthorized, "Invalid API key", nil)
				return
			}
		}
		h(w, r)
	}
}

func (s *Server) withSandbox(h func(http.ResponseWriter, *http.Request, *sandbox)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("sandbox_id")
		s.mu.Lock()
		sb := s.sandboxes[id]
		s.mu.Unlock()
		if sb == nil || sb.deleted {
			writeErr(w, r, 404, bayapi.CodeNotFound, "Sandbox not found: "+id, nil)
			return
		}
		h(w, r, sb)
	}
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	b, _ := io.ReadAll(r.Body)
	if len(bytes.TrimSpace(b)) == 0 {
		write422(w, r, []any{"body"}, "Field required")
		return false
	}
	if err := json.Unmarshal(b, v); err != nil {
		write422(w, r, []any{"body"}, "JSON decode error: "+err.Error())
		return false
	}
	return true
}

var idemKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// idempotent wraps a create/extend: replays or 409s on a known key; saves successes.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, canonical any, run func() (int, any, bool)) {
	key := r.Header.Get(bayapi.HeaderIdempotencyKey)
	cb, _ := json.Marshal(canonical)
	fp := r.Method + ":" + r.URL.Path + ":" + string(cb)
	if key != "" {
		if !idemKeyRE.MatchString(key) {
			writeErr(w, r, 409, bayapi.CodeConflict, "Invalid Idempotency-Key format: must be 1-128 alphanumeric characters, dash, or underscore", map[string]any{"key": key})
			return
		}
		s.mu.Lock()
		rec, ok := s.idem[key]
		s.mu.Unlock()
		if ok {
			if rec.fingerprint != fp {
				writeErr(w, r, 409, bayapi.CodeConflict, "Idempotency key already used with different request parameters",
					map[string]any{"key": key, "hint": "Use a different Idempotency-Key for different request parameters"})
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rec.status)
			w.Write(rec.body)
			return
		}
	}
	status, v, ok := run()
	if !ok {
		return
	}
	b, _ := json.Marshal(v)
	if key != "" {
		s.mu.Lock()
		s.idem[key] = idemRecord{fingerprint: fp, status: status, body: b}
		s.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

var profiles = []bayapi.ProfileResponse{
	{ID: "python-default", Image: "ship:base", Resources: bayapi.Resources{CPUs: 1, Memory: "1g"},
		Capabilities: []string{"filesystem", "shell", "python", "terminal"}, IdleTimeout: 1800},
	{ID: "browser-python", Image: "ship:base", Resources: bayapi.Resources{CPUs: 1, Memory: "2g"},
		Capabilities: []string{"filesystem", "shell", "python", "browser"}, IdleTimeout: 1800},
	{ID: "shell-only", Image: "ship:base", Resources: bayapi.Resources{CPUs: 0.5, Memory: "512m"},
		Capabilities: []string{"filesystem", "shell"}, IdleTimeout: 600},
}

func (s *Server) profiles(w http.ResponseWriter, r *http.Request) {
	out := bayapi.ProfileList{Items: []bayapi.ProfileResponse{}}
	for _, p := range profiles {
		if r.URL.Query().Get("detail") == "true" {
			d := "fake profile " + p.ID
			p.Description = &d
			p.Containers = []bayapi.ProfileContainer{{Name: "primary", RuntimeType: "ship", Capabilities: p.Capabilities, Resources: p.Resources}}
			if slices.Contains(p.Capabilities, bayapi.CapBrowser) {
				ship := slices.DeleteFunc(slices.Clone(p.Capabilities), func(c string) bool { return c == bayapi.CapBrowser })
				p.Containers = []bayapi.ProfileContainer{
					{Name: "primary", RuntimeType: "ship", Capabilities: ship, Resources: p.Resources},
					{Name: "browser", RuntimeType: "gull", Capabilities: []string{bayapi.CapBrowser}, Resources: p.Resources},
				}
			}
		}
		out.Items = append(out.Items, p)
	}
	writeJSON(w, 200, out)
}

func profileByID(id string) (bayapi.ProfileResponse, bool) {
	for _, p := range profiles {
		if p.ID == id {
			return p, true
		}
	}
	return bayapi.ProfileResponse{}, false
}

func (s *Server) addSandboxLocked(profile, cargoID string, ttl int) *sandbox {
	p, _ := profileByID(profile)
	now := time.Now().UTC()
	id := s.newID("sandbox-")
	if cargoID == "" {
		cargoID = s.newID("ws-")
		mid := id
		s.cargos[cargoID] = &bayapi.CargoResponse{ID: cargoID, Managed: true, ManagedBySandboxID: &mid, Backend: "docker_volume",
			SizeLimitMB: 1024, CreatedAt: bayapi.NewTime(now), LastAccessedAt: bayapi.NewTime(now)}
	}
	sb := &sandbox{files: map[string]*file{}, resp: bayapi.SandboxResponse{
		ID: id, Status: bayapi.StatusIdle, Profile: profile, CargoID: cargoID,
		Capabilities: append([]string(nil), p.Capabilities...), CreatedAt: bayapi.NewTime(now),
	}}
	if ttl > 0 {
		e := bayapi.NewTime(now.Add(time.Duration(ttl) * time.Second))
		sb.resp.ExpiresAt = &e
	}
	s.sandboxes[id] = sb
	s.order = append(s.order, id)
	sort.Strings(s.order)
	return sb
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req bayapi.CreateSandboxRequest
	if !decodeBody(w, r, &req) {
		return
	}
	profile := bayapi.DefaultProfile
	if req.Profile != nil {
		profile = *req.Profile
	}
	canon := struct {
		Profile string            `json:"profile"`
		CargoID *string           `json:"cargo_id"`
		TTL     *bayapi.Int       `json:"ttl"`
		Reuse   *bayapi.ReuseSpec `json:"reuse"`
	}{profile, req.CargoID, req.TTL, req.Reuse}
	s.idempotent(w, r, canon, func() (int, any, bool) {
		if _, ok := profileByID(profile); !ok {
			writeErr(w, r, 400, bayapi.CodeValidation, "Invalid profile: "+profile, nil)
			return 0, nil, false
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		cargo := ""
		if req.CargoID != nil {
			c := s.cargos[*req.CargoID]
			if c == nil {
				writeErr(w, r, 404, bayapi.CodeNotFound, "Cargo not found: "+*req.CargoID, nil)
				return 0, nil, false
			}
			cargo = c.ID
		}
		ttl := 0
		if req.TTL != nil {
			ttl = int(*req.TTL)
		}
		if req.Reuse != nil {
			// The fake's reuse: the key's sandbox while it exists (no idle or hard TTL).
			if sb := s.sandboxes[s.reuse[req.Reuse.Key]]; sb != nil {
				w.Header().Set(bayapi.HeaderReused, "true")
				return 200, sb.resp, true
			}
			if req.TTL == nil && req.Reuse.HardTTL != nil {
				ttl = int(*req.Reuse.HardTTL)
			}
		}
		sb := s.addSandboxLocked(profile, cargo, ttl)
		if req.Reuse != nil {
			s.reuse[req.Reuse.Key] = sb.resp.ID
		}
		return 201, sb.resp, true
	})
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := bayapi.DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > bayapi.MaxListLimit {
			write422(w, r, []any{"query", "limit"}, "Input should be between 1 and 200")
			return
		}
		limit = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := bayapi.SandboxList{Items: []bayapi.SandboxResponse{}}
	cursor, status := q.Get("cursor"), q.Get("status")
	for _, id := range s.order {
		sb := s.sandboxes[id]
		if sb.deleted || id <= cursor || (status != "" && sb.resp.Status != status) {
			continue
		}
		if len(out.Items) == limit {
			last := out.Items[len(out.Items)-1].ID
			out.NextCursor = &last
			break
		}
		it := sb.resp
		it.Containers = nil
		out.Items = append(out.Items, it)
	}
	writeJSON(w, 200, out)
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	s.mu.Lock()
	resp := sb.resp
	s.mu.Unlock()
	if resp.Status == bayapi.StatusReady {
		v, h := "fake", true
		resp.Containers = []bayapi.ContainerRuntime{{Name: "ship", RuntimeType: "ship", Status: "running", Version: &v, Capabilities: []string{}, Healthy: &h}}
	}
	writeJSON(w, 200, resp)
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("sandbox_id")
	s.mu.Lock()
	sb := s.sandboxes[id]
	if sb != nil {
		sb.deleted = true
	}
	s.mu.Unlock()
	if sb == nil {
		writeErr(w, r, 404, bayapi.CodeNotFound, "Sandbox not found: "+id, nil)
		return
	}
	w.WriteHeader(204)
}

func (s *Server) extendTTL(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req bayapi.ExtendTTLRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.ExtendBy == nil {
		write422(w, r, []any{"body", "extend_by"}, "Field required")
		return
	}
	s.idempotent(w, r, req, func() (int, any, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if *req.ExtendBy <= 0 {
			writeErr(w, r, 400, bayapi.CodeValidation, "extend_by must be a positive integer", nil)
			return 0, nil, false
		}
		if sb.resp.ExpiresAt == nil {
			writeErr(w, r, 409, bayapi.CodeSandboxTTLInfinite, "sandbox ttl is infinite, cannot extend ttl", map[string]any{"sandbox_id": sb.resp.ID})
			return 0, nil, false
		}
		now := time.Now().UTC()
		base := sb.resp.ExpiresAt.Time
		if base.Before(now) {
			writeErr(w, r, 409, bayapi.CodeSandboxExpired, "sandbox is expired, cannot extend ttl",
				map[string]any{"sandbox_id": sb.resp.ID, "expires_at": bayapi.FormatTime(base)})
			return 0, nil, false
		}
		e := bayapi.NewTime(base.Add(time.Duration(*req.ExtendBy) * time.Second))
		sb.resp.ExpiresAt = &e
		resp := sb.resp
		resp.Containers = nil
		return 200, resp, true
	})
}

// validatePath applies bay's path rules: not empty, no NUL, relative, and never above the
// workspace after resolving "..".
func validatePath(w http.ResponseWriter, r *http.Request, field, p string) (string, bool) {
	fail := func(reason, msg string) (string, bool) {
		writeErr(w, r, 400, bayapi.CodeInvalidPath, msg, map[string]any{"field": field, "reason": reason})
		return "", false
	}
	switch {
	case p == "":
		return fail("empty_path", field+" cannot be empty")
	case strings.ContainsRune(p, 0):
		return fail("null_byte", field+" contains invalid characters")
	case strings.HasPrefix(p, "/"):
		return fail("absolute_path", field+" must be a relative path")
	}
	var stack []string
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(stack) == 0 {
				return fail("path_traversal", field+" escapes workspace boundary")
			}
			stack = stack[:len(stack)-1]
		default:
			stack = append(stack, c)
		}
	}
	if len(stack) == 0 {
		return ".", true
	}
	return strings.Join(stack, "/"), true
}

func (s *Server) checkCap(w http.ResponseWriter, r *http.Request, sb *sandbox, capability string) bool {
	for _, c := range sb.resp.Capabilities {
		if c == capability {
			return true
		}
	}
	writeErr(w, r, 400, bayapi.CodeCapabilityNotSupported,
		fmt.Sprintf("Profile '%s' does not support capability: %s", sb.resp.Profile, capability),
		map[string]any{"capability": capability, "available": sb.resp.Capabilities})
	return false
}

func checkTimeout(w http.ResponseWriter, r *http.Request, t *bayapi.Int) (int, bool) {
	if t == nil {
		return bayapi.DefaultExecTimeout, true
	}
	if *t < 1 || *t > bayapi.MaxExecTimeout {
		write422(w, r, []any{"body", "timeout"}, "Input should be between 1 and 300")
		return 0, false
	}
	return int(*t), true
}

// tinyPNG is a 1x1 PNG returned by the default python behaviour for code mentioning "plot".
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// defaultPython: code containing "raise" fails with a traceback; `print("x")` outputs x;
// code mentioning "plot" also returns a PNG image; "big:N" outputs N characters.
func defaultPython(code string) bayapi.PythonExecResponse {
	out := bayapi.PythonExecResponse{Success: true, Data: bayapi.PythonExecData{Output: shipapi.PythonOutput{Images: []map[string]string{}}}}
	one := 1
	out.Data.ExecutionCount = &one
	switch {
	case strings.Contains(code, "raise"):
		e := "Traceback (most recent call last):\n  File \"<cell>\", line 1\nValueError: boom"
		out.Success, out.Error = false, &e
	case strings.HasPrefix(code, "big:"):
		n, _ := strconv.Atoi(strings.TrimPrefix(code, "big:"))
		out.Output = strings.Repeat("x", n)
	default:
		if m := regexp.MustCompile(`print\((?:"|')(.*)(?:"|')\)`).FindAllStringSubmatch(code, -1); m != nil {
			var lines []string
			for _, x := range m {
				lines = append(lines, x[1])
			}
			out.Output = strings.Join(lines, "\n")
		}
	}
	if strings.Contains(code, "plot") {
		out.Data.Output.Images = append(out.Data.Output.Images, map[string]string{"image/png": tinyPNG})
	}
	out.Data.Output.Text = out.Output
	return out
}

var (
	echoRE = regexp.MustCompile(`echo ([^;&|]*)`)
	exitRE = regexp.MustCompile(`exit (\d+)`)
	errRE  = regexp.MustCompile(`>&2 ([^;&|]*)`)
)

// defaultShell: each `echo X` adds a stdout line X; `>&2 X` adds a stderr line; `exit N`
// sets the exit code.
func defaultShell(command, cwd string) ShellResult {
	var res ShellResult
	var outs, errs []string
	for _, m := range echoRE.FindAllStringSubmatch(command, -1) {
		outs = append(outs, strings.TrimSpace(m[1]))
	}
	for _, m := range errRE.FindAllStringSubmatch(command, -1) {
		errs = append(errs, strings.TrimSpace(m[1]))
	}
	if m := exitRE.FindStringSubmatch(command); m != nil {
		res.ExitCode, _ = strconv.Atoi(m[1])
	}
	if strings.TrimSpace(command) == "pwd" {
		outs = append(outs, path.Join("/workspace", cwd))
	}
	res.Stdout, res.Stderr = strings.Join(outs, "\n"), strings.Join(errs, "\n")
	return res
}

func (s *Server) record(sb *sandbox, execType, code string, success bool, output string, errStr *string, desc, tags *string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	id := fmt.Sprintf("exec-%012d", s.seq)
	o := output
	e := bayapi.ExecutionHistoryEntry{ID: id, ExecType: execType, Code: code, Success: success,
		ExecutionTimeMS: 3, Output: &o, Error: errStr, Description: desc, Tags: normTags(tags),
		CreatedAt: bayapi.NewTime(time.Now().Add(time.Duration(s.seq) * time.Microsecond))}
	if execType == bayapi.ExecBrowser || execType == bayapi.ExecBrowserBatch {
		// Browser rows take part in skill learning: "skipped" unless learn was asked for (see
		// keepTrace).
		skipped := "skipped"
		e.LearnStatus = &skipped
	}
	sb.history = append(sb.history, e)
	sb.resp.Status = bayapi.StatusReady
	return id
}

func normTags(t *string) *string {
	if t == nil {
		return nil
	}
	set := map[string]bool{}
	for _, x := range strings.Split(*t, ",") {
		if x = strings.TrimSpace(x); x != "" {
			set[x] = true
		}
	}
	if len(set) == 0 {
		return nil
	}
	var l []string
	for x := range set {
		l = append(l, x)
	}
	sort.Strings(l)
	v := strings.Join(l, ",")
	return &v
}

func (s *Server) python(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if !s.checkCap(w, r, sb, bayapi.CapPython) {
		return
	}
	var req bayapi.PythonExecRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Code == nil {
		write422(w, r, []any{"body", "code"}, "Field required")
		return
	}
	if _, ok := checkTimeout(w, r, req.Timeout); !ok {
		return
	}
	s.mu.Lock()
	f := s.pythonFunc
	s.mu.Unlock()
	if f == nil {
		f = defaultPython
	}
	res := f(*req.Code)
	res.ExecutionID = s.record(sb, bayapi.ExecPython, *req.Code, res.Success, res.Output, res.Error, req.Description, req.Tags)
	res.ExecutionTimeMS = 3
	if req.IncludeCode {
		res.Code = req.Code
	}
	writeJSON(w, 200, res)
}

func (s *Server) shell(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if !s.checkCap(w, r, sb, bayapi.CapShell) {
		return
	}
	var req bayapi.ShellExecRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Command == nil {
		write422(w, r, []any{"body", "command"}, "Field required")
		return
	}
	if _, ok := checkTimeout(w, r, req.Timeout); !ok {
		return
	}
	cwd := ""
	if req.Cwd != nil {
		c, ok := validatePath(w, r, "cwd", *req.Cwd)
		if !ok {
			return
		}
		cwd = c
	}
	s.mu.Lock()
	f := s.shellFunc
	s.mu.Unlock()
	if f == nil {
		f = defaultShell
	}
	res := f(*req.Command, cwd)
	out := bayapi.ShellExecResponse{Success: res.ExitCode == 0, Output: strings.TrimSpace(res.Stdout), ExitCode: res.ExitCode,
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated}
	if e := strings.TrimSpace(res.Stderr); e != "" {
		out.Error = &e
	}
	out.ExecutionID = s.record(sb, bayapi.ExecShell, *req.Command, out.Success, out.Output, out.Error, req.Description, req.Tags)
	out.ExecutionTimeMS = 2
	if req.IncludeCode {
		out.Command = req.Command
	}
	writeJSON(w, 200, out)
}

func (s *Server) queryPath(w http.ResponseWriter, r *http.Request, def string) (string, bool) {
	q := r.URL.Query()
	if !q.Has("path") {
		if def != "" {
			return def, true
		}
		write422(w, r, []any{"query", "path"}, "Field required")
		return "", false
	}
	return validatePath(w, r, "path", q.Get("path"))
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if !s.checkCap(w, r, sb, bayapi.CapFilesystem) {
		return
	}
	p, ok := s.queryPath(w, r, "")
	if !ok {
		return
	}
	s.mu.Lock()
	f := sb.files[p]
	s.mu.Unlock()
	if f == nil || f.gen || f.data == nil && f.size > 0 {
		writeErr(w, r, 404, bayapi.CodeFileNotFound, "File not found: "+p, nil)
		return
	}
	writeJSON(w, 200, bayapi.FileContentResponse{Content: string(f.data)})
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if !s.checkCap(w, r, sb, bayapi.CapFilesystem) {
		return
	}
	var req bayapi.WriteFileRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Path == nil || req.Content == nil {
		write422(w, r, []any{"body", "path"}, "Field required")
		return
	}
	p, ok := validatePath(w, r, "path", *req.Path)
	if !ok {
		return
	}
	s.mu.Lock()
	sb.files[p] = &file{data: []byte(*req.Content), size: int64(len(*req.Content))}
	s.mu.Unlock()
	writeJSON(w, 200, bayapi.StatusResponse{Status: "ok"})
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if !s.checkCap(w, r, sb, bayapi.CapFilesystem) {
		return
	}
	p, ok := s.queryPath(w, r, "")
	if !ok {
		return
	}
	if p == "." {
		writeErr(w, r, 400, bayapi.CodeInvalidPath, "path must not be the workspace root", map[string]any{"field": "path", "reason": "workspace_root"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	for k := range sb.files {
		if k == p || strings.HasPrefix(k, p+"/") {
			delete(sb.files, k)
			found = true
		}
	}
	if !found {
		writeErr(w, r, 404, bayapi.CodeFileNotFound, "File not found: "+p, nil)
		return
	}
	writeJSON(w, 200, bayapi.StatusResponse{Status: "ok"})
}

func (s *Server) listDir(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if !s.checkCap(w, r, sb, bayapi.CapFilesystem) {
		return
	}
	p, ok := s.queryPath(w, r, ".")
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prefix := ""
	if p != "." {
		prefix = p + "/"
	}
	dirs := map[string]bool{}
	files := map[string]int64{}
	for k, f := range sb.files {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		rest := strings.TrimPrefix(k, prefix)
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			dirs[rest[:i]] = true
		} else {
			files[rest] = f.size
		}
	}
	if p != "." && len(dirs) == 0 && len(files) == 0 {
		writeErr(w, r, 502, bayapi.CodeShipError, "Ship request failed: 404", nil)
		return
	}
	out := bayapi.DirectoryResponse{Entries: []shipapi.FileInfo{}}
	var dn, fn []string
	for d := range dirs {
		dn = append(dn, d)
	}
	for f := range files {
		fn = append(fn, f)
	}
	sort.Strings(dn)
	sort.Strings(fn)
	for _, d := range dn {
		out.Entries = append(out.Entries, shipapi.FileInfo{Name: d, Path: path.Join("/workspace", prefix, d), IsDir: true, ModifiedTime: 1772359200.5})
	}
	for _, f := range fn {
		sz := files[f]
		out.Entries = append(out.Entries, shipapi.FileInfo{Name: f, Path: path.Join("/workspace", prefix, f), IsFile: true, Size: &sz, ModifiedTime: 1772359201})
	}
	writeJSON(w, 200, out)
}

// maxStored is the largest upload kept in memory; bigger ones are only counted and hashed.
const maxStored = 8 << 20

type countingWriter struct {
	n        int64
	progress func(int64)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if c.progress != nil {
		c.progress(c.n)
	}
	return len(p), nil
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if !s.checkCap(w, r, sb, bayapi.CapFilesystem) {
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		write422(w, r, []any{"body"}, "multipart body expected: "+err.Error())
		return
	}
	var p string
	var stored *file
	havePath := false
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			writeErr(w, r, 400, bayapi.CodeValidation, "bad multipart body: "+err.Error(), nil)
			return
		}
		switch part.FormName() {
		case bayapi.UploadPathField:
			b, _ := io.ReadAll(io.LimitReader(part, 4096))
			np, ok := validatePath(w, r, "path", string(b))
			if !ok {
				return
			}
			p, havePath = np, true
		case bayapi.UploadFileField:
			h := sha256.New()
			s.mu.Lock()
			cw := &countingWriter{progress: s.uploadProgress}
			s.mu.Unlock()
			var buf bytes.Buffer
			lw := &limitedBuffer{b: &buf, max: maxStored}
			if _, err := io.Copy(io.MultiWriter(h, cw, lw), part); err != nil {
				writeErr(w, r, 400, bayapi.CodeValidation, "read upload: "+err.Error(), nil)
				return
			}
			stored = &file{size: cw.n, sum: hex.EncodeToString(h.Sum(nil))}
			if !lw.over {
				stored.data = buf.Bytes()
			}
		}
	}
	if stored == nil || !havePath {
		write422(w, r, []any{"body", "file"}, "Field required")
		return
	}
	s.mu.Lock()
	sb.files[p] = stored
	s.mu.Unlock()
	writeJSON(w, 200, bayapi.UploadResponse{Status: "ok", Path: p, Size: stored.size})
}

type limitedBuffer struct {
	b    *bytes.Buffer
	max  int
	over bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if !l.over {
		if l.b.Len()+len(p) > l.max {
			l.over = true
			l.b.Reset()
		} else {
			l.b.Write(p)
		}
	}
	return len(p), nil
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if !s.checkCap(w, r, sb, bayapi.CapFilesystem) {
		return
	}
	p, ok := s.queryPath(w, r, "")
	if !ok {
		return
	}
	s.mu.Lock()
	f := sb.files[p]
	s.mu.Unlock()
	if f == nil {
		writeErr(w, r, 404, bayapi.CodeFileNotFound, "File not found: "+p, nil)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, path.Base(p)))
	w.Header().Set("Content-Length", strconv.FormatInt(f.size, 10))
	w.WriteHeader(200)
	if f.gen {
		io.Copy(w, Pattern(f.size))
		return
	}
	w.Write(f.data)
}

func (s *Server) filterHistory(sb *sandbox, q url.Values) []bayapi.ExecutionHistoryEntry {
	var out []bayapi.ExecutionHistoryEntry
	for i := len(sb.history) - 1; i >= 0; i-- {
		e := sb.history[i]
		if t := q.Get("exec_type"); t != "" && e.ExecType != t {
			continue
		}
		if q.Get("success_only") == "true" && !e.Success {
			continue
		}
		if t := q.Get("tags"); t != "" {
			want := normTags(&t)
			hit := false
			if want != nil && e.Tags != nil {
				for _, x := range strings.Split(*want, ",") {
					if strings.Contains(strings.ToLower(*e.Tags), strings.ToLower(x)) {
						hit = true
					}
				}
			}
			if !hit {
				continue
			}
		}
		if q.Get("has_notes") == "true" && (e.Notes == nil || *e.Notes == "") {
			continue
		}
		if q.Get("has_description") == "true" && (e.Description == nil || *e.Description == "") {
			continue
		}
		out = append(out, e)
	}
	return out
}

var execTypeRE = regexp.MustCompile(`^(python|shell|browser|browser_batch)$`)

func (s *Server) listHistory(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	q := r.URL.Query()
	if t := q.Get("exec_type"); t != "" && !execTypeRE.MatchString(t) {
		write422(w, r, []any{"query", "exec_type"}, "String should match pattern '^(python|shell|browser|browser_batch)$'")
		return
	}
	limit, offset := bayapi.DefaultHistLimit, 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > bayapi.MaxHistLimit {
			write422(w, r, []any{"query", "limit"}, "Input should be between 1 and 500")
			return
		}
		limit = n
	}
	if v := q.Get("offset"); v != "" {
		offset, _ = strconv.Atoi(v)
	}
	s.mu.Lock()
	all := s.filterHistory(sb, q)
	s.mu.Unlock()
	out := bayapi.ExecutionHistoryList{Entries: []bayapi.ExecutionHistoryEntry{}, Total: len(all)}
	for i := offset; i < len(all) && i < offset+limit; i++ {
		out.Entries = append(out.Entries, all[i])
	}
	writeJSON(w, 200, out)
}

func (s *Server) lastHistory(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	s.mu.Lock()
	all := s.filterHistory(sb, url.Values{"exec_type": {r.URL.Query().Get("exec_type")}})
	s.mu.Unlock()
	if len(all) == 0 {
		writeErr(w, r, 404, bayapi.CodeNotFound, "No execution history found", nil)
		return
	}
	writeJSON(w, 200, all[0])
}

func (s *Server) findEntry(sb *sandbox, id string) *bayapi.ExecutionHistoryEntry {
	for i := range sb.history {
		if sb.history[i].ID == id {
			return &sb.history[i]
		}
	}
	return nil
}

func (s *Server) getHistory(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	id := r.PathValue("execution_id")
	s.mu.Lock()
	e := s.findEntry(sb, id)
	var v bayapi.ExecutionHistoryEntry
	if e != nil {
		v = *e
	}
	s.mu.Unlock()
	if e == nil {
		writeErr(w, r, 404, bayapi.CodeNotFound, "Execution not found: "+id, nil)
		return
	}
	writeJSON(w, 200, v)
}

func (s *Server) patchHistory(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	id := r.PathValue("execution_id")
	var req bayapi.AnnotateExecutionRequest
	if !decodeBody(w, r, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.findEntry(sb, id)
	if e == nil {
		writeErr(w, r, 404, bayapi.CodeNotFound, "Execution not found: "+id, nil)
		return
	}
	if req.Description != nil {
		e.Description = req.Description
	}
	if req.Tags != nil {
		e.Tags = normTags(req.Tags)
	}
	if req.Notes != nil {
		e.Notes = req.Notes
	}
	writeJSON(w, 200, *e)
}

func (s *Server) createCargo(w http.ResponseWriter, r *http.Request) {
	var req bayapi.CreateCargoRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.SizeLimitMB != nil && (*req.SizeLimitMB < 1 || *req.SizeLimitMB > 65536) {
		write422(w, r, []any{"body", "size_limit_mb"}, "Input should be between 1 and 65536")
		return
	}
	canon := struct {
		SizeLimitMB *bayapi.Int `json:"size_limit_mb"`
	}{req.SizeLimitMB}
	s.idempotent(w, r, canon, func() (int, any, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		now := bayapi.NewTime(time.Now())
		size := 1024
		if req.SizeLimitMB != nil {
			size = int(*req.SizeLimitMB)
		}
		c := &bayapi.CargoResponse{ID: s.newID("ws-"), Backend: "docker_volume", SizeLimitMB: size, CreatedAt: now, LastAccessedAt: now}
		s.cargos[c.ID] = c
		return 201, *c, true
	})
}

func (s *Server) listCargos(w http.ResponseWriter, r *http.Request) {
	managed := r.URL.Query().Get("managed") == "true"
	s.mu.Lock()
	defer s.mu.Unlock()
	out := bayapi.CargoList{Items: []bayapi.CargoResponse{}}
	var ids []string
	for id, c := range s.cargos {
		if c.Managed == managed {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		out.Items = append(out.Items, *s.cargos[id])
	}
	writeJSON(w, 200, out)
}

func (s *Server) getCargo(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("cargo_id")
	s.mu.Lock()
	c := s.cargos[id]
	s.mu.Unlock()
	if c == nil {
		writeErr(w, r, 404, bayapi.CodeNotFound, "Cargo not found: "+id, nil)
		return
	}
	writeJSON(w, 200, *c)
}

func (s *Server) deleteCargo(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("cargo_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cargos[id]
	if c == nil {
		writeErr(w, r, 404, bayapi.CodeNotFound, "Cargo not found: "+id, nil)
		return
	}
	var users []string
	for _, sbid := range s.order {
		if sb := s.sandboxes[sbid]; !sb.deleted && sb.resp.CargoID == id {
			users = append(users, sbid)
		}
	}
	if len(users) > 0 {
		writeErr(w, r, 409, bayapi.CodeConflict, fmt.Sprintf("Cannot delete cargo %s: still referenced by active sandboxes", id),
			map[string]any{"active_sandbox_ids": users})
		return
	}
	delete(s.cargos, id)
	w.WriteHeader(204)
}

func (s *Server) gcRun(w http.ResponseWriter, r *http.Request) {
	var req bayapi.GCRunRequest
	if b, _ := io.ReadAll(r.Body); len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &req); err != nil {
			write422(w, r, []any{"body"}, "JSON decode error")
			return
		}
	}
	tasks := req.Tasks
	if tasks == nil {
		tasks = []string{bayapi.GCIdleSession, bayapi.GCExpiredSandbox, bayapi.GCOrphanCargo}
	}
	out := bayapi.GCRunResponse{Results: []bayapi.GCTaskResult{}, DurationMS: 1}
	for _, t := range tasks {
		out.Results = append(out.Results, bayapi.GCTaskResult{TaskName: t, Errors: []string{}})
	}
	writeJSON(w, 200, out)
}

func (s *Server) gcStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, bayapi.GCStatusResponse{Enabled: true, InstanceID: "fake", IntervalSeconds: 300,
		Tasks: map[string]bayapi.GCTaskStatus{bayapi.GCIdleSession: {Enabled: true}, bayapi.GCExpiredSandbox: {Enabled: true},
			bayapi.GCOrphanCargo: {Enabled: true}, bayapi.GCOrphanContainer: {Enabled: false}}})
}
