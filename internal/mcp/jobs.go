package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

// Bounds of task_watch.
const (
	defaultWatchSeconds = 30
	maxWatchSeconds     = 120
	watchSettle         = 250 * time.Millisecond // more output is awaited this long after the first
	maxWatchBytes       = 64 << 10
)

var jobIDProp = prop{name: "job_id", typ: "string", desc: "The job (task) ID returned by start_job or run_cmd_async."}

// jobTools are the tools of seed 002's workflow: short commands run synchronously (run_cmd),
// long ones start as jobs (run_cmd_async, start_job) that are followed (task_status,
// task_watch).
func (s *server) jobTools() []toolDef {
	jobTimeout := prop{name: "timeout", typ: "integer", desc: "Job timeout in seconds. Defaults to the bay's maximum (24 h).", min: f64(1)}
	cwdProp := prop{name: "cwd", typ: "string", desc: "Working directory (relative to /workspace). Defaults to workspace root."}
	return []toolDef{
		{name: "run_cmd", desc: "Run a short shell command synchronously and return its output (up to the timeout, 300 s at most). For longer work use run_cmd_async.",
			props:    []prop{sandboxIDProp, {name: "command", typ: "string", desc: "Shell command to run."}, cwdProp, timeoutProp(), descProp, tagsProp},
			required: []string{"sandbox_id", "command"}, run: onSandbox(s.executeShell)},
		{name: "run_cmd_async", desc: "Start a shell command as a background job and return its job_id at once; follow it with task_watch, check it with task_status.",
			props: []prop{sandboxIDProp, {name: "command", typ: "string", desc: "Shell command to run."}, cwdProp, jobTimeout, descProp, tagsProp,
				{name: "idempotency_key", typ: "string", desc: "Optional: a retry with the same key returns the same job and never runs the command twice."}},
			required: []string{"sandbox_id", "command"}, run: onSandbox(s.startJob(bayapi.JobKindShell))},
		{name: "start_job", desc: "Start a long-running job (kind 'shell' with command, or 'python' with code) and return its job_id at once.",
			props: []prop{sandboxIDProp, {name: "kind", typ: "string", desc: "'shell' (default) or 'python'."},
				{name: "command", typ: "string", desc: "Shell command (kind shell)."}, {name: "code", typ: "string", desc: "Python program (kind python); runs in a new interpreter, not the execute_python kernel."},
				cwdProp, jobTimeout, descProp, tagsProp,
				{name: "idempotency_key", typ: "string", desc: "Optional: a retry with the same key returns the same job and never runs it twice."}},
			required: []string{"sandbox_id"}, run: onSandbox(s.startJob(""))},
		{name: "task_status", desc: "Get a job's status (running, succeeded, failed, timed_out, cancelled, lost), exit code, reason and output sizes.", readOnly: true,
			props: []prop{sandboxIDProp, jobIDProp}, required: []string{"sandbox_id", "job_id"}, run: onSandbox(s.taskStatus)},
		{name: "task_watch", desc: "Wait (at most wait_seconds) for a job's new output from the given byte offsets, and return it with the next offsets and the job's status. Call again with the next offsets until the job is no longer running.",
			readOnly: true,
			props: []prop{sandboxIDProp, jobIDProp,
				{name: "stdout_offset", typ: "integer", desc: "Byte offset of stdout to read from (next_stdout_offset of the previous call). Defaults to 0.", min: f64(0)},
				{name: "stderr_offset", typ: "integer", desc: "Byte offset of stderr to read from. Defaults to 0.", min: f64(0)},
				{name: "wait_seconds", typ: "integer", desc: fmt.Sprintf("Longest wait for new output (1-%d). Defaults to %d.", maxWatchSeconds, defaultWatchSeconds),
					min: f64(1), max: f64(maxWatchSeconds), def: defaultWatchSeconds}},
			required: []string{"sandbox_id", "job_id"}, run: onSandbox(s.taskWatch)},
		{name: "cancel_job", desc: "Cancel a running job: SIGTERM to its whole process group, SIGKILL after a grace period. (Shipyard extension.)", destructive: true, idempotent: true,
			props: []prop{sandboxIDProp, jobIDProp}, required: []string{"sandbox_id", "job_id"}, run: onSandbox(s.cancelJob)},
	}
}

// startJob starts a job of kind (""; the kind argument, default shell).
func (s *server) startJob(kind string) func(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	return func(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
		req := sdk.JobRequest{Kind: kind}
		if kind == "" {
			k, err := a.optStr("kind")
			if err != nil {
				return nil, err
			}
			switch k {
			case "", bayapi.JobKindShell:
				req.Kind = bayapi.JobKindShell
			case bayapi.JobKindPython:
				req.Kind = bayapi.JobKindPython
			default:
				return nil, invalid("field 'kind' must be 'shell' or 'python'")
			}
		}
		var err error
		if req.Kind == bayapi.JobKindPython {
			req.Code, err = a.requireStr("code")
		} else {
			req.Command, err = a.requireStr("command")
		}
		if err != nil {
			return nil, err
		}
		if req.Cwd, err = a.path("cwd", false, ""); err != nil {
			return nil, err
		}
		t, err := a.integer("timeout", 0, 1, -1)
		if err != nil {
			return nil, err
		}
		req.Timeout = time.Duration(t) * time.Second
		if req.Description, err = a.optStr("description"); err != nil {
			return nil, err
		}
		if req.Tags, err = a.optStr("tags"); err != nil {
			return nil, err
		}
		key, err := a.optStr("idempotency_key")
		if err != nil {
			return nil, err
		}
		var opts []sdk.CallOption
		if key != "" {
			opts = append(opts, sdk.WithIdempotencyKey(key))
		}
		j, err := c.StartJob(ctx, id, req, opts...)
		if err != nil {
			return nil, err
		}
		return textResult(fmt.Sprintf("Job started.\n\n**Job ID:** `%s`\n**Status:** %s\n\nFollow it with task_watch (job_id `%s`, offsets 0), check it with task_status.",
			j.JobID, j.Status, j.JobID)), nil
	}
}

func (a args) jobID() (string, error) { return a.requireStr("job_id") }

// jobText describes a job in a few lines.
func jobText(j *sdk.Job) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Job:** `%s` (%s)\n**Status:** %s\n", j.JobID, j.Kind, j.Status)
	if j.Exited {
		fmt.Fprintf(&b, "**Exit code:** %d\n", j.ExitCode)
	}
	if j.Reason != "" {
		fmt.Fprintf(&b, "**Reason:** %s\n", j.Reason)
	}
	fmt.Fprintf(&b, "**Output:** stdout %d bytes%s, stderr %d bytes%s\n", j.Stdout.Bytes, truncNote(j.Stdout.Truncated),
		j.Stderr.Bytes, truncNote(j.Stderr.Truncated))
	return b.String()
}

func truncNote(t bool) string {
	if t {
		return " (truncated: over the sandbox's cap)"
	}
	return ""
}

func (s *server) taskStatus(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	jid, err := a.jobID()
	if err != nil {
		return nil, err
	}
	j, err := c.Job(ctx, id, jid)
	if err != nil {
		return nil, err
	}
	return textResult(jobText(j)), nil
}

func (s *server) cancelJob(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	jid, err := a.jobID()
	if err != nil {
		return nil, err
	}
	j, err := c.Job(ctx, id, jid)
	if err != nil {
		return nil, err
	}
	if err := j.Cancel(ctx); err != nil {
		return nil, err
	}
	return textResult(jobText(j)), nil
}

var errWatchFull = errors.New("watch: enough output")

// taskWatch follows the job from the offsets until some output came (and settled), the job
// ended, or wait_seconds passed, and returns that output with the next offsets.
func (s *server) taskWatch(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	jid, err := a.jobID()
	if err != nil {
		return nil, err
	}
	so, err := a.integer("stdout_offset", 0, 0, -1)
	if err != nil {
		return nil, err
	}
	se, err := a.integer("stderr_offset", 0, 0, -1)
	if err != nil {
		return nil, err
	}
	wait, err := a.integer("wait_seconds", defaultWatchSeconds, 1, maxWatchSeconds)
	if err != nil {
		return nil, err
	}
	j, err := c.Job(ctx, id, jid)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(wait)*time.Second)
	defer cancel()
	var out, errOut strings.Builder
	next := [2]int64{so, se}
	var settle *time.Timer
	ferr := j.Follow(wctx, so, se, func(stream string, ch sdk.JobChunk) error {
		if stream == bayapi.JobEventStderr {
			errOut.WriteString(ch.Data)
			next[1] = ch.Next
		} else {
			out.WriteString(ch.Data)
			next[0] = ch.Next
		}
		if out.Len()+errOut.Len() >= maxWatchBytes {
			return errWatchFull
		}
		if settle == nil {
			settle = time.AfterFunc(watchSettle, cancel)
		}
		return nil
	})
	if settle != nil {
		settle.Stop()
	}
	switch {
	case ferr == nil, errors.Is(ferr, errWatchFull), errors.Is(ferr, context.DeadlineExceeded), errors.Is(ferr, context.Canceled) && ctx.Err() == nil:
	default:
		return nil, ferr
	}
	if !j.Done() {
		_ = j.Refresh(ctx)
	}
	var b strings.Builder
	b.WriteString(jobText(j))
	fmt.Fprintf(&b, "**next_stdout_offset:** %d\n**next_stderr_offset:** %d\n", next[0], next[1])
	if out.Len() > 0 {
		fmt.Fprintf(&b, "\n**stdout:**\n```\n%s\n```\n", s.truncate(out.String()))
	}
	if errOut.Len() > 0 {
		fmt.Fprintf(&b, "\n**stderr:**\n```\n%s\n```\n", s.truncate(errOut.String()))
	}
	if out.Len()+errOut.Len() == 0 {
		b.WriteString("\n(no new output)\n")
	}
	return textResult(b.String()), nil
}
