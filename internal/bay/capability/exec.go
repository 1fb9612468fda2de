package capability

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
)

// PythonParams are the inputs of ExecPython (timeout already validated 1..300).
type PythonParams struct {
	Code        string
	Timeout     int
	IncludeCode bool
	Description *string
	Tags        *string
}

// timed wraps a runtime call so that *ms is the duration of its last attempt: the execution
// time reported covers the runtime call only, not a cold start.
func timed(ms *int64, call func(ctx context.Context, ep string) error) func(ctx context.Context, ep string) error {
	return func(ctx context.Context, ep string) error {
		began := time.Now()
		err := call(ctx, ep)
		*ms = time.Since(began).Milliseconds()
		return err
	}
}

// ExecPython runs code in the sandbox's kernel and records an execution-history row after the
// call returns (a call that fails with an error records nothing).
func (s *Service) ExecPython(ctx context.Context, owner, id string, p PythonParams) (*bay.PythonResult, error) {
	var r *shipapi.ExecPythonResponse
	var ms int64
	sb, sess, err := s.invoke(ctx, owner, id, bay.CapPython, callOpts{resend: true, watch: true}, timed(&ms, func(ctx context.Context, ep string) (err error) {
		r, err = s.ship.ExecPython(ctx, ep, shipapi.ExecPythonRequest{Code: p.Code, Timeout: p.Timeout})
		return err
	}))
	if err != nil {
		return nil, err
	}
	res := shipclient.PythonResult(r)
	res.ExecutionTimeMS = ms
	capPython(res, s.cfg.Limits.IOCaps)
	if p.IncludeCode {
		res.Code = &p.Code
	}
	out := res.Text
	e := s.newExecution(sb, sess, bay.ExecPython, p.Code, r.Success, ms, &out, res.Error, p.Description, p.Tags)
	e.Images = res.Images // a plot stays in the history as the call returned it
	res.ExecutionID, err = s.insertExecution(ctx, e)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// ShellParams are the inputs of ExecShell (timeout validated; Cwd already normalised).
type ShellParams struct {
	Command     string
	Timeout     int
	Cwd         *string
	IncludeCode bool
	Description *string
	Tags        *string
}

// ExecShell runs a command and records an execution-history row. The error is ship's error,
// or the command's stderr when there is none.
func (s *Service) ExecShell(ctx context.Context, owner, id string, p ShellParams) (*bay.ShellResult, error) {
	var r *shipapi.ExecShellResponse
	var ms int64
	sb, sess, err := s.invoke(ctx, owner, id, bay.CapShell, callOpts{resend: true, watch: true}, timed(&ms, func(ctx context.Context, ep string) (err error) {
		t := p.Timeout
		r, err = s.ship.ExecShell(ctx, ep, shipapi.ExecShellRequest{Command: p.Command, Timeout: &t, Cwd: p.Cwd})
		return err
	}))
	if err != nil {
		return nil, err
	}
	errText := r.Error
	if errText == nil || *errText == "" {
		errText = nonEmpty(strings.TrimSpace(r.Stderr))
	}
	res := &bay.ShellResult{
		Success: r.ReturnCode == 0 && r.Success, Output: strings.TrimSpace(r.Stdout), Error: errText,
		ExitCode: r.ReturnCode, ExecutionTimeMS: ms, StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated, Notice: r.Notice,
		TimedOut: r.TimedOut,
	}
	capShell(res, s.cfg.Limits.IOCaps)
	if p.IncludeCode {
		res.Command = &p.Command
	}
	out := res.Output
	res.ExecutionID, err = s.recordExecution(ctx, sb, sess, bay.ExecShell, p.Command, res.Success, ms, &out, errText, p.Description, p.Tags)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// capPython cuts a python result to the caps: the text at MaxStdoutBytes, the error at
// MaxStderrBytes, then drops the images from the last while text, error and images together
// are over MaxOutputsBytesTotal. Each cut sets its flag.
func capPython(r *bay.PythonResult, c bay.IOCaps) {
	cutStreams(&r.Text, &r.OutputTruncated, &r.Error, &r.ErrorTruncated, c)
	// The streams apart are bounded like the merged text they repeat.
	var cut bool
	r.Stdout, cut = bay.CutUTF8(r.Stdout, c.MaxStdoutBytes)
	r.OutputTruncated = r.OutputTruncated || cut
	r.Stderr, cut = bay.CutUTF8(r.Stderr, c.MaxStderrBytes)
	r.ErrorTruncated = r.ErrorTruncated || cut
	if c.MaxOutputsBytesTotal <= 0 {
		return
	}
	total := int64(len(r.Text))
	if r.Error != nil {
		total += int64(len(*r.Error))
	}
	for i, img := range r.Images {
		for _, v := range img {
			total += int64(len(v))
		}
		if total > c.MaxOutputsBytesTotal {
			r.Images, r.ImagesTruncated = slices.Clone(r.Images[:i]), true
			return
		}
	}
}

// capShell cuts a shell result's output at MaxStdoutBytes and its error at MaxStderrBytes.
func capShell(r *bay.ShellResult, c bay.IOCaps) {
	cutStreams(&r.Output, &r.StdoutTruncated, &r.Error, &r.StderrTruncated, c)
}

// cutStreams cuts out at MaxStdoutBytes and *errText at MaxStderrBytes, setting each flag
// when it cut (a flag already set stays set).
func cutStreams(out *string, outCut *bool, errText **string, errCut *bool, c bay.IOCaps) {
	var cut bool
	*out, cut = bay.CutUTF8(*out, c.MaxStdoutBytes)
	*outCut = *outCut || cut
	if *errText != nil {
		e, cut := bay.CutUTF8(**errText, c.MaxStderrBytes)
		*errText, *errCut = &e, *errCut || cut
	}
}
