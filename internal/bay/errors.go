package bay

import (
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
