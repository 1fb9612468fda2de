package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/execs"
)

// invokeRoutes run invocable skills through the audited execs.
func (s *Server) invokeRoutes() []route {
	return []route{
		{method: "POST", pattern: bayapi.PathSkillInvoke, auth: true, handler: s.invokeSkill,
			doc: opDoc{id: "invokeSkill", summary: "Invoke an invocable skill: inputs checked against its interface, run as an audited exec, outputs returned (wait:false answers 202 at once)",
				tag: "skills", request: bayapi.InvokeSkillRequest{}, status: 200, also: []int{202}, response: bayapi.InvokeSkillResponse{}}},
		{method: "GET", pattern: bayapi.PathExecOutputs, auth: true, handler: s.execOutputs,
			doc: opDoc{id: "execOutputs", summary: "An exec as an invocation: its record and, once a skill invocation is final, its outputs by the outputs rule",
				tag: "execs", status: 200, response: bayapi.InvokeSkillResponse{}}},
	}
}

func (s *Server) execOutputs(w http.ResponseWriter, r *http.Request) {
	svc := s.execsOrFail(w, r)
	if svc == nil {
		return
	}
	inv, err := svc.InvocationOf(r.Context(), Owner(r.Context()), r.PathValue("exec_id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, invocationResponse(inv))
}

func (s *Server) invokeSkill(w http.ResponseWriter, r *http.Request) {
	svc := s.execsOrFail(w, r)
	if svc == nil {
		return
	}
	var body bayapi.InvokeSkillRequest
	if err := decodeBody(w, r, &body, "project_id"); err != nil {
		s.fail(w, r, err)
		return
	}
	req := execs.InvokeRequest{SkillID: r.PathValue("name"), ProjectID: body.ProjectID, Inputs: body.Inputs, Wait: body.Wait == nil || *body.Wait}
	if body.TaskRef != nil {
		req.TaskID, req.ConversationID = body.TaskRef.TaskID, body.TaskRef.ConversationID
	}
	if err := strictOverrides(body.PolicyOverrides, &req.Overrides); err != nil {
		s.fail(w, r, err)
		return
	}
	inv, err := svc.Invoke(r.Context(), Owner(r.Context()), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, waitedStatus(req.Wait), invocationResponse(inv))
}

// strictOverrides reads policy_overrides strictly: an unknown field is a mistake, not a no-op.
func strictOverrides(raw json.RawMessage, dst *bay.PolicyOverrides) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return bay.Errorf(bay.CodeValidation, "policy_overrides: %v", err)
	}
	return nil
}

func invocationResponse(inv *execs.Invocation) bayapi.InvokeSkillResponse {
	out := bayapi.InvokeSkillResponse{Exec: execResponse(inv.Record), Outputs: inv.Outputs, OutputsSource: inv.OutputsSource}
	if inv.OutputsSource != "" {
		valid := len(inv.OutputsErrors) == 0
		out.OutputsValid = &valid
	}
	for _, v := range inv.OutputsErrors {
		out.OutputsErrors = append(out.OutputsErrors, bayapi.SchemaViolation(v))
	}
	return out
}
