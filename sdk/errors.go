package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// Error is the one error type for every non-2xx answer of bay. Code is the wire code of the
// error envelope ({"error":{"code","message","request_id","details"}}, see bayapi), for example
// "not_found", "session_not_ready" or "ship_error". Bodies that are not the envelope keep their
// status: a FastAPI-style {"detail": "..."} or a non-JSON body yields Code "http_<status>"
// (e.g. "http_500") with a snippet of the body in Message and Details["raw_response_snippet"].
// A 422 schema-validation answer carries FastAPI's "detail" list in Details["detail"].
type Error struct {
	Status    int
	Code      string
	Message   string
	RequestID string
	Details   map[string]any
}

// Error formats the error as "bay: [code] message (HTTP status, request_id ...)".
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bay: [%s] %s (HTTP %d", e.Code, e.Message, e.Status)
	if e.RequestID != "" {
		fmt.Fprintf(&b, ", request_id %s", e.RequestID)
	}
	b.WriteString(")")
	return b.String()
}

// RetryAfterMS returns details.retry_after_ms when present (session_not_ready), else 0.
func (e *Error) RetryAfterMS() int64 {
	if e == nil || e.Details == nil {
		return 0
	}
	switch v := e.Details["retry_after_ms"].(type) {
	case float64:
		return int64(v)
	case json.Number:
		n, _ := v.Int64()
		return n
	case int:
		return int64(v)
	case int64:
		return v
	}
	return 0
}

// AsError returns the *Error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// IsCode reports whether err is (or wraps) an *Error with the given wire code.
func IsCode(err error, code string) bool {
	e, ok := AsError(err)
	return ok && e.Code == code
}

// IsNotFound reports whether err is a 404 of bay: code not_found or file_not_found.
func IsNotFound(err error) bool {
	e, ok := AsError(err)
	return ok && (e.Code == bayapi.CodeNotFound || e.Code == bayapi.CodeFileNotFound)
}

const maxSnippet = 512

// decodeError builds the *Error of a non-2xx response body.
func decodeError(status int, requestID string, body []byte) *Error {
	e := &Error{Status: status, RequestID: requestID}
	var env struct {
		Error *struct {
			Code      string         `json:"code"`
			Message   string         `json:"message"`
			RequestID string         `json:"request_id"`
			Details   map[string]any `json:"details"`
		} `json:"error"`
		Detail json.RawMessage `json:"detail"`
	}
	if err := json.Unmarshal(body, &env); err == nil {
		if env.Error != nil && env.Error.Code != "" {
			e.Code = env.Error.Code
			e.Message = env.Error.Message
			if env.Error.RequestID != "" {
				e.RequestID = env.Error.RequestID
			}
			e.Details = env.Error.Details
			if len(env.Detail) > 0 && string(env.Detail) != "null" {
				var d any
				if json.Unmarshal(env.Detail, &d) == nil {
					if e.Details == nil {
						e.Details = map[string]any{}
					}
					e.Details["detail"] = d
				}
			}
			return e
		}
		if len(env.Detail) > 0 {
			// FastAPI shapes: {"detail": "text"} or {"detail": [issues]} (422).
			var s string
			if json.Unmarshal(env.Detail, &s) == nil {
				e.Code = fmt.Sprintf("http_%d", status)
				e.Message = s
				return e
			}
			var d any
			_ = json.Unmarshal(env.Detail, &d)
			if status == 422 {
				e.Code = bayapi.CodeValidation
				e.Message = "request validation failed"
			} else {
				e.Code = fmt.Sprintf("http_%d", status)
				e.Message = "request failed"
			}
			e.Details = map[string]any{"detail": d}
			return e
		}
	}
	snippet := string(body)
	if len(snippet) > maxSnippet {
		snippet = snippet[:maxSnippet]
	}
	snippet = strings.TrimSpace(snippet)
	e.Code = fmt.Sprintf("http_%d", status)
	if snippet == "" {
		e.Message = fmt.Sprintf("HTTP %d with an empty body", status)
	} else {
		e.Message = snippet
		e.Details = map[string]any{"raw_response_snippet": snippet}
	}
	return e
}
