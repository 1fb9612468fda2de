// Package apierr is the one error type of the ship runtime: a stable code from
// shipapi (Code* constants), a message that is safe to show to the caller, and
// the underlying cause (logged, never sent). Only internal/ship/httpapi maps
// codes onto HTTP statuses.
package apierr

import (
	"errors"
	"fmt"

	"github.com/shipyard-dev/shipyard/api/shipapi"
)

// Error is a classified ship error.
type Error struct {
	Code string // one of shipapi.Code*
	Msg  string // safe for the client
	Err  error  // cause, for logs; may be nil
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Msg, e.Err)
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// New returns a classified error without a cause.
func New(code, msg string) *Error { return &Error{Code: code, Msg: msg} }

// Newf is New with formatting.
func Newf(code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Wrap classifies cause under code with a safe message.
func Wrap(code string, cause error, msg string) *Error {
	return &Error{Code: code, Msg: msg, Err: cause}
}

// CodeOf returns the code of the first *Error in err's chain, or
// shipapi.CodeInternal for unclassified errors.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return shipapi.CodeInternal
}

// MessageOf returns the safe message of err's first *Error, or a generic one.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Msg
	}
	return "internal error"
}
