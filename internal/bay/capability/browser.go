package capability

import (
	"context"
	"strings"

	"github.com/shipyard-dev/shipyard/api/gullapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/gullclient"
)

// SetGull installs the browser runtime's client (before serving): browser calls go to the
// sandbox's container of runtime type gull.
func (s *Service) SetGull(c *gullclient.Client) {
	s.gull = c
	s.lc.SetRuntime(bay.RuntimeGull, c)
}

// BrowserParams are the inputs of ExecBrowser (validated: cmd non-empty, timeout 1..300).
type BrowserParams struct {
	Cmd         string
	Timeout     int
	Description *string
	Tags        *string
	Trace       TraceOptions
}

// errNoGull refuses browser calls on a bay without a gull client.
func errNoGull() error {
	return bay.Errorf(bay.CodeCapabilityNotSupported, "This bay has no browser runtime configured").
		WithDetails(map[string]any{"capability": bay.CapBrowser})
}

// ExecBrowser runs one agent-browser command in the sandbox's browser and records a history
// row of type browser. A command that fails (exit code != 0) is a successful call with
// success false; its stderr is the error.
func (s *Service) ExecBrowser(ctx context.Context, owner, id string, p BrowserParams) (*bay.BrowserResult, error) {
	if s.gull == nil {
		return nil, errNoGull()
	}
	if err := s.checkTraces(p.Trace); err != nil {
		return nil, err
	}
	var r *gullapi.ExecResponse
	var ms int64
	// Not resent: a browser command has effects (a click, a form sent).
	sb, sess, err := s.invoke(ctx, owner, id, bay.CapBrowser, callOpts{watch: true}, timed(&ms, func(ctx context.Context, ep string) (err error) {
		r, err = s.gull.Exec(ctx, ep, p.Cmd, p.Timeout)
		return err
	}))
	if err != nil {
		return nil, err
	}
	res := &bay.BrowserResult{
		Success: r.ExitCode == 0, Output: r.Stdout, Error: nonEmpty(r.Stderr), ExitCode: r.ExitCode, ExecutionTimeMS: ms,
	}
	out := r.Stdout
	trace := execTrace{Kind: "browser_exec_trace", Steps: []traceStep{{Kind: "individual_action", Cmd: p.Cmd,
		Stdout: r.Stdout, Stderr: r.Stderr, ExitCode: r.ExitCode}}}
	e := s.newExecution(sb, sess, bay.ExecBrowser, p.Cmd, res.Success, ms, &out, res.Error, p.Description, p.Tags)
	res.ExecutionID, res.TraceRef, err = s.recordBrowser(ctx, e, p.Trace, trace)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// BrowserBatchParams are the inputs of ExecBrowserBatch (validated: at least one command,
// timeout 1..600 as the budget of the whole batch).
type BrowserBatchParams struct {
	Commands    []string
	Timeout     int
	StopOnError bool
	Description *string
	Tags        *string
	Trace       TraceOptions
}

// ExecBrowserBatch runs commands in order in the sandbox's browser within one overall budget
// and records one history row of type browser_batch (code: the commands joined by newlines;
// output and error: the non-empty stdouts and stderrs of the steps, joined likewise).
func (s *Service) ExecBrowserBatch(ctx context.Context, owner, id string, p BrowserBatchParams) (*bay.BrowserBatchResult, error) {
	if s.gull == nil {
		return nil, errNoGull()
	}
	if err := s.checkTraces(p.Trace); err != nil {
		return nil, err
	}
	var r *gullapi.ExecBatchResponse
	var ms int64
	sb, sess, err := s.invoke(ctx, owner, id, bay.CapBrowser, callOpts{watch: true}, timed(&ms, func(ctx context.Context, ep string) (err error) {
		r, err = s.gull.ExecBatch(ctx, ep, p.Commands, p.Timeout, p.StopOnError)
		return err
	}))
	if err != nil {
		return nil, err
	}
	res := &bay.BrowserBatchResult{
		Steps: make([]bay.BrowserStep, 0, len(r.Results)), TotalSteps: r.TotalSteps,
		CompletedSteps: r.CompletedSteps, Success: r.Success, DurationMS: r.DurationMS, ExecutionTimeMS: ms,
	}
	if res.TotalSteps == 0 {
		res.TotalSteps = len(p.Commands)
	}
	var outs, errs []string
	trace := batchTrace{Kind: "browser_batch_trace", Steps: []traceStep{}, TotalSteps: res.TotalSteps,
		CompletedSteps: res.CompletedSteps, Success: res.Success, DurationMS: res.DurationMS}
	for _, st := range r.Results {
		res.Steps = append(res.Steps, bay.BrowserStep{Cmd: st.Cmd, Stdout: st.Stdout, Stderr: st.Stderr,
			ExitCode: st.ExitCode, StepIndex: st.StepIndex, DurationMS: st.DurationMS})
		d := st.DurationMS
		trace.Steps = append(trace.Steps, traceStep{Kind: "individual_action", Cmd: st.Cmd, Stdout: st.Stdout, Stderr: st.Stderr,
			ExitCode: st.ExitCode, StepIndex: st.StepIndex, DurationMS: &d})
		if o := strings.TrimSpace(st.Stdout); o != "" {
			outs = append(outs, o)
		}
		if e := strings.TrimSpace(st.Stderr); e != "" {
			errs = append(errs, e)
		}
	}
	out := strings.Join(outs, "\n")
	e := s.newExecution(sb, sess, bay.ExecBrowserBatch, strings.Join(p.Commands, "\n"),
		res.Success, ms, &out, nonEmpty(strings.Join(errs, "\n")), p.Description, p.Tags)
	res.ExecutionID, res.TraceRef, err = s.recordBrowser(ctx, e, p.Trace, trace)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// nonEmpty is nil for "", else a pointer to s.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
