package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"path"
	"strconv"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/execs"
)

// The audited one-shot executions (internal/bay/execs). Without Options.Execs every one of
// these answers 503 unavailable.

func (s *Server) execRoutes() []route {
	return []route{
		{method: "POST", pattern: bayapi.PathExecs, auth: true, handler: s.createExec,
			doc: opDoc{id: "createExec", summary: "Run one audited command in a fresh container without network (wait:false answers 202 at once)",
				tag: "execs", request: bayapi.CreateExecRequest{}, status: 200, also: []int{202}, response: bayapi.ExecResponse{}}},
		{method: "GET", pattern: bayapi.PathExecs, auth: true, handler: s.listExecs,
			doc: opDoc{id: "listExecs", summary: "List audited execs, newest first", tag: "execs", status: 200, response: bayapi.ExecList{},
				query: []param{
					limitParam(bayapi.DefaultExecsLimit, bayapi.MaxExecsLimit),
					{name: "offset", typ: "integer", desc: "items to skip (0.." + itoa(bayapi.MaxExecsOffset) + ")"},
					{name: "task_id", typ: "string", desc: "only this task's execs"},
					{name: "project_id", typ: "string", desc: "only this project's execs"},
					{name: "status", typ: "string", desc: "only execs in this status", enum: bayapi.ExecStatuses},
				}}},
		{method: "GET", pattern: bayapi.PathExec, auth: true, handler: s.getExec,
			doc: opDoc{id: "getExec", summary: "Get an exec's audit record", tag: "execs", status: 200, response: bayapi.ExecResponse{}}},
		{method: "GET", pattern: bayapi.PathExecArtifacts, auth: true, handler: s.listExecArtifacts,
			doc: opDoc{id: "listExecArtifacts", summary: "An exec's artifacts with their sizes and sha256", tag: "execs", status: 200, response: bayapi.ArtifactList{}}},
		{method: "GET", pattern: bayapi.PathExecArtifact, auth: true, handler: s.downloadExecArtifact,
			doc: opDoc{id: "downloadExecArtifact", summary: "Download one artifact", tag: "execs", status: 200, binary: true}},
		{method: "POST", pattern: bayapi.PathExecCancel, auth: true, handler: s.cancelExec,
			doc: opDoc{id: "cancelExec", summary: "Cancel a queued or running exec (kills its container)", tag: "execs", status: 200, response: bayapi.ExecResponse{}}},
		{method: "GET", pattern: bayapi.PathExecsHealth, auth: true, handler: s.execsHealth,
			doc: opDoc{id: "execsHealth", summary: "The exec runner: runtime mode, workspace, engine, writability", tag: "execs", status: 200, response: execs.Health{}}},
	}
}

// execsOrFail returns the exec service, or answers 503 when bay runs without one.
func (s *Server) execsOrFail(w http.ResponseWriter, r *http.Request) *execs.Service {
	if s.opts.Execs == nil {
		s.fail(w, r, bay.Errorf(bay.CodeUnavailable, "audited execs are not enabled on this bay"))
	}
	return s.opts.Execs
}

func (s *Server) createExec(w http.ResponseWriter, r *http.Request) {
	svc := s.execsOrFail(w, r)
	if svc == nil {
		return
	}
	var body bayapi.CreateExecRequest
	if err := decodeBody(w, r, &body, "project_id", "exec"); err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := execRequest(body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rec, err := svc.Create(r.Context(), Owner(r.Context()), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, waitedStatus(req.Wait), execResponse(rec))
}

// waitedStatus is the status of a request that waits for its exec (200) or not (202).
func waitedStatus(wait bool) int {
	if wait {
		return http.StatusOK
	}
	return http.StatusAccepted
}

// execRequest turns the wire body into the service's request: inputs decoded, policy
// overrides read strictly (an unknown field is a mistake, not a no-op).
func execRequest(b bayapi.CreateExecRequest) (execs.Request, error) {
	req := execs.Request{
		ProjectID: b.ProjectID, SkillID: b.SkillID, Kind: b.Exec.Kind, Command: b.Exec.Command,
		Args: b.Exec.Args, Cwd: b.Exec.Cwd, Env: b.Exec.Env, Wait: b.Wait == nil || *b.Wait,
	}
	if b.TaskRef != nil {
		req.TaskID, req.ConversationID = b.TaskRef.TaskID, b.TaskRef.ConversationID
	}
	if err := strictOverrides(b.PolicyOverrides, &req.Overrides); err != nil {
		return req, err
	}
	if len(b.Inputs) > execs.MaxInputs {
		return req, bay.Errorf(bay.CodeValidation, "inputs has %d items, at most %d", len(b.Inputs), execs.MaxInputs)
	}
	for i, in := range b.Inputs {
		var content []byte
		switch {
		case (in.Content == nil) == (in.ContentBase64 == nil):
			return req, bay.Errorf(bay.CodeValidation, "inputs[%d]: give exactly one of content and content_base64", i)
		case in.Content != nil:
			content = []byte(*in.Content)
		default:
			c, err := base64.StdEncoding.DecodeString(*in.ContentBase64)
			if err != nil {
				return req, bay.Errorf(bay.CodeValidation, "inputs[%d].content_base64 is not valid base64", i)
			}
			content = c
		}
		req.Inputs = append(req.Inputs, execs.RawInput{Path: in.Path, Content: content})
	}
	return req, nil
}

func execResponse(e *bay.ExecRecord) bayapi.ExecResponse {
	pol, _ := json.Marshal(e.Policy)
	return bayapi.ExecResponse{
		ExecID: e.ID, Status: string(e.Status), ExitCode: e.ExitCode, ErrorReason: e.ErrorReason,
		ProjectID: e.ProjectID, TaskID: e.TaskID, ConversationID: e.ConversationID, SkillID: e.SkillID, SkillVersion: e.SkillVersion,
		Image: e.Image, Kind: e.Kind, Cmd: e.Cmd, Args: e.Args, Cwd: e.Cwd, EnvKeys: e.EnvKeys, PolicySnapshot: pol,
		ArtifactsDir: e.ArtifactsPath, StdoutPath: path.Join(e.ArtifactsPath, execs.StdoutFile),
		StderrPath: path.Join(e.ArtifactsPath, execs.StderrFile), StdoutTruncated: e.StdoutTruncated,
		StderrTruncated: e.StderrTruncated, CreatedAt: e.CreatedAt, StartedAt: e.StartedAt, EndedAt: e.EndedAt,
		DurationMS: e.DurationMS,
	}
}

func (s *Server) listExecs(w http.ResponseWriter, r *http.Request) {
	svc := s.execsOrFail(w, r)
	if svc == nil {
		return
	}
	var is issues
	limit := queryInt(r, &is, "limit", bayapi.DefaultExecsLimit, 1, bayapi.MaxExecsLimit)
	offset := queryInt(r, &is, "offset", 0, 0, bayapi.MaxExecsOffset)
	q := bay.ExecQuery{
		TaskID: queryString(r, &is, "task_id", 256), ProjectID: queryString(r, &is, "project_id", 128),
		Limit: int(limit), Offset: int(offset),
	}
	if st := r.URL.Query().Get("status"); st != "" {
		if !bay.ExecStatus(st).Valid() {
			is.add("enum", []any{"query", "status"}, "Input should be one of the exec statuses", st, map[string]any{"expected": bayapi.ExecStatuses})
		}
		q.Statuses = []bay.ExecStatus{bay.ExecStatus(st)}
	}
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	list, total, err := svc.List(r.Context(), Owner(r.Context()), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := bayapi.ExecList{Items: make([]bayapi.ExecResponse, 0, len(list)), Total: total, Limit: q.Limit, Offset: q.Offset}
	for _, e := range list {
		out.Items = append(out.Items, execResponse(e))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getExec(w http.ResponseWriter, r *http.Request) {
	svc := s.execsOrFail(w, r)
	if svc == nil {
		return
	}
	rec, err := svc.Get(r.Context(), Owner(r.Context()), r.PathValue("exec_id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, execResponse(rec))
}

func (s *Server) cancelExec(w http.ResponseWriter, r *http.Request) {
	svc := s.execsOrFail(w, r)
	if svc == nil {
		return
	}
	rec, err := svc.Cancel(r.Context(), Owner(r.Context()), r.PathValue("exec_id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, execResponse(rec))
}

func (s *Server) listExecArtifacts(w http.ResponseWriter, r *http.Request) {
	svc := s.execsOrFail(w, r)
	if svc == nil {
		return
	}
	_, m, err := svc.Artifacts(r.Context(), Owner(r.Context()), r.PathValue("exec_id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	conv := func(es []execs.ManifestEntry) []bayapi.ArtifactEntry {
		out := make([]bayapi.ArtifactEntry, 0, len(es))
		for _, e := range es {
			out = append(out, bayapi.ArtifactEntry{Path: e.Path, Size: e.Size, SHA256: e.SHA256})
		}
		return out
	}
	out := bayapi.ArtifactList{ExecID: m.ExecID, Files: conv(m.Files), TotalBytes: m.TotalBytes, DropReason: m.DropReason, Skipped: m.Skipped}
	if len(m.Dropped) > 0 {
		out.Dropped = conv(m.Dropped)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) downloadExecArtifact(w http.ResponseWriter, r *http.Request) {
	svc := s.execsOrFail(w, r)
	if svc == nil {
		return
	}
	f, err := svc.OpenArtifact(r.Context(), Owner(r.Context()), r.PathValue("exec_id"), r.PathValue("path"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer f.File.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", contentDisposition(path.Base(f.Name)))
	w.Header().Set("Content-Length", strconv.FormatInt(f.Size, 10))
	w.WriteHeader(http.StatusOK)
	_, _ = io.CopyN(w, f.File, f.Size)
}

func (s *Server) execsHealth(w http.ResponseWriter, r *http.Request) {
	svc := s.execsOrFail(w, r)
	if svc == nil {
		return
	}
	writeJSON(w, http.StatusOK, svc.Health(r.Context()))
}
