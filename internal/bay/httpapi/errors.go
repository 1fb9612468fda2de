package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
)

// schemaError is a request that failed schema validation (malformed JSON, missing or badly
// typed fields, out-of-range values, bad query parameters): 422 validation_error with
// FastAPI's "detail" list next to the envelope.
type schemaError struct {
	issues []bayapi.ValidationIssue
}

func (e *schemaError) Error() string {
	return fmt.Sprintf("request validation failed: %d issue(s)", len(e.issues))
}

// message is the envelope's message: the first issue over a configured limit (its ctx names
// the setting under "limit") is spelled out with the setting and the value asked; else the
// generic one.
func (e *schemaError) message() string {
	for _, is := range e.issues {
		if key, ok := is.Ctx["limit"].(string); ok && len(is.Loc) > 0 {
			return fmt.Sprintf("%v: %s (%s), got %v", is.Loc[len(is.Loc)-1], is.Msg, key, is.Input)
		}
	}
	return "Request validation failed"
}

// issues collects validation issues.
type issues []bayapi.ValidationIssue

func (is *issues) add(typ string, loc []any, msg string, input any, ctx map[string]any) {
	*is = append(*is, bayapi.ValidationIssue{Type: typ, Loc: loc, Msg: msg, Input: input, Ctx: ctx})
}

func (is *issues) missing(loc ...any) {
	is.add("missing", loc, "Field required", nil, nil)
}

// intRange checks lo <= v <= hi.
func (is *issues) intRange(v int64, lo, hi int64, loc ...any) {
	if v < lo {
		is.add("greater_than_equal", loc, fmt.Sprintf("Input should be greater than or equal to %d", lo), v, map[string]any{"ge": lo})
	} else if v > hi {
		is.add("less_than_equal", loc, fmt.Sprintf("Input should be less than or equal to %d", hi), v, map[string]any{"le": hi})
	}
}

// strLen checks that an optional string has at most max bytes.
func (is *issues) strLen(v *string, max int, loc ...any) {
	if v != nil && len(*v) > max {
		is.add("string_too_long", loc, fmt.Sprintf("String should have at most %d characters", max), len(*v), map[string]any{"max_length": max})
	}
}

func (is issues) err() error {
	if len(is) == 0 {
		return nil
	}
	return &schemaError{issues: is}
}

// statusOf is the ONE translation of an error into an HTTP status and envelope: a schema
// error is 422; a classified *bay.Error gets bayapi.StatusOf(code); anything else is a 500
// internal_error with a generic message (the cause is logged, never sent).
func statusOf(err error) (int, bayapi.ErrorEnvelope) {
	var se *schemaError
	if errors.As(err, &se) {
		return http.StatusUnprocessableEntity, bayapi.ErrorEnvelope{
			Error:  bayapi.ErrorBody{Code: bayapi.CodeValidation, Message: se.message()},
			Detail: se.issues,
		}
	}
	var be *bay.Error
	if errors.As(err, &be) {
		return bayapi.StatusOf(be.Code), bayapi.ErrorEnvelope{Error: bayapi.ErrorBody{Code: be.Code, Message: be.Message, Details: wireDetails(be.Details)}}
	}
	return http.StatusInternalServerError, bayapi.ErrorEnvelope{Error: bayapi.ErrorBody{Code: bayapi.CodeInternal, Message: "Internal server error"}}
}

// StatusClientClosedRequest is the status logged (and written, to nobody) for a request whose
// client went away before the answer: not a failure of bay.
const StatusClientClosedRequest = 499

// writeError writes err in the one envelope with the request id, and logs it (server errors
// at error level with the cause, client errors at debug; a request its client cancelled at
// info with status 499, whatever the error it caused).
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	status, env := statusOf(err)
	env.Error.RequestID = requestID(r.Context())
	exchangeOf(r.Context()).code = env.Error.Code
	if errors.Is(r.Context().Err(), context.Canceled) {
		log.InfoContext(r.Context(), "request cancelled by the client", "request_id", env.Error.RequestID, "method", r.Method, "path", r.URL.Path,
			"status", StatusClientClosedRequest, "code", env.Error.Code, "err", err)
		writeJSON(w, StatusClientClosedRequest, env)
		return
	}
	if status >= 500 {
		log.ErrorContext(r.Context(), "request failed", "request_id", env.Error.RequestID, "method", r.Method, "path", r.URL.Path,
			"status", status, "code", env.Error.Code, "err", err)
	} else {
		log.DebugContext(r.Context(), "request refused", "request_id", env.Error.RequestID, "method", r.Method, "path", r.URL.Path,
			"status", status, "code", env.Error.Code, "err", err)
	}
	if status == http.StatusUnauthorized {
		// RFC 9110: a 401 names the scheme to use (MCP clients read it too).
		w.Header().Set("WWW-Authenticate", `Bearer realm="bay"`)
	}
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		if ms, ok := env.Error.Details["retry_after_ms"].(int); ok {
			w.Header().Set("Retry-After", fmt.Sprint((ms+999)/1000))
		}
	}
	writeJSON(w, status, env)
}

// writeJSON marshals v and writes it with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal_error","message":"Failed to encode response","request_id":""}}`)
	}
	writeRaw(w, status, b)
}

// writeRaw writes an already encoded JSON body.
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
