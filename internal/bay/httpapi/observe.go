package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
)

// RouteUnmatched is RequestRecord.Route of a request no route matched (404, 405, 307).
const RouteUnmatched = "unmatched"

// RequestRecord is what the Server reports about one answered request.
type RequestRecord struct {
	Method string
	// Route is the matched pattern without its method ("/v1/sandboxes/{id}"), never the raw
	// path, so that its cardinality is bounded; RouteUnmatched otherwise.
	Route    string
	Status   int
	Code     string // the error envelope's code; "" on success
	Owner    string // "" before authentication
	Duration time.Duration
	// Replayed is set when the response was replayed from an Idempotency-Key record.
	Replayed bool
}

// Observer is told about every request once it is answered. It runs on the request's
// goroutine and must not block.
type Observer interface {
	ObserveRequest(RequestRecord)
}

// exchange collects, while a request is served, what the layers below the observer learn:
// the matched route, the authenticated owner, the error code.
type exchange struct {
	route, owner, code string
}

type exchangeKey struct{}

// exchangeOf returns the request's exchange; a throwaway one outside observe (tests that call
// a handler directly).
func exchangeOf(ctx context.Context) *exchange {
	if ex, ok := ctx.Value(exchangeKey{}).(*exchange); ok {
		return ex
	}
	return &exchange{}
}

// observe writes the access log line of every request at info (method, route pattern,
// status, duration, owner, request id) and reports it to the Observer.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ex := &exchange{}
		tw := &trackingWriter{ResponseWriter: w}
		began := time.Now()
		next.ServeHTTP(tw, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, ex)))
		took := time.Since(began)
		rec := RequestRecord{Method: r.Method, Route: routeOnly(ex.route), Status: tw.status, Code: ex.code,
			Owner: ex.owner, Duration: took, Replayed: tw.Header().Get(HeaderReplayed) == "true"}
		if rec.Status == 0 {
			// Nothing was written: net/http answers 200 with an empty body.
			rec.Status = http.StatusOK
		}
		s.log.InfoContext(r.Context(), "request", "method", rec.Method, "route", rec.Route, "status", rec.Status,
			"duration_ms", float64(took.Microseconds())/1000, "owner", rec.Owner)
		if s.opts.Observer != nil {
			s.opts.Observer.ObserveRequest(rec)
		}
	})
}

// routeOnly strips the method from a ServeMux pattern ("GET /v1/x" -> "/v1/x").
func routeOnly(pattern string) string {
	if pattern == "" {
		return RouteUnmatched
	}
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == '/' {
			return pattern[i:]
		}
	}
	return pattern
}

// readyz answers 200 when every readiness check passes within a bounded time, else 503
// unavailable with the failing checks named in details.checks (the causes go to the log).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readinessTimeout)
	defer cancel()
	type result struct {
		name string
		err  error
	}
	out := make(chan result, len(s.opts.Readiness))
	for name, check := range s.opts.Readiness {
		go func() { out <- result{name, check(ctx)} }()
	}
	checks := map[string]string{}
	failed := false
	for range s.opts.Readiness {
		res := <-out
		if res.err != nil {
			failed = true
			checks[res.name] = "fail"
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				checks[res.name] = "timeout"
			}
			s.log.WarnContext(r.Context(), "readiness check failed", "check", res.name, "err", res.err)
			continue
		}
		checks[res.name] = "ok"
	}
	if failed {
		s.fail(w, r, bay.Errorf(bay.CodeUnavailable, "Not ready").WithDetails(map[string]any{"checks": checks}))
		return
	}
	writeJSON(w, http.StatusOK, bayapi.ReadyResponse{Status: "ready", Checks: checks})
}

// readinessTimeout bounds GET /readyz: a probe that hangs is worse than one that fails.
const readinessTimeout = 3 * time.Second

// UsageReporter reads a sandbox's resource use (internal/bay/usage.Reporter).
type UsageReporter interface {
	SandboxMetrics(ctx context.Context, owner, id string) (bayapi.SandboxMetrics, error)
}

// sandboxMetrics serves GET /v1/sandboxes/{id}/metrics.
func (s *Server) sandboxMetrics(w http.ResponseWriter, r *http.Request) {
	if s.opts.Usage == nil {
		s.fail(w, r, bay.Errorf(bay.CodeUnavailable, "This bay's driver does not report sandbox usage"))
		return
	}
	out, err := s.opts.Usage.SandboxMetrics(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"))
	s.reply(w, r, out, err)
}
