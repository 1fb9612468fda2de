package jobs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
)

// maxExecStreamKept bounds the bytes of each stream a streamed exec keeps for its final answer,
// as ship keeps for a plain exec.
const maxExecStreamKept = 1 << 20

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

// ExecShellStream runs a shell command as a plain exec does, but hands its output to emit as it
// comes (stream "stdout" or "stderr"), then returns the answer a plain exec gives, recorded in
// the history. Underneath it is a ship job no one lists (id "exec-..."); the caller going away
// cancels it, as it would kill a plain exec.
func (s *Service) ExecShellStream(ctx context.Context, owner, sandboxID string, p ExecParams, emit func(stream string, c shipapi.StreamChunk) error) (*bayapi.ShellExecResponse, error) {
	id := "exec-" + strings.TrimPrefix(bay.NewID(bay.PrefixJob), bay.PrefixJob+"-")
	if p.IdempotencyKey != "" {
		id = "exec-" + strings.TrimPrefix(keyedID(owner, sandboxID, "exec\x00"+p.IdempotencyKey), bay.PrefixJob+"-")
	}
	var ep string
	began := time.Now()
	sessID, err := s.rt.CallRuntime(ctx, owner, sandboxID, bayapi.CapShell, func(ctx context.Context, e string) error {
		ep = e
		_, err := s.ship.StartJob(ctx, e, shipapi.StartJobRequest{ID: id, Kind: shipapi.JobKindShell, Command: p.Command, Cwd: p.Cwd,
			TimeoutSeconds: p.Timeout.Seconds()})
		return err
	})
	if err != nil {
		return nil, err
	}
	var final *shipapi.JobInfo
	defer func() {
		// A keyed execution runs on for the retry that will attach to it.
		if final == nil && p.IdempotencyKey == "" {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if _, err := s.ship.CancelJob(dctx, ep, id); err != nil {
				s.log.Warn("streamed exec: cannot cancel after the caller left", "sandbox_id", sandboxID, "exec", id, "err", err)
			}
		}
	}()
	var offs [2]int64
	var kept [2]strings.Builder
	var cut [2]bool
	for final == nil {
		o, err := s.ship.JobOutput(ctx, ep, id, offs[0], offs[1], 15*time.Second, 0)
		if err != nil {
			return nil, err
		}
		for i, c := range []shipapi.StreamChunk{o.Stdout, o.Stderr} {
			if c.Next <= c.Offset {
				continue
			}
			offs[i] = c.Next
			if room := maxExecStreamKept - kept[i].Len(); room >= len(c.Data) {
				kept[i].WriteString(c.Data)
			} else {
				kept[i].WriteString(c.Data[:max(room, 0)])
				cut[i] = true
			}
			if err := emit([]string{bayapi.JobEventStdout, bayapi.JobEventStderr}[i], c); err != nil {
				return nil, err
			}
		}
		if o.Job.Status != shipapi.JobRunning && offs[0] >= o.Job.Stdout.Bytes && offs[1] >= o.Job.Stderr.Bytes {
			final = &o.Job
		}
	}
	ms := time.Since(began).Milliseconds()
	resp := &bayapi.ShellExecResponse{
		Output: strings.TrimSpace(kept[0].String()), ExitCode: -1, ExecutionTimeMS: ms, Notice: final.Notice,
		StdoutTruncated: cut[0] || final.Stdout.Truncated, StderrTruncated: cut[1] || final.Stderr.Truncated,
	}
	if final.ExitCode != nil {
		resp.ExitCode = *final.ExitCode
	}
	var errText *string
	switch {
	case final.Status == shipapi.JobTimedOut:
		msg := fmt.Sprintf("Command timed out after %d seconds", int64(p.Timeout.Seconds()))
		errText, resp.ExitCode = &msg, -1
	case strings.TrimSpace(kept[1].String()) != "":
		se := strings.TrimSpace(kept[1].String())
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
	execID := bay.NewID(bay.PrefixExecution)
	if p.IdempotencyKey != "" {
		// One history entry however many retries: its id is the execution's.
		execID = bay.PrefixExecution + "-" + strings.TrimPrefix(id, "exec-")
	}
	e := &bay.Execution{ID: execID, Owner: owner, SandboxID: sandboxID, SessionID: sessID,
		ExecType: bayapi.ExecShell, Code: p.Command, Success: resp.Success, ExecutionTimeMS: ms, Output: &out, Error: errText,
		Description: p.Description, Tags: p.Tags, CreatedAt: s.cfg.Now()}
	// Detached: the command ran; its record must not be lost to a caller that hangs up now.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err = s.store.Tx(dctx, func(tx bay.Tx) error { return tx.InsertExecution(dctx, e) })
	if err != nil && p.IdempotencyKey != "" && bay.IsConflict(err) {
		err = nil // a retry recorded it already
	}
	if err != nil {
		return nil, bay.Errorf(bay.CodeInternal, "Failed to record execution history").WithCause(err)
	}
	resp.ExecutionID = e.ID
	return resp, nil
}
