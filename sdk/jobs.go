package sdk

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// JobRequest starts a job: Kind "shell" with Command, or "python" with Code.
type JobRequest struct {
	Kind        string
	Command     string
	Code        string
	Cwd         string
	Env         map[string]string
	Timeout     time.Duration // whole seconds, rounded up; 0: bay's maximum (jobs.max_duration)
	Description string
	Tags        string
}

// StartJob starts a job (POST .../jobs, 202) and returns its handle. With WithIdempotencyKey,
// a retry returns the job the key started (running or ended) and never runs the command twice.
func (c *Client) StartJob(ctx context.Context, sandboxID string, req JobRequest, opts ...CallOption) (*Job, error) {
	if err := checkID("sandbox", sandboxID); err != nil {
		return nil, err
	}
	o := applyCallOptions(opts)
	body := bayapi.StartJobRequest{Kind: req.Kind, Cwd: optStr(req.Cwd), Env: req.Env, Timeout: optSeconds(req.Timeout),
		Description: optStr(req.Description), Tags: optStr(req.Tags)}
	if req.Kind == bayapi.JobKindPython {
		body.Code = &req.Code
	} else {
		body.Command = &req.Command
	}
	var out bayapi.StartJobResponse
	if err := c.doJSON(ctx, &request{method: http.MethodPost, path: sbPath(bayapi.PathJobs, sandboxID), jsonBody: body,
		idemKey: o.idemKey, requestID: o.requestID}, &out); err != nil {
		return nil, err
	}
	return c.Job(ctx, sandboxID, out.JobID)
}

func jobPath(pattern, sandboxID, jobID string) string {
	return strings.Replace(sbPath(pattern, sandboxID), "{job_id}", esc(jobID), 1)
}

// Job returns the handle of an existing job (GET .../jobs/{job_id}).
func (c *Client) Job(ctx context.Context, sandboxID, jobID string) (*Job, error) {
	if err := errors.Join(checkID("sandbox", sandboxID), checkID("job", jobID)); err != nil {
		return nil, err
	}
	j := &Job{c: c}
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: jobPath(bayapi.PathJob, sandboxID, jobID)}, j); err != nil {
		return nil, err
	}
	return j, nil
}

// ListJobs lists a sandbox's jobs, newest first; status "" lists all.
func (c *Client) ListJobs(ctx context.Context, sandboxID, status string, limit, offset int) (*JobList, error) {
	if err := checkID("sandbox", sandboxID); err != nil {
		return nil, err
	}
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	var out JobList
	if err := c.doJSON(ctx, &request{method: http.MethodGet, path: sbPath(bayapi.PathJobs, sandboxID), query: q}, &out); err != nil {
		return nil, err
	}
	for _, j := range out.Items {
		j.c = c
	}
	return &out, nil
}

// Refresh re-reads the job.
func (j *Job) Refresh(ctx context.Context) error {
	n, err := j.c.Job(ctx, j.SandboxID, j.JobID)
	if err != nil {
		return err
	}
	*j = *n
	return nil
}

// Done reports whether the job's last known status is final.
func (j *Job) Done() bool { return j.Status != bayapi.JobRunning }

// Cancel terminates the job's process group and updates the handle with its end.
func (j *Job) Cancel(ctx context.Context) error {
	return j.c.doJSON(ctx, &request{method: http.MethodPost, path: jobPath(bayapi.PathJobCancel, j.SandboxID, j.JobID)}, j)
}

// Output returns what the job's streams hold from the offsets (at most 1 MiB each; read on
// from the chunks' Next).
func (j *Job) Output(ctx context.Context, stdoutOffset, stderrOffset int64) (*JobOutput, error) {
	q := url.Values{"stdout_offset": {strconv.FormatInt(stdoutOffset, 10)}, "stderr_offset": {strconv.FormatInt(stderrOffset, 10)}}
	var out JobOutput
	if err := j.c.doJSON(ctx, &request{method: http.MethodGet, path: jobPath(bayapi.PathJobOutput, j.SandboxID, j.JobID), query: q}, &out); err != nil {
		return nil, err
	}
	out.Job.c = j.c
	return &out, nil
}

// Follow streams the job's output from the offsets as it is printed, calling fn with each
// chunk (stream "stdout" or "stderr"), until the job ends; it then updates the handle and
// returns. A broken stream is resumed where it stopped (at most 5 times in a row).
func (j *Job) Follow(ctx context.Context, stdoutOffset, stderrOffset int64, fn func(stream string, c JobChunk) error) error {
	offs := [2]int64{stdoutOffset, stderrOffset}
	for failures := 0; ; {
		ended, err := j.followOnce(ctx, &offs, fn)
		switch {
		case ended:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && errors.As(err, new(*Error)):
			return err
		}
		if failures++; failures > 5 {
			return fmt.Errorf("sdk: follow job %s: %w", j.JobID, err)
		}
		time.Sleep(time.Duration(failures) * 200 * time.Millisecond)
	}
}

// followOnce reads one event stream; it reports whether the end event arrived.
func (j *Job) followOnce(ctx context.Context, offs *[2]int64, fn func(string, JobChunk) error) (bool, error) {
	h := http.Header{"Accept": {"text/event-stream"}, "Last-Event-ID": {fmt.Sprintf("%d:%d", offs[0], offs[1])}}
	resp, err := j.c.send(ctx, &request{method: http.MethodGet, path: jobPath(bayapi.PathJobOutput, j.SandboxID, j.JobID),
		query: url.Values{"follow": {"true"}}, header: h, stream: true})
	if err != nil {
		return false, err
	}
	defer resp.release()
	done := false
	err = readEvents(resp.Body, func(event string, data []byte) (bool, error) {
		switch event {
		case bayapi.JobEventStdout, bayapi.JobEventStderr:
			var c JobChunk
			if err := json.Unmarshal(data, &c); err != nil {
				return false, fmt.Errorf("sdk: job output event: %w", err)
			}
			i := 0
			if event == bayapi.JobEventStderr {
				i = 1
			}
			offs[i] = c.Next
			if fn != nil {
				if err := fn(event, c); err != nil {
					done = true
					return true, err
				}
			}
		case bayapi.JobEventEnd:
			if err := json.Unmarshal(data, j); err != nil {
				return false, fmt.Errorf("sdk: job end event: %w", err)
			}
			done = true
			return true, nil
		case "error":
			done = true
			return true, decodeError(http.StatusBadGateway, "", data)
		}
		return false, nil
	})
	if err == nil && !done {
		err = errors.New("event stream ended before the job")
	}
	return done, err
}

// readEvents reads a Server-Sent Events stream and calls fn with each event's name and data
// line until fn says it is done, fn fails, or the stream ends.
func readEvents(body io.Reader, fn func(event string, data []byte) (done bool, err error)) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			event = name
			continue
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			if done, err := fn(event, []byte(data)); done || err != nil {
				return err
			}
		}
	}
	return sc.Err()
}

// Wait follows the job to its end without looking at its output.
func (j *Job) Wait(ctx context.Context) error {
	return j.Follow(ctx, 1<<62, 1<<62, nil)
}

// StartJob see Client.StartJob.
func (s *Sandbox) StartJob(ctx context.Context, req JobRequest, opts ...CallOption) (*Job, error) {
	return s.c.StartJob(ctx, s.ID, req, opts...)
}

// ExecShellStream runs a shell command like ExecShell, but calls fn with its output as it is
// printed (stream "stdout" or "stderr"), then returns the same answer. With
// WithIdempotencyKey a retry attaches to the execution or returns its answer, and never runs
// the command twice.
func (c *Client) ExecShellStream(ctx context.Context, id string, req ShellRequest, fn func(stream string, data string) error, opts ...CallOption) (*ShellResult, error) {
	body := bayapi.ShellExecRequest{Command: &req.Command, Timeout: optSeconds(req.Timeout), Cwd: optStr(req.Cwd),
		IncludeCode: req.IncludeCode, Description: optStr(req.Description), Tags: optStr(req.Tags)}
	return execStream[ShellResult](ctx, c, id, bayapi.PathShellExec, body, func(ev ExecEvent) error {
		if fn == nil || ev.Display != nil {
			return nil
		}
		return fn(ev.Stream, ev.Text)
	}, opts)
}

// ExecEvent is one event of a streamed exec: a chunk of Text printed on Stream ("stdout" or
// "stderr"), or (python) a rich output the kernel published, Display.
type ExecEvent struct {
	Stream  string
	Text    string
	Display *Display
}

// ExecPythonStream runs code like ExecPython (in the sandbox's kernel, with its state), but
// calls fn with its stdout, stderr and rich outputs as the kernel publishes them, then returns
// the same answer. With WithIdempotencyKey a retry attaches to the execution or returns its
// answer, and never runs the code twice.
func (c *Client) ExecPythonStream(ctx context.Context, id string, req PythonRequest, fn func(ExecEvent) error, opts ...CallOption) (*PythonResult, error) {
	body := bayapi.PythonExecRequest{Code: &req.Code, Timeout: optSeconds(req.Timeout), IncludeCode: req.IncludeCode,
		Description: optStr(req.Description), Tags: optStr(req.Tags)}
	return execStream[PythonResult](ctx, c, id, bayapi.PathPythonExec, body, fn, opts)
}

// execStream posts body to the exec path of sandbox id asking for Server-Sent Events, hands
// each output event to fn and returns the result event's answer.
func execStream[T any](ctx context.Context, c *Client, id, path string, body any, fn func(ExecEvent) error, opts []CallOption) (*T, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	o := applyCallOptions(opts)
	resp, err := c.send(ctx, &request{method: http.MethodPost, path: sbPath(path, id), jsonBody: body,
		header: http.Header{"Accept": {"text/event-stream"}}, idemKey: o.idemKey, requestID: o.requestID, stream: true})
	if err != nil {
		return nil, err
	}
	defer resp.release()
	var out *T
	err = readEvents(resp.Body, func(event string, data []byte) (bool, error) {
		switch event {
		case bayapi.JobEventStdout, bayapi.JobEventStderr:
			var ch JobChunk
			if err := json.Unmarshal(data, &ch); err != nil {
				return false, fmt.Errorf("sdk: exec output event: %w", err)
			}
			if fn != nil {
				return false, fn(ExecEvent{Stream: event, Text: ch.Data})
			}
		case bayapi.ExecEventDisplay:
			var d Display
			if err := json.Unmarshal(data, &d); err != nil {
				return false, fmt.Errorf("sdk: exec display event: %w", err)
			}
			if fn != nil {
				return false, fn(ExecEvent{Display: &d})
			}
		case bayapi.ExecEventResult:
			out = new(T)
			if err := json.Unmarshal(data, out); err != nil {
				return false, fmt.Errorf("sdk: exec result event: %w", err)
			}
			return true, nil
		case bayapi.ExecEventError:
			return true, decodeError(http.StatusBadGateway, "", data)
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, errors.New("sdk: exec event stream ended without a result")
	}
	return out, nil
}
