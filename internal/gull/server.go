package gull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/gullapi"
	"github.com/shipyard-dev/shipyard/internal/gull/agent"
	"github.com/shipyard-dev/shipyard/internal/gull/browser"
	"github.com/shipyard-dev/shipyard/internal/runtimekit"
)

// Executor runs command lines; *agent.Runner implements it.
type Executor interface {
	Exec(ctx context.Context, line string, timeout time.Duration) agent.Result
}

var _ Executor = (*agent.Runner)(nil)

// BrowserStatus reports the browser's state; *browser.Manager implements it.
type BrowserStatus interface {
	Status() browser.Status
}

var _ BrowserStatus = (*browser.Manager)(nil)

// Server is gull's HTTP layer.
type Server struct {
	Exec    Executor
	Browser BrowserStatus
	Meta    gullapi.MetaResponse
	Session string
	Version string
	// AuthToken, when set, is required on every request but /health.
	AuthToken string
	// AllowedHosts are extra Host names accepted besides IP literals,
	// localhost and single-label names (see checkOrigin).
	AllowedHosts []string
	Log          *slog.Logger
}

// maxBodyBytes bounds a request body (a batch of MaxBatchCommands commands
// of a few hundred bytes each fits easily).
const maxBodyBytes = 4 << 20

// Handler returns the routed handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+gullapi.PathHealth, s.health)
	mux.HandleFunc("GET "+gullapi.PathMeta, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.Meta) })
	mux.HandleFunc("POST "+gullapi.PathExec, s.exec)
	mux.HandleFunc("POST "+gullapi.PathExecBatch, s.execBatch)
	mux.HandleFunc("DELETE "+gullapi.PathSessions+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, gullapi.DeleteSessionResponse{SandboxID: r.PathValue("id"), Destroyed: true})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, gullapi.CodeNotFound, "Not Found")
	})
	return s.recoverer(s.checkOrigin(s.authenticate(mux)))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	if status >= 500 {
		s.Log.Error("request failed", "method", r.Method, "path", r.URL.Path, "code", code, "detail", msg)
	} else {
		s.Log.Debug("request rejected", "method", r.Method, "path", r.URL.Path, "code", code, "detail", msg)
	}
	writeJSON(w, status, gullapi.ErrorResponse{Detail: msg, Code: code})
}

func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.Log.Error("handler panic", "path", r.URL.Path, "panic", p)
				s.fail(w, r, http.StatusInternalServerError, gullapi.CodeInternal, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// checkOrigin refuses what a web page could send: the browser gull drives
// runs in the same network namespace, so a page may reach gull on localhost.
// Browsers add Origin (or Sec-Fetch-Site) to such requests, and a page that
// rebinds its own DNS name to 127.0.0.1 still sends that name as Host; bay
// and local tools send neither. So a request with Origin or Sec-Fetch-Site is
// refused, and so is a Host that is not an IP literal, localhost, a
// single-label name (a container name on a Docker network) or listed in
// AllowedHosts. The token guards the API anyway; this also keeps pages off
// /health and away from a token-less gull.
func (s *Server) checkOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") != "" {
			s.fail(w, r, http.StatusForbidden, gullapi.CodeForbidden, "requests from web pages are refused")
			return
		}
		if !s.hostAllowed(r.Host) {
			s.fail(w, r, http.StatusForbidden, gullapi.CodeForbidden, "Host not allowed")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") || !strings.Contains(host, ".") {
		return true
	}
	for _, a := range s.AllowedHosts {
		if strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

// authenticate requires AuthToken on every request but /health, as a Bearer
// token or the password of Basic credentials.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return runtimekit.RequireToken(next, s.AuthToken, gullapi.PathHealth, `Basic realm="gull"`, func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusUnauthorized, gullapi.CodeUnauthorized, "Missing or wrong runtime token")
	})
}

// decode reads a JSON object into v; every malformed body is a 422, as
// for a missing or out-of-range field.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("unexpected data after the JSON object")
	}
	if err == nil {
		return true
	}
	var mbe *http.MaxBytesError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		s.fail(w, r, http.StatusRequestEntityTooLarge, gullapi.CodeTooLarge, fmt.Sprintf("request body larger than %d bytes", maxBodyBytes))
		return false
	case errors.Is(err, io.EOF):
		err = errors.New("request body must be a JSON object")
	case errors.As(err, &te) && te.Field != "":
		err = fmt.Errorf("field %q must be of type %s", te.Field, te.Type)
	}
	s.fail(w, r, http.StatusUnprocessableEntity, gullapi.CodeValidation, "invalid body: "+err.Error())
	return false
}

// timeoutOf validates an optional timeout in seconds.
func timeoutOf(t *int, def, max int) (time.Duration, error) {
	if t == nil {
		return time.Duration(def) * time.Second, nil
	}
	if *t < 1 || *t > max {
		return 0, fmt.Errorf("timeout must be between 1 and %d seconds", max)
	}
	return time.Duration(*t) * time.Second, nil
}

func checkCommand(c string) error {
	if strings.TrimSpace(c) == "" {
		return errors.New("cmd must not be empty")
	}
	if len(c) > gullapi.MaxCommandBytes {
		return fmt.Errorf("cmd longer than %d bytes", gullapi.MaxCommandBytes)
	}
	return nil
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var req gullapi.ExecRequest
	if !s.decode(w, r, &req) {
		return
	}
	if req.Cmd == nil {
		s.fail(w, r, http.StatusUnprocessableEntity, gullapi.CodeValidation, "cmd is required")
		return
	}
	if err := checkCommand(*req.Cmd); err != nil {
		s.fail(w, r, http.StatusUnprocessableEntity, gullapi.CodeValidation, err.Error())
		return
	}
	timeout, err := timeoutOf(req.Timeout, gullapi.DefaultExecTimeout, gullapi.MaxExecTimeout)
	if err != nil {
		s.fail(w, r, http.StatusUnprocessableEntity, gullapi.CodeValidation, err.Error())
		return
	}
	res := s.Exec.Exec(r.Context(), *req.Cmd, timeout)
	writeJSON(w, http.StatusOK, gullapi.ExecResponse{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode})
}

func (s *Server) execBatch(w http.ResponseWriter, r *http.Request) {
	var req gullapi.ExecBatchRequest
	if !s.decode(w, r, &req) {
		return
	}
	if len(req.Commands) == 0 {
		s.fail(w, r, http.StatusUnprocessableEntity, gullapi.CodeValidation, "commands must hold at least one command")
		return
	}
	if len(req.Commands) > gullapi.MaxBatchCommands {
		s.fail(w, r, http.StatusUnprocessableEntity, gullapi.CodeValidation, fmt.Sprintf("at most %d commands per batch", gullapi.MaxBatchCommands))
		return
	}
	for i, c := range req.Commands {
		if err := checkCommand(c); err != nil {
			s.fail(w, r, http.StatusUnprocessableEntity, gullapi.CodeValidation, fmt.Sprintf("commands[%d]: %v", i, err))
			return
		}
	}
	budget, err := timeoutOf(req.Timeout, gullapi.DefaultBatchTimeout, gullapi.MaxBatchTimeout)
	if err != nil {
		s.fail(w, r, http.StatusUnprocessableEntity, gullapi.CodeValidation, err.Error())
		return
	}
	stop := req.StopOnError == nil || *req.StopOnError
	writeJSON(w, http.StatusOK, RunBatch(r.Context(), s.Exec, req.Commands, budget, stop))
}

// RunBatch runs commands in order within one overall budget: each step gets
// the budget that is left as its timeout, the batch stops (without a result
// for the rest) when nothing is left, and with stopOnError after the first
// step that does not exit 0.
func RunBatch(ctx context.Context, ex Executor, commands []string, budget time.Duration, stopOnError bool) gullapi.ExecBatchResponse {
	t0 := time.Now()
	out := gullapi.ExecBatchResponse{Results: []gullapi.BatchStep{}, TotalSteps: len(commands)}
	allOK := true
	for i, c := range commands {
		left := budget - time.Since(t0)
		if left <= 0 || ctx.Err() != nil {
			break
		}
		s0 := time.Now()
		res := ex.Exec(ctx, c, left)
		out.Results = append(out.Results, gullapi.BatchStep{
			Cmd: c, Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode,
			StepIndex: i, DurationMS: time.Since(s0).Milliseconds(),
		})
		out.CompletedSteps++
		if res.ExitCode != 0 {
			allOK = false
			if stopOnError {
				break
			}
		}
	}
	out.Success = allOK && out.CompletedSteps == out.TotalSteps
	out.DurationMS = time.Since(t0).Milliseconds()
	return out
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	st := s.Browser.Status()
	status := gullapi.StatusHealthy
	switch {
	case !st.Installed:
		status = gullapi.StatusUnhealthy
	case st.Crashed || st.LastError != "":
		status = gullapi.StatusDegraded
	}
	writeJSON(w, http.StatusOK, gullapi.HealthResponse{
		Status: status, BrowserActive: st.Active, BrowserReady: st.Ready, Session: s.Session, Version: s.Version,
	})
}
