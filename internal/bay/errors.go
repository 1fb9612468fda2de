package bay

import (
	"context"
	"errors"
	"fmt"
)

// Error codes are the wire codes of api/bayapi; the domain uses the same strings so that the
// HTTP layer translates an error to a status in exactly one place.
const (
	CodeNotFound               = "not_found"
	CodeUnauthorized           = "unauthorized"
	CodeForbidden              = "forbidden"
	CodeValidation             = "validation_error"
	CodeInvalidPath            = "invalid_path"
	CodeCapabilityNotSupported = "capability_not_supported"
	CodeConflict               = "conflict"
	CodeSandboxExpired         = "sandbox_expired"
	CodeSandboxTTLInfinite     = "sandbox_ttl_infinite"
	CodeFileNotFound           = "file_not_found"
	CodeSessionNotReady        = "session_not_ready"
	CodeShipError              = "ship_error"
	CodeTimeout                = "timeout"
	CodePayloadTooLarge        = "payload_too_large"
	CodeGCRunning              = "gc_running"
	CodeUnavailable            = "unavailable"
	CodeMethodNotAllowed       = "method_not_allowed"
	CodeInternal               = "internal_error"
)

// Error is a classified domain error. Message is safe to show to clients; Err (the cause) goes
// to the log only. Details are sent as the envelope's "details".
type Error struct {
	Code    string
	Message string
	Details map[string]any
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Code + ": " + e.Message + ": " + e.Err.Error()
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns a classified error with a formatted, client-safe message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithDetails returns e with details set.
func (e *Error) WithDetails(d map[string]any) *Error { e.Details = d; return e }

// WithCause returns e with the underlying cause set (logged, never sent).
func (e *Error) WithCause(err error) *Error { e.Err = err; return e }

// Sentinel errors returned by ports. Adapters wrap them with context:
// fmt.Errorf("inspect container %s: %w", id, bay.ErrNotFound).
var (
	ErrNotFound = &Error{Code: CodeNotFound, Message: "not found"}
	ErrConflict = &Error{Code: CodeConflict, Message: "conflict"}
)

// ErrorCode returns the code of the first *Error in err's chain, or CodeInternal.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// IsNotFound reports whether err is classified not_found.
func IsNotFound(err error) bool { return ErrorCode(err) == CodeNotFound }

// IsConflict reports whether err is classified conflict.
func IsConflict(err error) bool { return ErrorCode(err) == CodeConflict }

// Errors the services share.

// ErrSandboxNotFound is the not_found of a sandbox the caller may not see.
func ErrSandboxNotFound(id string) *Error {
	return Errorf(CodeNotFound, "Sandbox not found: %s", id)
}

// ErrCargoNotFound is the not_found of a cargo the caller may not see.
func ErrCargoNotFound(id string) *Error {
	return Errorf(CodeNotFound, "Cargo not found: %s", id)
}

// ErrNotReady is 503 session_not_ready for sandboxID; with retry, details carry
// retry_after_ms 1000.
func ErrNotReady(msg, sandboxID string, retry bool) *Error {
	d := map[string]any{"sandbox_id": sandboxID}
	if retry {
		d["retry_after_ms"] = 1000
	}
	return Errorf(CodeSessionNotReady, "%s", msg).WithDetails(d)
}

// ErrExpired is 409 sandbox_expired for sb (which has an expiry); details carry its id and
// expires_at as a time.Time, which the HTTP layer renders in the wire's time format.
func ErrExpired(sb *Sandbox, msg string) *Error {
	return Errorf(CodeSandboxExpired, "%s", msg).WithDetails(map[string]any{"sandbox_id": sb.ID, "expires_at": *sb.ExpiresAt})
}

// Internal is an internal_error with a safe message and its cause.
func Internal(msg string, cause error) *Error {
	return Errorf(CodeInternal, "%s", msg).WithCause(cause)
}

// Classify returns err unchanged when it is already classified, a timeout when a context ended
// it, else an internal error with the safe message msg.
func Classify(err error, msg string) error {
	var be *Error
	if errors.As(err, &be) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Errorf(CodeTimeout, "%s: timed out", msg).WithCause(err)
	}
	return Internal(msg, err)
}

// Classified returns err classified as kind: its message is err's, and errors.Is/As see both
// kind (first) and err. Drivers use it to give an engine's or API server's errors the domain
// meaning (bay.ErrNotFound, bay.ErrConflict, unavailable) their callers test for.
func Classified(kind *Error, err error) error { return &classified{kind, err} }

type classified struct {
	kind *Error
	err  error
}

func (c *classified) Error() string   { return c.err.Error() }
func (c *classified) Unwrap() []error { return []error{c.kind, c.err} }
