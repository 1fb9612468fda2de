package capability

import (
	"context"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
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
	res := &bay.PythonResult{
		Success: r.Success, Text: r.Output.Text, Images: r.Output.Images, Error: r.Error,
		ExecutionCount: r.ExecutionCount, ExecutionTimeMS: ms,
		KernelRestarted: r.KernelRestarted, KernelNotice: r.KernelNotice,
		OutputTruncated: r.TextTruncated, ImagesTruncated: r.ImagesTruncated, Notice: r.Notice, TimedOut: r.TimedOut,
	}
	if p.IncludeCode {
		res.Code = &p.Code
	}
	out := r.Output.Text
	e := s.newExecution(sb, sess, bay.ExecPython, p.Code, r.Success, ms, &out, r.Error, p.Description, p.Tags)
	e.Images = r.Output.Images // a plot stays in the history as the call returned it
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
