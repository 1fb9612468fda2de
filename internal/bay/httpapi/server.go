// Package httpapi is bay's HTTP API v1: a thin layer that decodes and validates requests,
// calls the services (lifecycle internal/bay/sandbox, capability, cargo, history) and renders
// the domain values they answer into the wire types of api/bayapi (render.go, the only place
// that does). Errors of every
// kind (domain errors, schema validation, unknown routes, wrong methods, panics) leave in the
// one envelope of api/bayapi with the request id; the code-to-status translation lives in
// statusOf (errors.go) and nowhere else. The routes are declared once (routes.go) and that
// table drives both the ServeMux and the OpenAPI document served at /openapi.json.
//
// Observable differences from the reference implementation, same status and code a
// client branches on unless noted:
//
//   - 422 schema errors carry the envelope {"error":{"code":"validation_error",...}} AND
//     FastAPI's "detail" list; 404 / 405 (code method_not_allowed) / 500 are enveloped too.
//   - An unknown ?status= of the sandbox list is a 422 (was ignored); pages are never short
//     while a cursor is returned.
//   - Idempotency-Key: an invalid key is 400 validation_error (was 409); keys are scoped to
//     owner + method + path; concurrent duplicates execute once; replays carry the header
//     Idempotent-Replayed: true.
//   - A missing file is 404 file_not_found on read, delete and download alike (was 502 except
//     download); a symlink escaping the workspace (ship 403) is 400 invalid_path with reason
//     outside_workspace (was 502); another ship 4xx the request caused is a 4xx with ship's
//     detail and code where bay has it (is_a_directory, not_a_directory, validation_error
//     otherwise); other ship errors are 502 ship_error with ship's detail and details
//     {ship_status, ship_code}.
//   - Every number, duration and text of a body or query is bounded (ttl and extend_by at
//     most 366 days; paths 4000 bytes, names 255): out of range is 422 (was accepted, and a
//     huge ttl made a sandbox born expired).
//   - Requests net/http refuses before routing (headers over 64 KiB: 431 headers_too_large; a
//     NUL in a header: 400) are answered in the envelope too (see WrapListener).
//   - A request its client cancelled is logged at info with status 499, not as an error.
//   - DELETE filesystem/files of the workspace root ("." or "a/..") is 400 invalid_path with
//     reason workspace_root (the reference wiped the workspace).
//   - Capability calls and keepalive on an expired sandbox are 409 sandbox_expired (the
//     reference kept expired sandboxes usable until GC); extend_ttl after the expiry GC
//     deleted the sandbox is still 409 sandbox_expired.
//   - Uploads are streamed end to end and bounded by cargo.max_upload_bytes (413
//     payload_too_large); the path field must precede the file part or be given as ?path=.
//   - execution_time_ms covers the runtime call only, not a cold start.
//   - containers[] of GET /v1/sandboxes/{id} lists each container's capabilities (was []).
//   - POST /v1/sandboxes of a profile whose image is not on the engine is 400
//     validation_error with details.reason image_missing and the hint to build it (the
//     reference created the sandbox and failed its first call with a 500); an unknown
//     profile's message goes on with the valid ones. While bay builds a missing image itself
//     (images.build_missing), the create is 503 unavailable with reason image_building and
//     Retry-After, or starts on the image's stand-in (ship:base for ship:latest).
//   - POST /v1/sandboxes of a profile whose container runtime (runtime: runsc) the platform
//     lacks is 400 validation_error with details.reason runtime_missing, the runtimes it has
//     and the hint to add it (ours, as the key).
//   - Every 401 carries WWW-Authenticate: Bearer realm="bay".
//   - GET /readyz, GET /metrics (Prometheus, authenticated) and GET /v1/sandboxes/{id}/metrics
//     are ours (docs/operations.md).
//   - History entries carry image_count, and a single entry (GET .../history/{id}, history/last)
//     the images its Python call returned (the reference dropped them); pages omit the images.
//   - GET /v1/sandboxes/{id}/terminal proxies ship's PTY WebSocket (no reference endpoint); a browser,
//     which cannot set headers on a WebSocket, may offer its key as a subprotocol (wsauth.go).
package httpapi

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/auth"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/cargo"
	"github.com/shipyard-dev/shipyard/internal/bay/execs"
	"github.com/shipyard-dev/shipyard/internal/bay/history"
	"github.com/shipyard-dev/shipyard/internal/bay/idempotency"
	"github.com/shipyard-dev/shipyard/internal/bay/jobs"
	"github.com/shipyard-dev/shipyard/internal/bay/reuse"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/skillrel"
	"github.com/shipyard-dev/shipyard/internal/bay/skills"
	"github.com/shipyard-dev/shipyard/internal/logctx"
)

// Authenticator maps a request to the owner it acts as (internal/bay/auth.Authenticator).
// Errors should be *bay.Error (unauthorized); others are reported as 401 too.
type Authenticator interface {
	Authenticate(r *http.Request) (owner string, err error)
}

// GCAdmin serves the admin GC endpoints (internal/bay/gc.Scheduler). Without one, both
// endpoints answer 503 unavailable.
type GCAdmin interface {
	HandleRun(w http.ResponseWriter, r *http.Request)
	HandleStatus(w http.ResponseWriter, r *http.Request)
}

// Options configures a Server.
type Options struct {
	Service *sandbox.Service
	// Capabilities, Cargos and History serve their endpoints (nil: a capability service over
	// Service with a default ship client and no browser; the Service's cargo service; a history
	// service over the Service's store).
	Capabilities *capability.Service
	Cargos       *cargo.Service
	History      *history.Service
	Idempotency  *idempotency.Manager
	Auth         Authenticator
	GC           GCAdmin // nil: admin endpoints answer 503 unavailable
	// Skills is the skill library (nil: its endpoints answer 503 unavailable). Its admin
	// endpoints need an Auth that implements PrincipalAuthenticator.
	Skills  *skills.Library
	Log     *slog.Logger
	Version string // reported by /health and the OpenAPI document
	// Jobs serves the jobs API (nil: no jobs routes).
	Jobs *jobs.Service
	// Reuse is the operator's settings of sandbox reuse by key (zero: allowed, no default
	// TTLs, a 600 s lock timeout).
	Reuse reuse.Config
	// SkillLife serves the skill lifecycle: payloads, candidates, releases (nil: a service
	// over the Service's store when it keeps the lifecycle, else those endpoints answer 503).
	SkillLife *skillrel.Service
	// MaxUploadBytes bounds one filesystem upload (0 = unlimited); larger -> 413.
	MaxUploadBytes int64
	// Execs runs the audited one-shot executions (nil: their endpoints answer 503).
	Execs *execs.Service
	// TerminalTouchInterval is how often an open terminal refreshes the idle deadline
	// (default 60 s).
	TerminalTouchInterval time.Duration
	// Observer, when set, is told about every request once it is answered (metrics).
	Observer Observer
	// Readiness are the checks of GET /readyz by name (e.g. "database", "engine"); none =
	// always ready.
	Readiness map[string]func(ctx context.Context) error
	// Usage serves GET /v1/sandboxes/{id}/metrics; nil answers 503 unavailable.
	Usage UsageReporter
	// Keys serves the key and owner administration (nil: those endpoints answer 503).
	Keys *auth.Authenticator
	// WarmPool serves GET /v1/admin/warmpool (nil: 503 unavailable).
	WarmPool WarmPoolReporter
}

// Server is the HTTP API. Create it with New and serve Handler().
type Server struct {
	opts      Options
	svc       *sandbox.Service
	caps      *capability.Service
	cargos    *cargo.Service
	history   *history.Service
	skillLife *skillrel.Service
	idem      *idempotency.Manager
	log       *slog.Logger
	mux       *http.ServeMux

	mu      sync.Mutex
	mounted map[string]http.Handler // extra handlers (e.g. /mcp), by pattern
	routes  []route
	// openapi is the OpenAPI document, rendered at its first request (nil until then, and
	// again after a Mount): rendering it allocates several MiB that a bay nobody asks for its
	// document would otherwise carry in its resident memory from startup on.
	openapi []byte
}

type ctxKey int

const (
	ctxAdmin ctxKey = iota
)

func requestID(ctx context.Context) string { return logctx.RequestID(ctx) }

// Owner returns the authenticated owner of a request handled by the Server ("" if none).
func Owner(ctx context.Context) string {
	return logctx.Owner(ctx)
}

// RequestID returns the request id of a request handled by the Server.
func RequestID(ctx context.Context) string { return requestID(ctx) }

// New returns a server with every route of routes.go registered.
func New(opts Options) *Server {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.TerminalTouchInterval <= 0 {
		opts.TerminalTouchInterval = time.Minute
	}
	if opts.Idempotency == nil {
		opts.Idempotency = idempotency.New(opts.Service.Store(), nil, idempotency.Config{Enabled: false}, opts.Log)
	}
	if opts.Capabilities == nil {
		opts.Capabilities = capability.New(opts.Service, nil, opts.Log, capability.Config{})
	}
	if opts.Cargos == nil {
		opts.Cargos = opts.Service.Cargos()
	}
	if opts.History == nil {
		opts.History = history.New(opts.Service.Store())
	}
	if ss, ok := opts.Service.Store().(bay.SkillStore); ok && opts.SkillLife == nil {
		opts.SkillLife = skillrel.New(ss, skillrel.Options{Now: opts.Service.Now})
	}
	if opts.SkillLife != nil {
		opts.Capabilities.SetSkills(opts.SkillLife) // browser traces and skill runs use the lifecycle
	}
	s := &Server{
		opts: opts, svc: opts.Service, caps: opts.Capabilities, cargos: opts.Cargos, history: opts.History, idem: opts.Idempotency,
		log: logctx.Wrap(opts.Log).With("component", "httpapi"), mux: http.NewServeMux(), mounted: map[string]http.Handler{},
		skillLife: opts.SkillLife,
	}
	s.routes = append(append(append(append(s.routeTable(), s.skillRoutes()...), s.execRoutes()...), s.jobRoutes()...), s.adminRoutes()...)
	s.routes = append(s.routes, s.invokeRoutes()...)
	for _, rt := range s.routes {
		h := http.Handler(rt.handler)
		if rt.auth {
			h = s.authenticated(h)
		}
		s.mux.Handle(rt.method+" "+cmp.Or(rt.mux, rt.pattern), h)
	}
	return s
}

// Mount registers an extra handler (for example the MCP server at /mcp). With authenticated
// set, the owner is resolved first (Owner(r.Context())). Mount must be called before serving.
func (s *Server) Mount(pattern string, h http.Handler, authenticated bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if authenticated {
		h = s.authenticated(h)
	}
	s.mounted[pattern] = h
	s.mux.Handle(pattern, h)
	s.openapi = nil
}

// openAPIDoc returns the OpenAPI document, rendering it once.
func (s *Server) openAPIDoc() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.openapi == nil {
		s.openapi = s.buildOpenAPI()
	}
	return s.openapi
}

// Handler returns the root handler: panic recovery, request ids, the mux, and enveloped 404 /
// 405 / 307 answers for what the mux does not route.
func (s *Server) Handler() http.Handler {
	return s.withRequestID(s.observe(s.recoverer(http.HandlerFunc(s.route))))
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern != "" {
		exchangeOf(r.Context()).route = pattern
		s.mux.ServeHTTP(w, r)
		return
	}
	// Not routed: find out whether the path exists with another method (405) or exists
	// without its trailing slash (307, as the reference's Starlette did), else 404.
	if p := r.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
		r2 := r.Clone(r.Context())
		r2.URL.Path = strings.TrimRight(p, "/")
		if _, pat := s.mux.Handler(r2); pat != "" {
			u := *r.URL
			u.Path = r2.URL.Path
			http.Redirect(w, r, u.String(), http.StatusTemporaryRedirect)
			return
		}
	}
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, pat := s.mux.Handler(r2); pat != "" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, r, s.log, bay.Errorf(bay.CodeMethodNotAllowed, "Method %s not allowed on %s", r.Method, r.URL.Path))
		return
	}
	writeError(w, r, s.log, bay.Errorf(bay.CodeNotFound, "Not found: %s", r.URL.Path))
}

// withRequestID reads X-Request-Id (any non-empty value up to 200 bytes) or generates one,
// stores it in the context and echoes it on every response.
func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(bayapi.HeaderRequestID)
		if id == "" || len(id) > 200 {
			id = newRequestID()
		}
		w.Header().Set(bayapi.HeaderRequestID, id)
		next.ServeHTTP(w, r.WithContext(logctx.WithRequestID(r.Context(), id)))
	})
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// recoverer turns a panic into a 500 internal_error envelope (logged with the stack). A panic
// after the response started only aborts the connection.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &trackingWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "panic serving request", "method", r.Method, "path", r.URL.Path,
				"request_id", requestID(r.Context()), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if tw.wrote {
				panic(http.ErrAbortHandler)
			}
			writeError(tw, r, s.log, bay.Errorf(bay.CodeInternal, "Internal server error"))
		}()
		next.ServeHTTP(tw, r)
	})
}

// trackingWriter records whether the response has started, and its status.
type trackingWriter struct {
	http.ResponseWriter
	wrote  bool
	status int
}

func (t *trackingWriter) WriteHeader(code int) {
	if !t.wrote {
		t.status = code
	}
	t.wrote = true
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	if !t.wrote {
		t.status = http.StatusOK
	}
	t.wrote = true
	return t.ResponseWriter.Write(b)
}
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
func (t *trackingWriter) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		t.wrote = true
		f.Flush()
	}
}

// authenticated resolves the owner or answers 401.
func (s *Server) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Auth == nil {
			writeError(w, r, s.log, bay.Errorf(bay.CodeUnauthorized, "Authentication required"))
			return
		}
		r = bearerFromSubprotocol(r)
		var owner string
		var admin bool
		var err error
		if p, ok := s.opts.Auth.(PrincipalAuthenticator); ok {
			owner, admin, err = p.Principal(r)
		} else {
			owner, err = s.opts.Auth.Authenticate(r)
		}
		if err != nil {
			if bay.ErrorCode(err) == bay.CodeInternal {
				err = bay.Errorf(bay.CodeUnauthorized, "Authentication required").WithCause(err)
			}
			writeError(w, r, s.log, err)
			return
		}
		exchangeOf(r.Context()).owner = owner
		ctx := context.WithValue(logctx.WithOwner(r.Context(), owner), ctxAdmin, admin)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
