package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
)

// maxExecStreamKept bounds the bytes of each stream a streamed exec keeps for its final answer,
// as ship keeps for a plain exec.
const maxExecStreamKept = 1 << 20

// maxDisplayLine bounds one rich output of a streamed python exec (a line of ship's display
// stream): a larger one is not streamed (the final answer still has its image and text).
const maxDisplayLine = 32 << 20

// Emit receives a streamed exec's events as they come: bayapi.JobEventStdout and
// JobEventStderr with a bayapi.JobChunk, bayapi.ExecEventDisplay with a
// bayapi.ExecDisplayEvent. An error ends the exec as the caller leaving does.
type Emit func(event string, v any) error

// ExecParams are the inputs of ExecShellStream (validated by the caller, timeout 1..300 s).
type ExecParams struct {
	Command     string
	Cwd         *string
	Timeout     time.Duration
	IncludeCode bool
	Description *string
	Tags        *string
	// IdempotencyKey names the execution: a retry with the same key (same owner and sandbox)
	// attaches to it while it runs, or returns its answer once it ended, and never runs the
	// command again (as long as ship keeps the execution: its 100 most recent jobs).
	IdempotencyKey string
}

// PythonParams are the inputs of ExecPythonStream (validated by the caller, timeout 1..300 s).
type PythonParams struct {
	Code        string
	Timeout     time.Duration
	IncludeCode bool
	Description *string
	Tags        *string
	// IdempotencyKey: as ExecParams'; keys of python and shell execs are apart.
	IdempotencyKey string
}

// execRun is an execution run as a ship job, followed to its end.
type execRun struct {
	id     string // the ship job's, "exec-..."
	sessID string
	ms     int64
	kept   [2]strings.Builder // stdout, stderr, up to maxExecStreamKept
	cut    [2]bool
	end    *shipapi.JobOutputResponse // the read that found the job ended
}

// runExec runs req as a ship job no one lists (id "exec-..."), on the container serving
// capability, and hands its output to emit as it comes. With a key the job's id derives from
// owner, sandbox and scope+key, so a retry (on any bay) attaches to the same job, which ship
// never starts twice; it then runs on when the caller leaves, for the retry to find. Without
// one, the caller leaving cancels it, as it would end a plain exec.
func (s *Service) runExec(ctx context.Context, owner, sandboxID, capability, scope, key string, req shipapi.StartJobRequest, emit Emit) (*execRun, error) {
	run := &execRun{id: "exec-" + strings.TrimPrefix(bay.NewID(bay.PrefixJob), bay.PrefixJob+"-")}
	if key != "" {
		run.id = "exec-" + strings.TrimPrefix(keyedID(owner, sandboxID, scope+"\x00"+key), bay.PrefixJob+"-")
	}
	req.ID = run.id
	var ep string
	began := time.Now()
	var err error
	run.sessID, err = s.rt.CallRuntime(ctx, owner, sandboxID, capability, func(ctx context.Context, e string) error {
		ep = e
		_, err := s.ship.StartJob(ctx, e, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if run.end == nil && key == "" {
			dctx, cancel := bay.Detached(ctx, 30*time.Second)
			defer cancel()
			if _, err := s.ship.CancelJob(dctx, ep, run.id); err != nil {
				s.log.Warn("streamed exec: cannot cancel after the caller left", "sandbox_id", sandboxID, "exec", run.id, "err", err)
			}
		}
	}()
	var offs [3]int64
	var line []byte // a display line not yet whole
	for run.end == nil {
		o, err := s.ship.JobOutput(ctx, ep, run.id, offs, 15*time.Second, 0)
		if err != nil {
			return nil, err
		}
		for i, c := range []shipapi.StreamChunk{o.Stdout, o.Stderr} {
			if c.Next <= c.Offset {
				continue
			}
			offs[i] = c.Next
			if room := maxExecStreamKept - run.kept[i].Len(); room >= len(c.Data) {
				run.kept[i].WriteString(c.Data)
			} else {
				run.kept[i].WriteString(c.Data[:max(room, 0)])
				run.cut[i] = true
			}
			if err := emit([]string{bayapi.JobEventStdout, bayapi.JobEventStderr}[i], bayapi.JobChunk{Offset: c.Offset, Next: c.Next, Data: c.Data}); err != nil {
				return nil, err
			}
		}
		if d := o.Display; d != nil && d.Next > d.Offset {
			offs[2] = d.Next
			if line, err = emitDisplay(line, d.Data, emit); err != nil {
				return nil, err
			}
		}
		j := o.Job
		if j.Status != shipapi.JobRunning && offs[0] >= j.Stdout.Bytes && offs[1] >= j.Stderr.Bytes && (j.Display == nil || offs[2] >= j.Display.Bytes) {
			run.end = o
		}
	}
	run.ms = time.Since(began).Milliseconds()
	return run, nil
}

// emitDisplay emits each whole line of partial+data as a display event and returns what is
// left of a line not yet whole (dropped past maxDisplayLine).
func emitDisplay(partial []byte, data string, emit Emit) ([]byte, error) {
	buf := append(partial, data...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		var ev bayapi.ExecDisplayEvent
		if len(buf[:i]) <= maxDisplayLine && json.Unmarshal(buf[:i], &ev) == nil {
			if err := emit(bayapi.ExecEventDisplay, ev); err != nil {
				return nil, err
			}
		}
		buf = buf[i+1:]
	}
	if len(buf) > maxDisplayLine {
		buf = buf[:maxDisplayLine+1] // still too long once it ends: only its end is awaited
	}
	return buf, nil
}

// keyedExecutionID is the history id of the execution run as ship job id when it has a key:
// one entry however many retries.
func keyedExecutionID(keyed bool, jobID string) string {
	if !keyed {
		return bay.NewID(bay.PrefixExecution)
	}
	return bay.PrefixExecution + "-" + strings.TrimPrefix(jobID, "exec-")
}

// record writes the history entry e of an execution that ran; a keyed one recorded already
// (by a retry) is not an error.
func (s *Service) record(ctx context.Context, e *bay.Execution, keyed bool) error {
	// Detached: the code ran; its record must not be lost to a caller that hangs up now.
	dctx, cancel := bay.Detached(ctx, 10*time.Second)
	defer cancel()
	err := s.store.Tx(dctx, func(tx bay.Tx) error { return tx.InsertExecution(dctx, e) })
	if err != nil && keyed && bay.IsConflict(err) {
		err = nil
	}
	if err != nil {
		return bay.Errorf(bay.CodeInternal, "Failed to record execution history").WithCause(err)
	}
	return nil
}

// ExecShellStream runs a shell command as a plain exec does, but hands its output to emit as it
// comes, then returns the answer a plain exec gives, recorded in the history.
func (s *Service) ExecShellStream(ctx context.Context, owner, sandboxID string, p ExecParams, emit Emit) (*bayapi.ShellExecResponse, error) {
	run, err := s.runExec(ctx, owner, sandboxID, bayapi.CapShell, "exec", p.IdempotencyKey, shipapi.StartJobRequest{
		Kind: shipapi.JobKindShell, Command: p.Command, Cwd: p.Cwd, TimeoutSeconds: p.Timeout.Seconds()}, emit)
	if err != nil {
		return nil, err
	}
	final := run.end.Job
	resp := &bayapi.ShellExecResponse{
		Output: strings.TrimSpace(run.kept[0].String()), ExitCode: -1, ExecutionTimeMS: run.ms, Notice: final.Notice,
		StdoutTruncated: run.cut[0] || final.Stdout.Truncated, StderrTruncated: run.cut[1] || final.Stderr.Truncated,
	}
	if final.ExitCode != nil {
		resp.ExitCode = *final.ExitCode
	}
	var errText *string
	switch {
	case final.Status == shipapi.JobTimedOut:
		msg := fmt.Sprintf("Command timed out after %d seconds", int64(p.Timeout.Seconds()))
		errText, resp.ExitCode = &msg, -1
	case strings.TrimSpace(run.kept[1].String()) != "":
		se := strings.TrimSpace(run.kept[1].String())
		errText = &se
	case final.Status == shipapi.JobLost:
		errText = &final.Reason
	}
	resp.Error = errText
	resp.Success = final.Status == shipapi.JobSucceeded
	if p.IncludeCode {
		c := p.Command
		resp.Command = &c
	}
	out := resp.Output
	e := &bay.Execution{ID: keyedExecutionID(p.IdempotencyKey != "", run.id), Owner: owner, SandboxID: sandboxID, SessionID: run.sessID,
		ExecType: bayapi.ExecShell, Code: p.Command, Success: resp.Success, ExecutionTimeMS: run.ms, Output: &out, Error: errText,
		Description: p.Description, Tags: p.Tags, CreatedAt: s.cfg.Now()}
	if err := s.record(ctx, e, p.IdempotencyKey != ""); err != nil {
		return nil, err
	}
	resp.ExecutionID = e.ID
	return resp, nil
}

// ExecPythonStream runs a cell in the sandbox's kernel as a plain python exec does (same kernel,
// same state), but hands its stdout, stderr and rich outputs to emit as the kernel publishes
// them, then returns the answer a plain exec gives, recorded in the history.
func (s *Service) ExecPythonStream(ctx context.Context, owner, sandboxID string, p PythonParams, emit Emit) (*bay.PythonResult, error) {
	run, err := s.runExec(ctx, owner, sandboxID, bayapi.CapPython, "python", p.IdempotencyKey, shipapi.StartJobRequest{
		Kind: shipapi.JobKindKernel, Code: p.Code, TimeoutSeconds: p.Timeout.Seconds()}, emit)
	if err != nil {
		return nil, err
	}
	switch {
	case run.end.Error != nil:
		return nil, shipclient.CellError(*run.end.Error)
	case run.end.Python == nil:
		return nil, bay.Errorf(bay.CodeShipError, "The runtime ended the execution without an answer (%s)", run.end.Job.Status).
			WithCause(fmt.Errorf("kernel job %s ended %s: %s", run.id, run.end.Job.Status, run.end.Job.Reason))
	}
	res := shipclient.PythonResult(run.end.Python)
	res.ExecutionTimeMS = run.ms
	if p.IncludeCode {
		c := p.Code
		res.Code = &c
	}
	out := res.Text
	e := &bay.Execution{ID: keyedExecutionID(p.IdempotencyKey != "", run.id), Owner: owner, SandboxID: sandboxID, SessionID: run.sessID,
		ExecType: bayapi.ExecPython, Code: p.Code, Success: res.Success, ExecutionTimeMS: run.ms, Output: &out, Error: res.Error,
		Description: p.Description, Tags: p.Tags, Images: res.Images, CreatedAt: s.cfg.Now()}
	if err := s.record(ctx, e, p.IdempotencyKey != ""); err != nil {
		return nil, err
	}
	res.ExecutionID = e.ID
	return res, nil
}
