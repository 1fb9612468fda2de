package bay

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// IOCaps bound what goes into and comes out of one call, in bytes: the stdout and the stderr
// kept, one input and all of a call's inputs, one output and all of a call's outputs. An
// audited execution's policy holds them (ExecPolicy), and so do the ordinary sandbox calls
// (CallLimits). A cap of 0 or less is no cap.
type IOCaps struct {
	MaxStdoutBytes       int64 `json:"max_stdout_bytes"`
	MaxStderrBytes       int64 `json:"max_stderr_bytes"`
	MaxInputBytes        int64 `json:"max_input_bytes"`
	MaxInputsBytesTotal  int64 `json:"max_inputs_bytes_total"`
	MaxOutputBytes       int64 `json:"max_output_bytes"`
	MaxOutputsBytesTotal int64 `json:"max_outputs_bytes_total"`
}

// CallLimits are the bounds of the ordinary sandbox calls (python and shell exec, file read,
// write, upload and download), set by the operator (bay's limits settings). The timeouts are
// whole seconds: DefaultTimeout for a call that gives none, MaxTimeout the most one may ask.
// Key names the settings a limit comes from in messages ("limits.").
type CallLimits struct {
	DefaultTimeout int
	MaxTimeout     int
	IOCaps
}

// LimitsKey prefixes the setting names in the messages of the limit errors.
const LimitsKey = "limits."

// DefaultCallLimits are the limits before any setting: the wire contract's timeouts (30 s by
// default, at most 300 s), and the caps of the user's sandbox settings: 200 KiB of stdout and
// of stderr, 20 MiB in one file written or read, 50 MiB in one request or one answer.
func DefaultCallLimits() CallLimits {
	return CallLimits{DefaultTimeout: 30, MaxTimeout: 300, IOCaps: IOCaps{
		MaxStdoutBytes: 200 << 10, MaxStderrBytes: 200 << 10,
		MaxInputBytes: 20 << 20, MaxInputsBytesTotal: 50 << 20, MaxOutputBytes: 20 << 20, MaxOutputsBytesTotal: 50 << 20,
	}}
}

// TooLarge is the error of something over a size limit: payload_too_large (413), naming what,
// its size (when known, >= 0), the limit and the setting it comes from.
func TooLarge(what string, size, limit int64, setting string) *Error {
	msg := fmt.Sprintf("%s is more than the limit of %d bytes (%s)", what, limit, setting)
	d := map[string]any{"limit": setting, "max_bytes": limit}
	if size >= 0 {
		msg = fmt.Sprintf("%s is %d bytes, more than the limit of %d bytes (%s)", what, size, limit, setting)
		d["size"] = size
	}
	return Errorf(CodePayloadTooLarge, "%s", msg).WithDetails(d)
}

// CheckSize fails with TooLarge when size is over a positive limit.
func CheckSize(what string, size, limit int64, setting string) error {
	if limit > 0 && size > limit {
		return TooLarge(what, size, limit, setting)
	}
	return nil
}

// CutUTF8 keeps at most max bytes of s, cut at a character boundary (a character is never
// split), and reports whether anything was dropped. A max of 0 or less keeps everything.
func CutUTF8(s string, max int64) (string, bool) {
	if max <= 0 || int64(len(s)) <= max {
		return s, false
	}
	cut := int(max)
	// A character that starts at most UTFMax-1 bytes before the cut and runs past it is left
	// out whole; invalid UTF-8 is cut where it is.
	start := cut
	for start > 0 && cut-start < utf8.UTFMax-1 && !utf8.RuneStart(s[start]) {
		start--
	}
	if r, size := utf8.DecodeRuneInString(s[start:]); start < cut && (r != utf8.RuneError || size > 1) && start+size > cut {
		cut = start
	}
	return strings.Clone(s[:cut]), true
}
