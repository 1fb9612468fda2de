// Package httpapi is ship's thin HTTP layer: decode and validate, call the
// workspace, kernel or shell, encode. It holds the one table that maps error
// codes (shipapi.Code*) onto HTTP statuses; causes go to the log, never to the
// client.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/runtimekit"
	"github.com/shipyard-dev/shipyard/internal/ship/apierr"
	"github.com/shipyard-dev/shipyard/internal/ship/jobs"
	"github.com/shipyard-dev/shipyard/internal/ship/shell"
	"github.com/shipyard-dev/shipyard/internal/ship/workspace"
)

// Kernel is what the API needs from the Python kernel manager.
type Kernel interface {
	Exec(ctx context.Context, code string, timeout time.Duration, silent bool) (shipapi.ExecPythonResponse, error)
	Status() shipapi.KernelStatusResponse
	Restart(ctx context.Context) error
	KernelPID() int
}

// Server holds the dependencies of the handlers.
type Server struct {
	Workspace      *workspace.Workspace
	Kernel         Kernel
	Shell          *shell.Runner
	Jobs           *jobs.Manager // nil: no jobs API
	Terminal       http.Handler
	Meta           shipapi.MetaResponse
	Version        string
	MaxUploadBytes int64
	// MaxJSONBytes bounds JSON request bodies (write_file content included).
	MaxJSONBytes int64
	// MaxReadBytes bounds the text one read_file returns (file_too_large above:
	// download instead); default workspace.MaxTextBytes. The text is streamed.
	MaxReadBytes int64
	// HeavyOps bounds how many heavy operations run at once (default 2): JSON
	// bodies over HeavyBytes (they are decoded in memory), edit_file (it loads
	// the file) and read_file answers over HeavyBytes. Others wait for a slot,
	// so ship's memory does not grow with the number of callers. A JSON body
	// over a quarter of MaxJSONBytes, or of unknown length, takes every slot:
	// decoding it costs about three times its size.
	HeavyOps   int
	HeavyBytes int64
	heavy      *semaphore.Weighted
	// DefaultPythonTimeout applies when a request has none.
	DefaultPythonTimeout time.Duration
	Log                  *slog.Logger
	Started              time.Time
	// AuthToken, when set, is required on every request but /health (see authenticate).
	AuthToken string
}

// Handler returns the routed handler with logging and panic recovery.
func (s *Server) Handler() http.Handler {
	if s.MaxJSONBytes == 0 {
		s.MaxJSONBytes = 128 << 20
	}
	if s.DefaultPythonTimeout == 0 {
		s.DefaultPythonTimeout = 30 * time.Second
	}
	if s.MaxReadBytes == 0 {
		s.MaxReadBytes = workspace.MaxTextBytes
	}
	if s.HeavyOps <= 0 {
		s.HeavyOps = 2
	}
	if s.HeavyBytes <= 0 {
		s.HeavyBytes = 1 << 20
	}
	s.heavy = semaphore.NewWeighted(int64(s.HeavyOps))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"message": "Ship API is running"})
	})
	mux.HandleFunc("GET "+shipapi.PathHealth, s.health)
	mux.HandleFunc("GET "+shipapi.PathStat, s.stat)
	mux.HandleFunc("GET "+shipapi.PathMeta, s.meta)

	mux.HandleFunc("POST "+shipapi.PathFSCreate, s.heavyBody(s.createFile))
	mux.HandleFunc("POST "+shipapi.PathFSRead, s.readFile)
	mux.HandleFunc("POST "+shipapi.PathFSWrite, s.heavyBody(s.writeFile))
	mux.HandleFunc("POST "+shipapi.PathFSEdit, s.heavyAlways(s.editFile))
	mux.HandleFunc("POST "+shipapi.PathFSDelete, s.deleteFile)
	mux.HandleFunc("POST "+shipapi.PathFSList, s.listDir)
	mux.HandleFunc("POST "+shipapi.PathFSUpload, s.upload)
	mux.HandleFunc("GET "+shipapi.PathFSDownload, s.download)

	mux.HandleFunc("POST "+shipapi.PathPythonExec, s.heavyBody(s.execPython))
	mux.HandleFunc("GET "+shipapi.PathKernelStatus, s.kernelStatus)
	mux.HandleFunc("POST "+shipapi.PathKernelRestart, s.kernelRestart)

	mux.HandleFunc("POST "+shipapi.PathShellExec, s.heavyBody(s.execShell))
	mux.HandleFunc("GET "+shipapi.PathShellProcs, s.listProcesses)
	mux.HandleFunc("GET "+shipapi.PathShellProcs+"/{id}", s.getProcess)
	mux.HandleFunc("POST "+shipapi.PathShellProcs+"/{id}"+shipapi.PathShellProcKillSuffix, s.killProcess)

	s.routeJobs(mux)

	if s.Terminal != nil {
		mux.Handle("GET "+shipapi.PathTerminal, s.Terminal)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, apierr.New(shipapi.CodeNotFound, "Not Found"))
	})
	return s.recoverer(s.authenticate(mux))
}

// authenticate requires AuthToken on every request but /health (bay's readiness probe), as a
// Bearer token or as the password of Basic credentials (what Go's client sends for a URL with
// user info). Without AuthToken it requires nothing.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return runtimekit.RequireToken(next, s.AuthToken, shipapi.PathHealth, `Bearer realm="ship"`, func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, apierr.New(shipapi.CodeUnauthorized, "Missing or wrong runtime token"))
	})
}

// acquireHeavy waits for n heavy-operation slots (see Server.HeavyOps).
func (s *Server) acquireHeavy(ctx context.Context, n int64) (release func(), err error) {
	n = min(n, int64(s.HeavyOps))
	if err := s.heavy.Acquire(ctx, n); err != nil {
		return nil, apierr.Wrap(shipapi.CodeInternal, err, "request cancelled while waiting for other large operations")
	}
	return func() { s.heavy.Release(n) }, nil
}

// heavyBody runs h in heavy-operation slots when the request body is over
// HeavyBytes or of unknown length: one slot, or all of them for a body over a
// quarter of MaxJSONBytes or of unknown length.
func (s *Server) heavyBody(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch n := r.ContentLength; {
		case n >= 0 && n <= s.HeavyBytes:
			h(w, r)
		case n >= 0 && n <= s.MaxJSONBytes/4:
			s.heavyN(1, h)(w, r)
		default:
			s.heavyN(int64(s.HeavyOps), h)(w, r)
		}
	}
}

// heavyAlways runs h in one heavy-operation slot.
func (s *Server) heavyAlways(h http.HandlerFunc) http.HandlerFunc { return s.heavyN(1, h) }

func (s *Server) heavyN(n int64, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		release, err := s.acquireHeavy(r.Context(), n)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		defer release()
		h(w, r)
	}
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := apierr.CodeOf(err)
	status := shipapi.StatusOf(code)
	if status >= 500 {
		s.Log.Error("request failed", "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
	} else {
		s.Log.Debug("request rejected", "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
	}
	writeJSON(w, status, shipapi.ErrorResponse{Detail: apierr.MessageOf(err), Code: code})
}

// reply writes out as a 200 JSON response, or err as an error response.
func (s *Server) reply(w http.ResponseWriter, r *http.Request, out any, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// statusRecorder remembers the status for the access log. It forwards
// Unwrap so http.ResponseController (and the WebSocket hijack) still work.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// ReadFrom keeps sendfile(2) for downloads.
func (s *statusRecorder) ReadFrom(r io.Reader) (int64, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return io.Copy(s.ResponseWriter, r)
}

func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.Log.Error("handler panic", "path", r.URL.Path, "panic", p)
				if rec.status == 0 {
					s.writeError(rec, r, apierr.New(shipapi.CodeInternal, "internal error"))
				}
			}
			s.Log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "took", time.Since(t0))
		}()
		next.ServeHTTP(rec, r)
	})
}

// decode reads a JSON body into v. A missing body, malformed JSON or a
// wrong type is a 400; an oversized body a 413.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, s.MaxJSONBytes)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var (
			mbe *http.MaxBytesError
			se  *json.SyntaxError
			te  *json.UnmarshalTypeError
		)
		switch {
		case errors.Is(err, io.EOF):
			return apierr.New(shipapi.CodeBadRequest, "request body must be a JSON object")
		case errors.As(err, &mbe):
			return apierr.Newf(shipapi.CodeTooLarge, "request body larger than %d bytes", s.MaxJSONBytes)
		case errors.As(err, &se):
			return apierr.Wrap(shipapi.CodeBadRequest, err, fmt.Sprintf("malformed JSON at byte %d", se.Offset))
		case errors.As(err, &te):
			field := te.Field
			if field == "" {
				return apierr.Wrap(shipapi.CodeBadRequest, err, "request body must be a JSON object")
			}
			return apierr.Wrap(shipapi.CodeBadRequest, err, fmt.Sprintf("field %q must be of type %s", field, te.Type))
		case errors.Is(err, io.ErrUnexpectedEOF):
			return apierr.Wrap(shipapi.CodeBadRequest, err, "malformed JSON: unexpected end of body")
		}
		return apierr.Wrap(shipapi.CodeBadRequest, err, "invalid JSON body")
	}
	if dec.More() {
		return apierr.New(shipapi.CodeBadRequest, "unexpected data after the JSON object")
	}
	return nil
}

func checkEncoding(enc string) error {
	switch strings.ToLower(strings.ReplaceAll(enc, "_", "-")) {
	case "", "utf-8", "utf8":
		return nil
	}
	return apierr.Newf(shipapi.CodeBadRequest, "unsupported encoding %q (only utf-8)", enc)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, shipapi.HealthResponse{Status: "healthy", Version: s.Version})
}

func (s *Server) stat(w http.ResponseWriter, r *http.Request) {
	resp := shipapi.StatResponse{
		Service: "ship", Version: s.Version, Status: "running", Author: "Shipyard",
		UptimeSeconds: time.Since(s.Started).Seconds(),
		RSSBytes:      RSS(os.Getpid()),
	}
	if s.Kernel != nil {
		if pid := s.Kernel.KernelPID(); pid > 0 {
			resp.KernelRSS = RSS(pid)
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// RSS reads VmRSS of a process from /proc, in bytes (0 if unknown).
func RSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

func (s *Server) meta(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Meta)
}

// Capabilities is the capabilities block of /meta, as in the contract.
func Capabilities() map[string]shipapi.Capability {
	return map[string]shipapi.Capability{
		"filesystem": {
			Operations: []string{"create", "read", "write", "edit", "delete", "list", "upload", "download"},
			PathMode:   "relative_to_mount",
			Endpoints: map[string]string{
				"create": shipapi.PathFSCreate, "read": shipapi.PathFSRead, "write": shipapi.PathFSWrite,
				"edit": shipapi.PathFSEdit, "delete": shipapi.PathFSDelete, "list": shipapi.PathFSList,
				"upload": shipapi.PathFSUpload, "download": shipapi.PathFSDownload,
			},
		},
		"shell": {
			Operations: []string{"exec", "processes"},
			Endpoints:  map[string]string{"exec": shipapi.PathShellExec, "processes": shipapi.PathShellProcs},
		},
		"python": {
			Operations: []string{"exec"},
			Engine:     "ipython",
			Endpoints:  map[string]string{"exec": shipapi.PathPythonExec},
		},
		"jobs": {
			Operations: []string{"start", "list", "get", "output", "cancel"},
			Endpoints:  map[string]string{"jobs": shipapi.PathJobs},
		},
		"terminal": {
			Operations: []string{"ws"},
			Protocol:   "websocket",
			Endpoints:  map[string]string{"ws": shipapi.PathTerminal},
		},
	}
}
