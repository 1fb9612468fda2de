package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/skillrel"
)

// The skill lifecycle's endpoints: payload blobs, candidates, evaluations, releases.

var (
	errSkillsUnavailable = errors.New("the store does not keep the skill lifecycle")
	skillLimit           = limitParam(bayapi.DefaultSkillListLimit, bayapi.MaxSkillListLimit)
	offsetParam          = param{name: "offset", typ: "integer", desc: "rows to skip (default 0)"}
)

// skillRoutes are the endpoints of the skill lifecycle (appended to the route table).
func (s *Server) skillLifeRoutes() []route {
	const tag = "skills"
	return []route{
		{method: "POST", pattern: bayapi.PathSkillPayloads, auth: true, handler: s.createPayload,
			doc: opDoc{id: "createSkillPayload", summary: "Store a JSON payload (object or array) as a blob", tag: tag, request: bayapi.CreatePayloadRequest{}, status: 201, response: bayapi.PayloadCreated{}}},
		{method: "GET", pattern: bayapi.PathSkillPayload, auth: true, handler: s.getPayload,
			doc: opDoc{id: "getSkillPayload", summary: "Read a payload by its blob: reference", tag: tag, status: 200, response: bayapi.PayloadResponse{}}},
		{method: "POST", pattern: bayapi.PathSkillCandidates, auth: true, handler: s.createCandidate,
			doc: opDoc{id: "createSkillCandidate", summary: "Propose a skill from executions", tag: tag, request: bayapi.CreateCandidateRequest{}, status: 201, response: bayapi.SkillCandidateResponse{}}},
		{method: "GET", pattern: bayapi.PathSkillCandidates, auth: true, handler: s.listCandidates,
			doc: opDoc{id: "listSkillCandidates", summary: "List candidates, newest first", tag: tag, status: 200, response: bayapi.SkillCandidateList{},
				query: []param{{name: "status", typ: "string", enum: skillrel.CandidateStatuses}, {name: "skill_key", typ: "string"}, skillLimit, offsetParam}}},
		{method: "GET", pattern: bayapi.PathSkillCandidate, auth: true, handler: s.getCandidate,
			doc: opDoc{id: "getSkillCandidate", summary: "Get a candidate", tag: tag, status: 200, response: bayapi.SkillCandidateResponse{}}},
		{method: "DELETE", pattern: bayapi.PathSkillCandidate, auth: true, handler: s.deleteCandidate,
			doc: opDoc{id: "deleteSkillCandidate", summary: "Soft-delete a candidate no active release uses", tag: tag, request: bayapi.DeleteReasonRequest{}, optionalReq: true, status: 200, response: bayapi.DeletedResponse{}}},
		{method: "POST", pattern: bayapi.PathSkillEvaluate, auth: true, handler: s.evaluateCandidate,
			doc: opDoc{id: "evaluateSkillCandidate", summary: "Record an evaluation of a candidate", tag: tag, request: bayapi.EvaluateRequest{}, status: 200, response: bayapi.SkillEvaluationResponse{}}},
		{method: "POST", pattern: bayapi.PathSkillPromote, auth: true, handler: s.promoteCandidate,
			doc: opDoc{id: "promoteSkillCandidate", summary: "Release a candidate with a passing evaluation", tag: tag, request: bayapi.PromoteRequest{}, optionalReq: true, status: 200, response: bayapi.SkillReleaseResponse{}}},
		{method: "GET", pattern: bayapi.PathSkillReleases, auth: true, handler: s.listReleases,
			doc: opDoc{id: "listSkillReleases", summary: "List releases, newest first", tag: tag, status: 200, response: bayapi.SkillReleaseList{},
				query: []param{{name: "skill_key", typ: "string"}, {name: "active_only", typ: "boolean"}, {name: "stage", typ: "string", enum: skillrel.Stages}, skillLimit, offsetParam}}},
		{method: "DELETE", pattern: bayapi.PathSkillRelease, auth: true, handler: s.deleteRelease,
			doc: opDoc{id: "deleteSkillRelease", summary: "Soft-delete a release (even the active one)", tag: tag, request: bayapi.DeleteReasonRequest{}, optionalReq: true, status: 200, response: bayapi.DeletedResponse{}}},
		{method: "GET", pattern: bayapi.PathSkillHealth, auth: true, handler: s.releaseHealth,
			doc: opDoc{id: "skillReleaseHealth", summary: "A release's health over its window against the release before it", tag: tag, status: 200, response: bayapi.ReleaseHealthResponse{}}},
		{method: "POST", pattern: bayapi.PathSkillRollback, auth: true, handler: s.rollbackRelease,
			doc: opDoc{id: "rollbackSkillRelease", summary: "Make a new active release from the one before", tag: tag, status: 200, response: bayapi.SkillReleaseResponse{}}},
		{method: "GET", pattern: bayapi.PathBrowserTrace, auth: true, handler: s.browserTrace,
			doc: opDoc{id: "getBrowserTrace", summary: "Read a browser trace of the owner (by its blob: reference)", tag: "capabilities", status: 200, response: bayapi.BrowserTraceResponse{}}},
		{method: "POST", pattern: bayapi.PathBrowserSkillRun, auth: true, handler: s.runBrowserSkill,
			doc: opDoc{id: "runBrowserSkill", summary: "Replay the active release of a browser skill", tag: "capabilities", request: bayapi.SkillRunRequest{}, optionalReq: true, status: 200, response: bayapi.SkillRunResponse{}}},
	}
}

func (s *Server) browserTrace(w http.ResponseWriter, r *http.Request) {
	var is issues
	ref := pathID(r, &is, "trace_ref")
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	b, err := s.caps.GetTrace(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), ref)
	replyAs(s, w, r, b, err, func(b *bay.Blob) bayapi.BrowserTraceResponse {
		return bayapi.BrowserTraceResponse{TraceRef: skillrel.Ref(b.ID), Trace: b.Payload}
	})
}

func (s *Server) runBrowserSkill(w http.ResponseWriter, r *http.Request) {
	var req bayapi.SkillRunRequest
	if err := decodeOptionalBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	var is issues
	key := r.PathValue("skill_key")
	is.strLen(&key, bayapi.MaxSkillKeyLen, "path", "skill_key")
	timeout := 60
	if req.Timeout != nil {
		is.intRange(int64(*req.Timeout), 1, maxBrowserBatchTimeout, "body", "timeout")
		timeout = int(*req.Timeout)
	}
	annotationLens(&is, req.Description, req.Tags)
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	run, err := s.caps.RunBrowserSkill(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), key, capability.SkillRunParams{
		Timeout: timeout, StopOnError: req.StopOnError == nil || *req.StopOnError, IncludeTrace: req.IncludeTrace,
		Description: req.Description, Tags: req.Tags,
	})
	replyAs(s, w, r, run, err, func(run *capability.SkillRun) bayapi.SkillRunResponse {
		b := renderBrowserBatch(run.BrowserBatchResult)
		return bayapi.SkillRunResponse{SkillKey: key, ReleaseID: run.Release.ID, ExecutionID: b.ExecutionID, ExecutionTimeMS: b.ExecutionTimeMS,
			TraceRef: b.TraceRef, Results: b.Results, TotalSteps: b.TotalSteps, CompletedSteps: b.CompletedSteps, Success: b.Success, DurationMS: b.DurationMS}
	})
}

// skillService returns the lifecycle service or fails the request.
func (s *Server) skillService(w http.ResponseWriter, r *http.Request) *skillrel.Service {
	if s.skillLife == nil {
		s.fail(w, r, bay.Errorf(bay.CodeUnavailable, "Skill lifecycle is not available").WithCause(errSkillsUnavailable))
	}
	return s.skillLife
}

// skillByID serves a body-less request on the object named by the path parameter name.
func skillByID[T, W any](s *Server, w http.ResponseWriter, r *http.Request, name string,
	call func(ctx context.Context, svc *skillrel.Service, owner, id string) (T, error), render func(T) W) {
	svc := s.skillService(w, r)
	if svc == nil {
		return
	}
	var is issues
	id := pathID(r, &is, name)
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := call(r.Context(), svc, Owner(r.Context()), id)
	replyAs(s, w, r, v, err, render)
}

// decodeOptionalBody decodes a JSON object body into dst when there is one.
func decodeOptionalBody(w http.ResponseWriter, r *http.Request, dst any) error {
	raw, err := readBody(w, r, maxJSONBody, "")
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	return decodeBody(w, r, dst)
}

// pathID checks a path identifier's length.
func pathID(r *http.Request, is *issues, name string) string {
	v := r.PathValue(name)
	is.strLen(&v, bayapi.MaxSkillIDLen, "path", name)
	return v
}

func (s *Server) createPayload(w http.ResponseWriter, r *http.Request) {
	svc := s.skillService(w, r)
	if svc == nil {
		return
	}
	var req bayapi.CreatePayloadRequest
	if err := decodeBody(w, r, &req, "payload"); err != nil {
		s.fail(w, r, err)
		return
	}
	var is issues
	kind := bay.BlobKindGeneric
	if req.Kind != nil {
		kind = *req.Kind
		is.strLen(req.Kind, 128, "body", "kind")
		if kind == "" {
			is.add("string_too_short", []any{"body", "kind"}, "String should have at least 1 character", kind, map[string]any{"min_length": 1})
		}
	}
	if p := bytes.TrimSpace(req.Payload); len(p) == 0 || (p[0] != '{' && p[0] != '[') {
		is.add("model_type", []any{"body", "payload"}, "Input should be a valid dictionary or list", nil, nil)
	}
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	b, err := svc.PutBlob(r.Context(), Owner(r.Context()), kind, req.Payload)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, bayapi.PayloadCreated{PayloadRef: skillrel.Ref(b.ID), Kind: b.Kind})
}

func (s *Server) getPayload(w http.ResponseWriter, r *http.Request) {
	svc := s.skillService(w, r)
	if svc == nil {
		return
	}
	var is issues
	ref := pathID(r, &is, "payload_ref")
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	b, err := svc.GetBlob(r.Context(), Owner(r.Context()), ref)
	replyAs(s, w, r, b, err, func(b *bay.Blob) bayapi.PayloadResponse {
		return bayapi.PayloadResponse{PayloadRef: skillrel.Ref(b.ID), Kind: b.Kind, Payload: b.Payload}
	})
}

func (s *Server) createCandidate(w http.ResponseWriter, r *http.Request) {
	svc := s.skillService(w, r)
	if svc == nil {
		return
	}
	var req bayapi.CreateCandidateRequest
	if err := decodeBody(w, r, &req, "skill_key", "source_execution_ids"); err != nil {
		s.fail(w, r, err)
		return
	}
	var is issues
	is.strLen(req.SkillKey, bayapi.MaxSkillKeyLen, "body", "skill_key")
	is.strLen(req.ScenarioKey, bayapi.MaxSkillKeyLen, "body", "scenario_key")
	is.strLen(req.PayloadRef, bayapi.MaxSkillIDLen, "body", "payload_ref")
	is.strLen(req.Summary, bayapi.MaxSkillTextLen, "body", "summary")
	is.strLen(req.UsageNotes, bayapi.MaxSkillTextLen, "body", "usage_notes")
	if len(req.SourceExecutionIDs) > bayapi.MaxSourceExecutions {
		is.add("too_long", []any{"body", "source_execution_ids"}, "List should have at most 1000 items", nil, map[string]any{"max_length": bayapi.MaxSourceExecutions})
	}
	for i := range req.SourceExecutionIDs {
		is.strLen(&req.SourceExecutionIDs[i], bayapi.MaxSkillIDLen, "body", "source_execution_ids", i)
	}
	for name, v := range map[string][]byte{"preconditions": req.Preconditions, "postconditions": req.Postconditions} {
		if p := bytes.TrimSpace(v); len(p) > 0 && string(p) != "null" && p[0] != '{' {
			is.add("dict_type", []any{"body", name}, "Input should be a valid dictionary", nil, nil)
		}
	}
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	c, err := svc.CreateCandidate(r.Context(), Owner(r.Context()), skillrel.CandidateParams{
		SkillKey: *req.SkillKey, SourceExecutionIDs: req.SourceExecutionIDs, ScenarioKey: req.ScenarioKey, PayloadRef: req.PayloadRef,
		Summary: req.Summary, UsageNotes: req.UsageNotes, Preconditions: req.Preconditions, Postconditions: req.Postconditions,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, renderCandidate(c))
}

func (s *Server) listCandidates(w http.ResponseWriter, r *http.Request) {
	svc := s.skillService(w, r)
	if svc == nil {
		return
	}
	var is issues
	q := bay.CandidateQuery{
		Owner: Owner(r.Context()), Status: queryString(r, &is, "status", 64), SkillKey: queryString(r, &is, "skill_key", bayapi.MaxSkillKeyLen),
		Limit:  int(queryInt(r, &is, "limit", bayapi.DefaultSkillListLimit, 1, bayapi.MaxSkillListLimit)),
		Offset: int(queryInt(r, &is, "offset", 0, 0, bayapi.MaxOffset)),
	}
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := svc.ListCandidates(r.Context(), q)
	replyAs(s, w, r, p, err, func(p *skillrel.Page[bay.SkillCandidate]) bayapi.SkillCandidateList {
		out := bayapi.SkillCandidateList{Items: make([]bayapi.SkillCandidateResponse, 0, len(p.Items)), Total: p.Total}
		for _, c := range p.Items {
			out.Items = append(out.Items, renderCandidate(c))
		}
		return out
	})
}

func (s *Server) getCandidate(w http.ResponseWriter, r *http.Request) {
	skillByID(s, w, r, "candidate_id", func(ctx context.Context, svc *skillrel.Service, owner, id string) (*bay.SkillCandidate, error) {
		return svc.GetCandidate(ctx, owner, id)
	}, renderCandidate)
}

func (s *Server) deleteCandidate(w http.ResponseWriter, r *http.Request) {
	s.softDelete(w, r, "candidate_id", func(svc *skillrel.Service, owner, id string, reason *string) (*skillrel.Deleted, error) {
		return svc.DeleteCandidate(r.Context(), owner, id, reason)
	})
}

func (s *Server) deleteRelease(w http.ResponseWriter, r *http.Request) {
	s.softDelete(w, r, "release_id", func(svc *skillrel.Service, owner, id string, reason *string) (*skillrel.Deleted, error) {
		return svc.DeleteRelease(r.Context(), owner, id, reason)
	})
}

// softDelete serves a DELETE with an optional {"reason"} body.
func (s *Server) softDelete(w http.ResponseWriter, r *http.Request, name string,
	del func(svc *skillrel.Service, owner, id string, reason *string) (*skillrel.Deleted, error)) {
	svc := s.skillService(w, r)
	if svc == nil {
		return
	}
	var req bayapi.DeleteReasonRequest
	if err := decodeOptionalBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	var is issues
	id := pathID(r, &is, name)
	is.strLen(req.Reason, bayapi.MaxSkillTextLen, "body", "reason")
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := del(svc, Owner(r.Context()), id, req.Reason)
	replyAs(s, w, r, d, err, func(d *skillrel.Deleted) bayapi.DeletedResponse {
		return bayapi.DeletedResponse{ID: d.ID, DeletedAt: bayapi.TimePtr(d.DeletedAt), DeletedBy: d.DeletedBy, DeleteReason: d.Reason}
	})
}

func (s *Server) evaluateCandidate(w http.ResponseWriter, r *http.Request) {
	svc := s.skillService(w, r)
	if svc == nil {
		return
	}
	var req bayapi.EvaluateRequest
	if err := decodeBody(w, r, &req, "passed"); err != nil {
		s.fail(w, r, err)
		return
	}
	var is issues
	id := pathID(r, &is, "candidate_id")
	is.strLen(req.BenchmarkID, bayapi.MaxSkillKeyLen, "body", "benchmark_id")
	is.strLen(req.Report, bayapi.MaxSkillTextLen, "body", "report")
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	ev, err := svc.Evaluate(r.Context(), Owner(r.Context()), id, skillrel.EvaluationParams{
		Passed: *req.Passed, Score: req.Score, BenchmarkID: req.BenchmarkID, Report: req.Report,
	})
	replyAs(s, w, r, ev, err, func(e *bay.SkillEvaluation) bayapi.SkillEvaluationResponse {
		return bayapi.SkillEvaluationResponse{ID: e.ID, CandidateID: e.CandidateID, BenchmarkID: e.BenchmarkID, Score: e.Score,
			Passed: e.Passed, Report: e.Report, EvaluatedBy: e.EvaluatedBy, CreatedAt: bayapi.NewTime(e.CreatedAt)}
	})
}

func (s *Server) promoteCandidate(w http.ResponseWriter, r *http.Request) {
	svc := s.skillService(w, r)
	if svc == nil {
		return
	}
	var req bayapi.PromoteRequest
	if err := decodeOptionalBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	var is issues
	id := pathID(r, &is, "candidate_id")
	is.strLen(req.Stage, 64, "body", "stage")
	is.strLen(req.UpgradeOfReleaseID, bayapi.MaxSkillIDLen, "body", "upgrade_of_release_id")
	is.strLen(req.UpgradeReason, bayapi.MaxSkillTextLen, "body", "upgrade_reason")
	is.strLen(req.ChangeSummary, bayapi.MaxSkillTextLen, "body", "change_summary")
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	p := skillrel.PromoteParams{UpgradeOfReleaseID: req.UpgradeOfReleaseID, UpgradeReason: req.UpgradeReason, ChangeSummary: req.ChangeSummary}
	if req.Stage != nil {
		p.Stage = *req.Stage
		if p.Stage == "" {
			p.Stage = " " // an explicit empty stage is invalid, not the default
		}
	}
	v, err := svc.Promote(r.Context(), Owner(r.Context()), id, p)
	replyAs(s, w, r, v, err, renderRelease)
}

func (s *Server) listReleases(w http.ResponseWriter, r *http.Request) {
	svc := s.skillService(w, r)
	if svc == nil {
		return
	}
	var is issues
	q := bay.ReleaseQuery{
		Owner: Owner(r.Context()), SkillKey: queryString(r, &is, "skill_key", bayapi.MaxSkillKeyLen), Stage: queryString(r, &is, "stage", 64),
		Limit:  int(queryInt(r, &is, "limit", bayapi.DefaultSkillListLimit, 1, bayapi.MaxSkillListLimit)),
		Offset: int(queryInt(r, &is, "offset", 0, 0, bayapi.MaxOffset)),
	}
	if v := queryBool(r, &is, "active_only"); v != nil {
		q.ActiveOnly = *v
	}
	if err := is.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := svc.ListReleases(r.Context(), q)
	replyAs(s, w, r, p, err, func(p *skillrel.Page[bay.SkillRelease]) bayapi.SkillReleaseList {
		out := bayapi.SkillReleaseList{Items: make([]bayapi.SkillReleaseResponse, 0, len(p.Items)), Total: p.Total}
		for _, v := range p.Items {
			out.Items = append(out.Items, renderRelease(v))
		}
		return out
	})
}

func (s *Server) releaseHealth(w http.ResponseWriter, r *http.Request) {
	skillByID(s, w, r, "release_id", func(ctx context.Context, svc *skillrel.Service, owner, id string) (*skillrel.Health, error) {
		return svc.Health(ctx, owner, id)
	}, renderHealth)
}

func (s *Server) rollbackRelease(w http.ResponseWriter, r *http.Request) {
	skillByID(s, w, r, "release_id", func(ctx context.Context, svc *skillrel.Service, owner, id string) (*bay.SkillRelease, error) {
		return svc.Rollback(ctx, owner, id, false)
	}, renderRelease)
}

// ---- rendering ----

func renderCandidate(c *bay.SkillCandidate) bayapi.SkillCandidateResponse {
	return bayapi.SkillCandidateResponse{
		ID: c.ID, SkillKey: c.SkillKey, ScenarioKey: c.ScenarioKey, PayloadRef: c.PayloadRef, SkillType: c.SkillType,
		AutoReleaseEligible: c.AutoReleaseEligible, AutoReleaseReason: c.AutoReleaseReason, Summary: c.Summary, UsageNotes: c.UsageNotes,
		Preconditions: jsonOrNull(c.Preconditions), Postconditions: jsonOrNull(c.Postconditions), SourceExecutionIDs: c.SourceExecutionIDs,
		Status: c.Status, LatestScore: c.LatestScore, LatestPass: c.LatestPass, LastEvaluatedAt: bayapi.TimePtr(c.LastEvaluatedAt),
		PromotionReleaseID: c.PromotionReleaseID, CreatedBy: c.CreatedBy, CreatedAt: bayapi.NewTime(c.CreatedAt), UpdatedAt: bayapi.NewTime(c.UpdatedAt),
		IsDeleted: c.IsDeleted, DeletedAt: bayapi.TimePtr(c.DeletedAt), DeletedBy: c.DeletedBy, DeleteReason: c.Reason,
	}
}

func jsonOrNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

func renderRelease(v *bay.SkillRelease) bayapi.SkillReleaseResponse {
	return bayapi.SkillReleaseResponse{
		ID: v.ID, SkillKey: v.SkillKey, CandidateID: v.CandidateID, Version: v.Version, Stage: v.Stage, IsActive: v.IsActive,
		ReleaseMode: v.ReleaseMode, PromotedBy: v.PromotedBy, PromotedAt: bayapi.NewTime(v.PromotedAt), RollbackOf: v.RollbackOf,
		AutoPromotedFrom: v.AutoPromotedFrom, HealthWindowEndAt: bayapi.TimePtr(v.HealthWindowEndAt), UpgradeOfReleaseID: v.UpgradeOfReleaseID,
		UpgradeReason: v.UpgradeReason, ChangeSummary: v.ChangeSummary, IsDeleted: v.IsDeleted, DeletedAt: bayapi.TimePtr(v.DeletedAt),
		DeletedBy: v.DeletedBy, DeleteReason: v.Reason,
	}
}

func renderHealth(h *skillrel.Health) bayapi.ReleaseHealthResponse {
	return bayapi.ReleaseHealthResponse{
		ReleaseID: h.Release.ID, SkillKey: h.Release.SkillKey, Stage: h.Release.Stage,
		WindowStartAt: bayapi.NewTime(h.WindowStart), WindowEndAt: bayapi.NewTime(h.WindowEnd), WindowComplete: h.WindowComplete,
		Samples: h.Observed.Samples, SuccessRate: h.Observed.SuccessRate, ErrorRate: h.Observed.ErrorRate, P95Duration: h.Observed.P95Duration,
		BaselineSuccessRate: h.Baseline.SuccessRate, BaselineErrorRate: h.Baseline.ErrorRate, BaselineSamples: h.Baseline.Samples,
		SuccessDrop: h.SuccessDrop, ErrorRateMultiplier: h.ErrorRateMultiplier, Healthy: h.Healthy, ShouldRollback: h.ShouldRollback,
		RollbackReasons: h.Reasons, Thresholds: bayapi.HealthThresholds{SuccessDrop: h.Thresholds.SuccessDrop, ErrorRateMultiplier: h.Thresholds.ErrorRateMultiplier},
	}
}
