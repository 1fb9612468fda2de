// Package metrics is bay's Prometheus instrumentation. It observes bay at its seams instead
// of inside the services: the HTTP API's per-request observer (requests, latency by
// operation, capability and outcome, errors by code, idempotent replays), a bay.Driver
// decorator (driver call latency), a bay.Store decorator (database latency, session start
// latency, warm-pool hits and misses), the GC's task results, and a collector that reads
// sandboxes, sessions and the warm pool from the store at scrape time, so that several bays
// sharing one database report the same truth. Go runtime and process metrics come with it.
//
// No label carries an owner, a sandbox id or a raw path: cardinality stays bounded by the
// route table, the error codes and the profiles.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/gc"
	"github.com/shipyard-dev/shipyard/internal/bay/httpapi"
)

var _ httpapi.Observer = (*Metrics)(nil)

// Outcomes of an observed call.
const (
	OutcomeOK          = "ok"
	OutcomeClientError = "client_error" // 4xx: the caller's mistake
	OutcomeServerError = "server_error" // 5xx
	OutcomeCancelled   = "cancelled"    // the client went away (499)
	OutcomeNotFound    = "not_found"
	OutcomeConflict    = "conflict"
	OutcomeTimeout     = "timeout"
	OutcomeError       = "error"
)

// latencyBuckets span a fast store read (0.5 ms) to a cold sandbox start under load (2 min).
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// Metrics holds bay's collectors in a registry of its own.
type Metrics struct {
	reg *prometheus.Registry
	log *slog.Logger

	httpRequests   *prometheus.CounterVec
	httpDuration   *prometheus.HistogramVec
	opDuration     *prometheus.HistogramVec
	sessionStart   *prometheus.HistogramVec
	errors         *prometheus.CounterVec
	replays        *prometheus.CounterVec
	gcActions      *prometheus.CounterVec
	warmClaims     *prometheus.CounterVec
	driverDuration *prometheus.HistogramVec
	storeDuration  *prometheus.HistogramVec
	buildInfo      *prometheus.GaugeVec
	egressDenied   *prometheus.CounterVec
	egressQueries  *prometheus.CounterVec
}

// New returns bay's metrics with the Go runtime and process collectors registered. log nil =
// discard.
func New(version string, log *slog.Logger) *Metrics {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{reg: prometheus.NewRegistry(), log: log.With("component", "metrics")}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bay_http_requests_total",
		Help: "HTTP requests answered, by method, route pattern and status."}, []string{"method", "route", "status"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bay_http_request_duration_seconds",
		Help: "HTTP request latency by method and route pattern.", Buckets: latencyBuckets}, []string{"method", "route"})
	m.opDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bay_operation_duration_seconds",
		Help:    "Latency of sandbox creation (operation create) and capability calls (operation exec: python, shell, browser; operation files; operation terminal) by outcome. A first call includes the sandbox's cold start.",
		Buckets: latencyBuckets}, []string{"operation", "capability", "outcome"})
	m.sessionStart = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bay_session_start_duration_seconds",
		Help: "Time from a session entering starting to running (outcome ok) or failed (outcome failed), by profile.", Buckets: latencyBuckets},
		[]string{"profile", "outcome"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bay_errors_total",
		Help: "Error responses by error code and status."}, []string{"code", "status"})
	m.replays = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bay_idempotent_replays_total",
		Help: "Responses replayed from an Idempotency-Key record, by route pattern."}, []string{"route"})
	m.gcActions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bay_gc_actions_total",
		Help: "GC actions by task and result (cleaned, skipped, error)."}, []string{"task", "result"})
	m.warmClaims = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bay_warmpool_claims_total",
		Help: "Warm-pool claims at sandbox creation by profile and result (hit, miss)."}, []string{"profile", "result"})
	m.driverDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bay_driver_call_duration_seconds",
		Help: "Container platform (driver) call latency by method and outcome.", Buckets: latencyBuckets}, []string{"method", "outcome"})
	m.storeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bay_store_call_duration_seconds",
		Help: "Database call latency by method and outcome (method Tx is a whole write transaction).", Buckets: latencyBuckets}, []string{"method", "outcome"})
	m.buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "bay_build_info",
		Help: "Always 1; the version label is bay's version."}, []string{"version"})
	m.buildInfo.WithLabelValues(version).Set(1)
	m.egressDenied = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bay_egress_denied_total",
		Help: "Connections and DNS queries of sandboxes refused by their network policy (each one a network event of its sandbox), by policy mode, kind (dns, http, tls, tcp) and reason (not_allowed, deny_entry, blocked_address, mode_none, policy_changed, connection_limit, no_server_name)."},
		[]string{"mode", "kind", "reason"})
	m.egressQueries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bay_egress_dns_queries_total",
		Help: "DNS queries answered by bay's sandbox resolver, by the asking sandbox's policy mode (unregistered: an address no sandbox is at) and result (answered, refused, nxdomain, upstream_error, malformed, unregistered)."},
		[]string{"mode", "result"})
	for _, c := range []prometheus.Collector{m.httpRequests, m.httpDuration, m.opDuration, m.sessionStart, m.errors,
		m.replays, m.gcActions, m.warmClaims, m.driverDuration, m.storeDuration, m.buildInfo, m.egressDenied, m.egressQueries,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)})
}

// Registry is the registry (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveRequest implements httpapi.Observer.
func (m *Metrics) ObserveRequest(r httpapi.RequestRecord) {
	status := strconv.Itoa(r.Status)
	secs := r.Duration.Seconds()
	m.httpRequests.WithLabelValues(r.Method, r.Route, status).Inc()
	m.httpDuration.WithLabelValues(r.Method, r.Route).Observe(secs)
	if r.Code != "" {
		m.errors.WithLabelValues(r.Code, status).Inc()
	}
	if r.Replayed {
		m.replays.WithLabelValues(r.Route).Inc()
	}
	if op, capability, ok := operationOf(r.Method, r.Route); ok {
		m.opDuration.WithLabelValues(op, capability, httpOutcome(r.Status)).Observe(secs)
	}
}

// operationOf maps a route to the operation and capability of bay_operation_duration_seconds.
func operationOf(method, route string) (op, capability string, ok bool) {
	switch {
	case method == http.MethodPost && route == bayapi.PathSandboxes:
		return "create", "", true
	case route == bayapi.PathPythonExec:
		return "exec", "python", true
	case route == bayapi.PathShellExec:
		return "exec", "shell", true
	case route == bayapi.PathBrowserExec, route == bayapi.PathBrowserBatch:
		return "exec", "browser", true
	case route == bayapi.PathTerminal:
		return "terminal", "terminal", true
	case strings.HasPrefix(route, "/v1/sandboxes/{sandbox_id}/filesystem/"):
		return "files", "filesystem", true
	}
	return "", "", false
}

func httpOutcome(status int) string {
	switch {
	case status == httpapi.StatusClientClosedRequest:
		return OutcomeCancelled
	case status >= 500:
		return OutcomeServerError
	case status >= 400:
		return OutcomeClientError
	}
	return OutcomeOK
}

// callOutcome classifies a port call's error.
func callOutcome(err error) string {
	switch {
	case err == nil:
		return OutcomeOK
	case bay.IsNotFound(err):
		return OutcomeNotFound
	case bay.IsConflict(err):
		return OutcomeConflict
	case errors.Is(err, context.Canceled):
		return OutcomeCancelled
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimeout
	}
	return OutcomeError
}

// ObserveGC counts one GC task's actions (gc.Config.Observe).
func (m *Metrics) ObserveGC(tr gc.TaskResult) {
	if tr.CleanedCount > 0 {
		m.gcActions.WithLabelValues(tr.TaskName, "cleaned").Add(float64(tr.CleanedCount))
	}
	if tr.SkippedCount > 0 {
		m.gcActions.WithLabelValues(tr.TaskName, "skipped").Add(float64(tr.SkippedCount))
	}
	if len(tr.Errors) > 0 {
		m.gcActions.WithLabelValues(tr.TaskName, "error").Add(float64(len(tr.Errors)))
	}
}

// EgressDenied counts a refusal of bay's egress gateway or resolver (egress.Observer).
func (m *Metrics) EgressDenied(mode, kind, reason string) {
	m.egressDenied.WithLabelValues(mode, kind, reason).Inc()
}

// EgressQuery counts a DNS query bay's resolver answered (egress.Observer).
func (m *Metrics) EgressQuery(mode, result string) {
	m.egressQueries.WithLabelValues(mode, result).Inc()
}

func since(t time.Time) float64 { return time.Since(t).Seconds() }

// WarmClaims returns how many creates of profile this bay served from the warm pool (hits)
// and how many found no warm sandbox (misses) since it started: the values of
// bay_warmpool_claims_total.
func (m *Metrics) WarmClaims(profile string) (hits, misses int64) {
	read := func(result string) int64 {
		c, err := m.warmClaims.GetMetricWithLabelValues(profile, result)
		if err != nil {
			return 0
		}
		var d dto.Metric
		if c.Write(&d) != nil || d.Counter == nil {
			return 0
		}
		return int64(d.Counter.GetValue())
	}
	return read("hit"), read("miss")
}
