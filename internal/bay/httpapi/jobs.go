package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/idempotency"
	"github.com/shipyard-dev/shipyard/internal/bay/jobs"
)

// jobRoutes are the endpoints of the jobs API; without a jobs service there are none.
func (s *Server) jobRoutes() []route {
	if s.opts.Jobs == nil {
		return nil
	}
	jobQuery := []param{
		{name: "offset", typ: "integer", desc: "byte offset of both streams to read from (default 0)"},
		{name: "stdout_offset", typ: "integer", desc: "byte offset of stdout (overrides offset)"},
		{name: "stderr_offset", typ: "integer", desc: "byte offset of stderr (overrides offset)"},
		{name: "follow", typ: "boolean", desc: "stream Server-Sent Events until the job ends (also with Accept: text/event-stream)"},
	}
	return []route{
		{method: "POST", pattern: bayapi.PathJobs, auth: true, handler: s.startJob,
			doc: opDoc{id: "startJob", summary: "Start a job (a long-running shell or Python command) without waiting", tag: "jobs", request: bayapi.StartJobRequest{}, status: 202, response: bayapi.StartJobResponse{}}},
		{method: "GET", pattern: bayapi.PathJobs, auth: true, handler: s.listJobs,
			doc: opDoc{id: "listJobs", summary: "List the sandbox's jobs, newest first", tag: "jobs", status: 200, response: bayapi.JobList{},
				query: []param{limitParam(bayapi.DefaultJobsLimit, bayapi.MaxJobsLimit), {name: "offset", typ: "integer"},
					{name: "status", typ: "string", desc: "only jobs with this status", enum: bayapi.JobStatuses}}}},
		{method: "GET", pattern: bayapi.PathJob, auth: true, handler: s.getJob,
			doc: opDoc{id: "getJob", summary: "Get a job", tag: "jobs", status: 200, response: bayapi.JobResponse{}}},
		{method: "GET", pattern: bayapi.PathJobOutput, auth: true, handler: s.jobOutput,
			doc: opDoc{id: "jobOutput", summary: "Read a job's output from byte offsets; follow it live as Server-Sent Events", tag: "jobs", status: 200, response: bayapi.JobOutputResponse{}, query: jobQuery}},
		{method: "POST", pattern: bayapi.PathJobCancel, auth: true, handler: s.cancelJob,
			doc: opDoc{id: "cancelJob", summary: "Cancel a job: SIGTERM to its process group, SIGKILL after a grace period", tag: "jobs", status: 200, response: bayapi.JobResponse{}}},
	}
}

// JobResponse renders a job.
func JobResponse(j *bay.Job) bayapi.JobResponse {
	status := j.Status
	if status == bay.JobStarting {
		status = bay.JobRunning
	}
	var reason *string
	if j.Reason != "" {
		r := j.Reason
		reason = &r
	}
	out := bayapi.JobResponse{
		JobID: j.ID, SandboxID: j.SandboxID, Kind: j.Kind, Command: j.Command, Cwd: j.Cwd, Status: status,
		ExitCode: j.ExitCode, Reason: reason, TimeoutSeconds: j.TimeoutSeconds, Description: j.Description, Tags: j.Tags,
		CreatedAt: bayapi.NewTime(j.CreatedAt), StartedAt: bayapi.TimePtr(j.StartedAt), EndedAt: bayapi.TimePtr(j.EndedAt),
		Stdout: bayapi.JobStream{Bytes: j.StdoutBytes, Truncated: j.StdoutTruncated},
		Stderr: bayapi.JobStream{Bytes: j.StderrBytes, Truncated: j.StderrTruncated},
	}
	if bay.JobFinal(j.Status) {
		out.CreatedArtifacts = make([]bayapi.Artifact, 0, len(j.Artifacts))
		for _, a := range j.Artifacts {
			out.CreatedArtifacts = append(out.CreatedArtifacts, bayapi.Artifact(a))
		}
	}
	if j.ArtifactsNote != "" {
		n := j.ArtifactsNote
		out.ArtifactsNote = &n
	}
	return out
}

func (s *Server) startJob(w http.ResponseWriter, r *http.Request) {
	var req bayapi.StartJobRequest
	if err := decodeBody(w, r, &req, "kind"); err != nil {
		s.fail(w, r, err)
		return
	}
	var is issues
	p := jobs.StartParams{Kind: req.Kind, Env: req.Env, Description: req.Description, Tags: req.Tags}
	text, field, other := req.Command, "command", req.Code
	switch req.Kind {
	case bayapi.JobKindShell:
	case bayapi.JobKindPython:
		text, field, other = req.Code, "code", req.Command
	default:
		is.add("enum", []any{"body", "kind"}, "Input should be 'shell' or 'python'", req.Kind, map[string]any{"expected": "'shell' or 'python'"})
	}
	switch {
	case text == nil:
		is.missing("body", field)
	case strings.TrimSpace(*text) == "":
		is.add("string_too_short", []any{"body", field}, "String should not be blank", *text, nil)
	case strings.ContainsRune(*text, 0):
		is.add("value_error", []any{"body", field}, "Value error, must not contain NUL bytes", nil, nil)
	default:
		is.strLen(text, bayapi.MaxJobCommandLen, "body", field)
		p.Command = *text
	}
	if other != nil {
		is.add("value_error", []any{"body"}, "Value error, give command for a shell job and code for a python job, not both", nil, nil)
	}
	envBytes := 0
	for k, v := range req.Env {
		envBytes += len(k) + len(v)
		if !envName(k) || strings.ContainsRune(v, 0) {
			is.add("value_error", []any{"body", "env", k}, "Value error, environment variable names are letters, digits and '_' (not first a digit); values hold no NUL", nil, nil)
		}
	}
	if len(req.Env) > bayapi.MaxJobEnvVars || envBytes > bayapi.MaxJobEnvBytes {
		is.add("value_error", []any{"body", "env"}, fmt.Sprintf("Value error, at most %d variables of %d bytes in all", bayapi.MaxJobEnvVars, bayapi.MaxJobEnvBytes), nil, nil)
	}
	if req.Timeout != nil {
		is.intRange(int64(*req.Timeout), 1, int64(s.opts.Jobs.MaxDuration().Seconds()), "body", "timeout")
		p.Timeout = time.Duration(*req.Timeout) * time.Second
	}
	annotationLens(&is, req.Description, req.Tags)
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Cwd != nil {
		c, err := validatePath("cwd", *req.Cwd)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		p.Cwd = &c
	}
	if len(req.OutputPaths) > bayapi.MaxJobOutputPaths {
		s.fail(w, r, bay.Errorf(bay.CodeValidation, "at most %d output_paths", bayapi.MaxJobOutputPaths))
		return
	}
	for _, op := range req.OutputPaths {
		c, err := validatePath("output_paths", op)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		p.OutputPaths = append(p.OutputPaths, c)
	}
	if p.IdempotencyKey = strings.TrimSpace(r.Header.Get(bayapi.HeaderIdempotencyKey)); p.IdempotencyKey != "" && !idempotency.ValidKey(p.IdempotencyKey) {
		s.fail(w, r, bay.Errorf(bay.CodeValidation, "Invalid Idempotency-Key: 1-128 characters of A-Z a-z 0-9 _ -"))
		return
	}
	j, replayed, err := s.opts.Jobs.Start(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	started := j.CreatedAt
	if j.StartedAt != nil {
		started = *j.StartedAt
	}
	writeJSON(w, http.StatusAccepted, bayapi.StartJobResponse{JobID: j.ID, Status: JobResponse(j).Status, StartedAt: bayapi.NewTime(started)})
}

// envName reports whether k is a shell variable name.
func envName(k string) bool {
	for i, c := range k {
		if c != '_' && !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && !(i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return k != "" && len(k) <= 256
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	var is issues
	limit := int(queryInt(r, &is, "limit", bayapi.DefaultJobsLimit, 1, bayapi.MaxJobsLimit))
	offset := int(queryInt(r, &is, "offset", 0, 0, bayapi.MaxOffset))
	var statuses []string
	if v := r.URL.Query().Get("status"); v != "" {
		if !slices.Contains(bayapi.JobStatuses, v) {
			is.add("enum", []any{"query", "status"}, "Input should be one of "+strings.Join(bayapi.JobStatuses, ", "), v, nil)
		}
		statuses = []string{v}
		if v == bayapi.JobRunning {
			statuses = append(statuses, bay.JobStarting)
		}
	}
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	js, total, err := s.opts.Jobs.List(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), statuses, limit, offset)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := bayapi.JobList{Items: make([]bayapi.JobResponse, 0, len(js)), Total: total}
	for _, j := range js {
		out.Items = append(out.Items, JobResponse(j))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.opts.Jobs.Get(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), r.PathValue("job_id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, JobResponse(j))
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.opts.Jobs.Cancel(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), r.PathValue("job_id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, JobResponse(j))
}

// jobFollowWait is how long one read of a followed job waits for output before the stream
// gets a keep-alive comment.
const jobFollowWait = 15 * time.Second

// jobOffsets reads the offsets of an output request: Last-Event-ID "<stdout>:<stderr>" (a
// reconnecting event stream), then offset, then stdout_offset and stderr_offset.
func jobOffsets(r *http.Request, is *issues) [2]int64 {
	var offs [2]int64
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		a, b, ok := strings.Cut(id, ":")
		x, err1 := strconv.ParseInt(a, 10, 64)
		y, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil || x < 0 || y < 0 {
			is.add("value_error", []any{"header", "Last-Event-ID"}, "Value error, expected <stdout offset>:<stderr offset>", id, nil)
		}
		offs = [2]int64{x, y}
	}
	o := queryInt(r, is, "offset", -1, 0, 1<<62)
	for i, name := range []string{"stdout_offset", "stderr_offset"} {
		if o >= 0 {
			offs[i] = o
		}
		if v := queryInt(r, is, name, -1, 0, 1<<62); v >= 0 {
			offs[i] = v
		}
	}
	return offs
}

func (s *Server) jobOutput(w http.ResponseWriter, r *http.Request) {
	var is issues
	offs := jobOffsets(r, &is)
	follow := queryBool(r, &is, "follow")
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	owner, sbID, jobID := Owner(r.Context()), r.PathValue("sandbox_id"), r.PathValue("job_id")
	sse := wantsEvents(r)
	if follow != nil {
		sse = *follow
	}
	if !sse {
		j, out, err := s.opts.Jobs.Output(r.Context(), owner, sbID, jobID, offs, 0)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		resp := bayapi.JobOutputResponse{Job: JobResponse(j),
			Stdout: bayapi.JobChunk{Offset: offs[0], Next: offs[0]}, Stderr: bayapi.JobChunk{Offset: offs[1], Next: offs[1]}}
		if out != nil {
			resp.Stdout, resp.Stderr = chunk(out.Stdout), chunk(out.Stderr)
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	// The first read answers errors (unknown job, ...) as JSON before the stream starts.
	f := s.opts.Jobs.Follower(owner, sbID, jobID)
	j, out, err := f.Read(r.Context(), offs, 0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for {
		sent := false
		if out != nil {
			for _, c := range []struct {
				event string
				ch    shipapi.StreamChunk
				i     int
			}{{bayapi.JobEventStdout, out.Stdout, 0}, {bayapi.JobEventStderr, out.Stderr, 1}} {
				if c.ch.Next > c.ch.Offset {
					offs[c.i] = c.ch.Next
					writeEvent(w, c.event, fmt.Sprintf("%d:%d", offs[0], offs[1]), chunk(c.ch))
					sent = true
				}
			}
		}
		// The end: the job is final and everything it kept was sent (or its output is gone).
		if bay.JobFinal(j.Status) && (out == nil || offs[0] >= out.Job.Stdout.Bytes && offs[1] >= out.Job.Stderr.Bytes) {
			writeEvent(w, bayapi.JobEventEnd, fmt.Sprintf("%d:%d", offs[0], offs[1]), JobResponse(j))
			_ = rc.Flush()
			return
		}
		if !sent {
			_, _ = w.Write([]byte(": ping\n\n"))
		}
		if err := rc.Flush(); err != nil {
			return
		}
		j, out, err = f.Read(r.Context(), offs, jobFollowWait)
		if err != nil {
			if r.Context().Err() == nil {
				s.log.WarnContext(r.Context(), "job output stream ended by an error", "job_id", jobID, "err", err)
				_, env := statusOf(err)
				env.Error.RequestID = requestID(r.Context())
				writeEvent(w, bayapi.ExecEventError, "", env)
				_ = rc.Flush()
			}
			return
		}
	}
}

func chunk(c shipapi.StreamChunk) bayapi.JobChunk {
	return bayapi.JobChunk{Offset: c.Offset, Next: c.Next, Data: c.Data}
}

// writeEvent writes one Server-Sent Event with a JSON data line.
func writeEvent(w http.ResponseWriter, event, id string, v any) {
	b, _ := json.Marshal(v)
	if id != "" {
		fmt.Fprintf(w, "id: %s\n", id)
	}
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
}

// wantsEvents reports whether the client asks for Server-Sent Events.
func wantsEvents(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// streamExec answers an exec run by run as Server-Sent Events when the client asks for them
// (see bayapi.ExecEventResult): the events run emits as the code prints, then "result" with
// the JSON a plain exec answers. An error before the first event is the usual JSON error;
// after it, an "error" event with the envelope. Without text/event-stream the answer is the
// plain JSON.
//
// With an Idempotency-Key (streamed or not), the execution is named by the key: a retry
// attaches to it or returns its answer, and never runs the code twice.
func (s *Server) streamExec(w http.ResponseWriter, r *http.Request, key string, run func(emit jobs.Emit) (any, error)) {
	if key != "" && !idempotency.ValidKey(key) {
		s.fail(w, r, bay.Errorf(bay.CodeValidation, "Invalid Idempotency-Key: 1-128 characters of A-Z a-z 0-9 _ -"))
		return
	}
	if !wantsEvents(r) {
		res, err := run(func(string, any) error { return nil })
		s.reply(w, r, res, err)
		return
	}
	rc := http.NewResponseController(w)
	started := false
	begin := func() {
		if !started {
			started = true
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
			w.WriteHeader(http.StatusOK)
		}
	}
	res, err := run(func(event string, v any) error {
		begin()
		writeEvent(w, event, "", v)
		return rc.Flush()
	})
	switch {
	case err != nil && !started:
		s.fail(w, r, err)
	case err != nil:
		if r.Context().Err() == nil {
			_, env := statusOf(err)
			env.Error.RequestID = requestID(r.Context())
			writeEvent(w, bayapi.ExecEventError, "", env)
			_ = rc.Flush()
		}
	default:
		begin()
		writeEvent(w, bayapi.ExecEventResult, "", res)
		_ = rc.Flush()
	}
}
