package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

// The reference's skill lifecycle tools: payloads, candidates, evaluations, releases. Their
// result texts are the reference's (Python renders booleans True/False and absent values None).

var (
	candidateIDProp = prop{name: "candidate_id", typ: "string", desc: "Skill candidate ID."}
	releaseIDProp   = prop{name: "release_id", typ: "string", desc: "Skill release ID."}
	skillKeyProp    = prop{name: "skill_key", typ: "string", desc: "Skill key."}
	stageProp       = prop{name: "stage", typ: "string", desc: "Release stage: canary or stable."}
	skillLimitProp  = prop{name: "limit", typ: "integer", desc: "Max number of items (1-500). Defaults to 50.", min: f64(1), max: f64(bayapi.MaxSkillListLimit), def: 50}
	offsetProp      = prop{name: "offset", typ: "integer", desc: "Number of items to skip. Defaults to 0.", min: f64(0), def: 0}
	reasonProp      = prop{name: "reason", typ: "string", desc: "Optional reason for the deletion."}
)

func (s *server) skillTools() []toolDef {
	return []toolDef{
		{name: "create_skill_payload", desc: "Store a JSON payload (object or array) for skills and return its payload_ref.",
			props: []prop{{name: "payload", typ: "object", desc: "JSON object or array to store."},
				{name: "kind", typ: "string", desc: "Payload kind. Defaults to 'generic'."}},
			required: []string{"payload"}, run: s.createSkillPayload},
		{name: "get_skill_payload", desc: "Get a skill payload by its payload_ref (blob:...).", readOnly: true,
			props:    []prop{{name: "payload_ref", typ: "string", desc: "Payload reference, e.g. blob:blob-0123456789ab."}},
			required: []string{"payload_ref"}, run: s.getSkillPayload},
		{name: "create_skill_candidate", desc: "Create a reusable skill candidate from execution IDs.",
			props: []prop{skillKeyProp, {name: "source_execution_ids", typ: "array", items: "string", desc: "Execution IDs the skill is built from."},
				{name: "scenario_key", typ: "string", desc: "Optional scenario key."},
				{name: "payload_ref", typ: "string", desc: "Optional payload reference (blob:...)."},
				{name: "summary", typ: "string", desc: "Optional summary."},
				{name: "usage_notes", typ: "string", desc: "Optional usage notes."},
				{name: "preconditions", typ: "object", desc: "Optional preconditions object."},
				{name: "postconditions", typ: "object", desc: "Optional postconditions object."}},
			required: []string{"skill_key", "source_execution_ids"}, run: s.createSkillCandidate},
		{name: "evaluate_skill_candidate", desc: "Record an evaluation result for a skill candidate.",
			props: []prop{candidateIDProp, {name: "passed", typ: "boolean", desc: "Whether the evaluation passed."},
				{name: "score", typ: "number", desc: "Optional score."},
				{name: "benchmark_id", typ: "string", desc: "Optional benchmark ID."},
				{name: "report", typ: "string", desc: "Optional report text."}},
			required: []string{"candidate_id", "passed"}, run: s.evaluateSkillCandidate},
		{name: "promote_skill_candidate", desc: "Promote a skill candidate with a passing evaluation to a release.",
			props: []prop{candidateIDProp, {name: "stage", typ: "string", desc: "Release stage: canary or stable. Defaults to canary.", def: "canary"},
				{name: "upgrade_of_release_id", typ: "string", desc: "Optional release this one upgrades."},
				{name: "upgrade_reason", typ: "string", desc: "Optional reason for the upgrade."},
				{name: "change_summary", typ: "string", desc: "Optional summary of the change."}},
			required: []string{"candidate_id"}, run: s.promoteSkillCandidate},
		{name: "list_skill_candidates", desc: "List skill candidates with optional filters.", readOnly: true,
			props: []prop{{name: "status", typ: "string", desc: "Optional status filter."}, skillKeyProp, skillLimitProp, offsetProp},
			run:   s.listSkillCandidates},
		{name: "list_skill_releases", desc: "List skill releases with optional filters.", readOnly: true,
			props: []prop{skillKeyProp, {name: "active_only", typ: "boolean", desc: "Only active releases."}, stageProp, skillLimitProp, offsetProp},
			run:   s.listSkillReleases},
		{name: "delete_skill_release", desc: "Soft-delete a skill release.", destructive: true,
			props: []prop{releaseIDProp, reasonProp}, required: []string{"release_id"}, run: s.deleteSkillRelease},
		{name: "delete_skill_candidate", desc: "Soft-delete a skill candidate that no active release uses.", destructive: true,
			props: []prop{candidateIDProp, reasonProp}, required: []string{"candidate_id"}, run: s.deleteSkillCandidate},
		{name: "rollback_skill_release", desc: "Roll a release back to the previous version (a new release copied from it).",
			props: []prop{releaseIDProp}, required: []string{"release_id"}, run: s.rollbackSkillRelease},
	}
}

// pyStr renders an optional value as Python's str() does: None when absent.
func pyStr[T any](p *T) string {
	if p == nil {
		return "None"
	}
	switch v := any(*p).(type) {
	case bool:
		return pyBool(v)
	case float64:
		return pyFloat(v)
	}
	return fmt.Sprint(*p)
}

// pyText renders an optional text as Python would: None when unset ("").
func pyText(s string) string {
	if s == "" {
		return "None"
	}
	return s
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// pyFloat renders a float as Python's repr: integral values keep ".0".
func pyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

func (s *server) createSkillPayload(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
	payload, ok := a.m["payload"]
	switch payload.(type) {
	case map[string]any, []any:
	default:
		ok = false
	}
	if !ok {
		return nil, invalid("field 'payload' must be a JSON object or array")
	}
	kind, err := a.optStr("kind")
	if err != nil {
		return nil, err
	}
	r, err := c.CreateSkillPayload(ctx, payload, kind)
	if err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("Created skill payload %s\nkind: %s", r.PayloadRef, r.Kind)), nil
}

func (s *server) getSkillPayload(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
	ref, err := a.requireStr("payload_ref")
	if err != nil {
		return nil, err
	}
	r, err := c.GetSkillPayload(ctx, ref)
	if err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("payload_ref: %s\nkind: %s\npayload:\n%s", r.PayloadRef, r.Kind, s.truncate(string(r.Payload)))), nil
}

// conditions reads an optional JSON object argument.
func (a args) conditions(k string) (json.RawMessage, error) {
	v, ok := a.m[k]
	if !ok || v == nil {
		return nil, nil
	}
	if _, isObj := v.(map[string]any); !isObj {
		return nil, invalid("field '%s' must be an object", k)
	}
	return json.Marshal(v)
}

func (s *server) createSkillCandidate(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
	key, err := a.requireStr("skill_key")
	if err != nil {
		return nil, err
	}
	ids, err := a.strList("source_execution_ids")
	if err != nil {
		return nil, err
	}
	req := sdk.CandidateRequest{SkillKey: key, SourceExecutionIDs: ids}
	for k, dst := range map[string]*string{"scenario_key": &req.ScenarioKey, "payload_ref": &req.PayloadRef, "summary": &req.Summary, "usage_notes": &req.UsageNotes} {
		if *dst, err = a.optStr(k); err != nil {
			return nil, err
		}
	}
	if req.Preconditions, err = a.conditions("preconditions"); err != nil {
		return nil, err
	}
	if req.Postconditions, err = a.conditions("postconditions"); err != nil {
		return nil, err
	}
	r, err := c.CreateSkillCandidate(ctx, req)
	if err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("Created skill candidate %s\nskill_key: %s\nstatus: %s\nsource_execution_ids: %s",
		r.ID, r.SkillKey, r.Status, strings.Join(r.SourceExecutionIDs, ", "))), nil
}

func (s *server) evaluateSkillCandidate(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
	id, err := a.requireStr("candidate_id")
	if err != nil {
		return nil, err
	}
	passed, isBool := a.m["passed"].(bool)
	if !isBool {
		return nil, invalid("field 'passed' must be a boolean")
	}
	req := sdk.EvaluateRequest{Passed: passed}
	if v, ok := a.m["score"]; ok && v != nil {
		f, isNum := v.(float64)
		if !isNum {
			return nil, invalid("field 'score' must be a number")
		}
		req.Score = &f
	}
	if req.BenchmarkID, err = a.optStr("benchmark_id"); err != nil {
		return nil, err
	}
	if req.Report, err = a.optStr("report"); err != nil {
		return nil, err
	}
	r, err := c.EvaluateSkillCandidate(ctx, id, req)
	if err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("Evaluation recorded: %s\ncandidate_id: %s\npassed: %s\nscore: %s",
		r.ID, r.CandidateID, pyBool(r.Passed), pyStr(r.Score))), nil
}

// stage reads an optional release stage (canary or stable).
func (a args) stage(def string) (string, error) {
	v, ok, err := a.str("stage")
	if err != nil || !ok {
		return def, err
	}
	if v != "canary" && v != "stable" {
		return "", invalid("field 'stage' must be one of: canary, stable")
	}
	return v, nil
}

func (s *server) promoteSkillCandidate(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
	id, err := a.requireStr("candidate_id")
	if err != nil {
		return nil, err
	}
	stage, err := a.stage("canary")
	if err != nil {
		return nil, err
	}
	req := sdk.PromoteRequest{Stage: stage}
	for k, dst := range map[string]*string{"upgrade_of_release_id": &req.UpgradeOfReleaseID, "upgrade_reason": &req.UpgradeReason, "change_summary": &req.ChangeSummary} {
		if *dst, err = a.optStr(k); err != nil {
			return nil, err
		}
	}
	r, err := c.PromoteSkillCandidate(ctx, id, req)
	if err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("Candidate promoted: %s\nrelease_id: %s\nskill_key: %s\nversion: %d\nstage: %s\nactive: %s\nupgrade_of_release_id: %s\nupgrade_reason: %s",
		id, r.ID, r.SkillKey, r.Version, r.Stage, pyBool(r.IsActive), pyText(r.UpgradeOfReleaseID), pyText(r.UpgradeReason))), nil
}

// listRequest reads the shared list arguments.
func (a args) listRequest() (sdk.SkillListRequest, error) {
	var r sdk.SkillListRequest
	var err error
	if r.SkillKey, err = a.optStr("skill_key"); err != nil {
		return r, err
	}
	limit, err := a.integer("limit", 50, 1, bayapi.MaxSkillListLimit)
	if err != nil {
		return r, err
	}
	offset, err := a.integer("offset", 0, 0, -1)
	if err != nil {
		return r, err
	}
	r.Limit, r.Offset = int(limit), int(offset)
	return r, nil
}

func (s *server) listSkillCandidates(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
	req, err := a.listRequest()
	if err != nil {
		return nil, err
	}
	if req.Status, err = a.optStr("status"); err != nil {
		return nil, err
	}
	r, err := c.ListSkillCandidates(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(r.Items) == 0 {
		return textResult("No skill candidates found."), nil
	}
	lines := []string{fmt.Sprintf("Total: %d", r.Total)}
	for _, it := range r.Items {
		lines = append(lines, fmt.Sprintf("- %s | %s | status=%s | pass=%s", it.ID, it.SkillKey, it.Status, pyStr(it.LatestPass)))
	}
	return textResult(s.truncate(strings.Join(lines, "\n"))), nil
}

func (s *server) listSkillReleases(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
	req, err := a.listRequest()
	if err != nil {
		return nil, err
	}
	if req.ActiveOnly, err = a.boolean("active_only", false); err != nil {
		return nil, err
	}
	if req.Stage, err = a.stage(""); err != nil {
		return nil, err
	}
	r, err := c.ListSkillReleases(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(r.Items) == 0 {
		return textResult("No skill releases found."), nil
	}
	lines := []string{fmt.Sprintf("Total: %d", r.Total)}
	for _, it := range r.Items {
		lines = append(lines, fmt.Sprintf("- %s | %s v%d | stage=%s | active=%s", it.ID, it.SkillKey, it.Version, it.Stage, pyBool(it.IsActive)))
	}
	return textResult(s.truncate(strings.Join(lines, "\n"))), nil
}

// deletedText is the result of the delete tools.
func deletedText(what, id string, d *sdk.Deleted) string {
	at := "None"
	if !d.DeletedAt.IsZero() {
		at = bayapi.FormatTime(d.DeletedAt)
	}
	return fmt.Sprintf("%s deleted: %s\ndeleted_at: %s\ndeleted_by: %s\ndelete_reason: %s", what, id, at, pyText(d.DeletedBy), pyText(d.DeleteReason))
}

func (s *server) deleteSkillRelease(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
	return s.deleteSkill(ctx, a, "release_id", "Skill release", c.DeleteSkillRelease)
}

func (s *server) deleteSkillCandidate(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
	return s.deleteSkill(ctx, a, "candidate_id", "Skill candidate", c.DeleteSkillCandidate)
}

func (s *server) deleteSkill(ctx context.Context, a args, key, what string,
	del func(ctx context.Context, id, reason string) (*sdk.Deleted, error)) (*mcpsdk.CallToolResult, error) {
	id, err := a.requireStr(key)
	if err != nil {
		return nil, err
	}
	reason, err := a.optStr("reason")
	if err != nil {
		return nil, err
	}
	d, err := del(ctx, id, reason)
	if err != nil {
		return nil, err
	}
	return textResult(deletedText(what, id, d)), nil
}

func (s *server) rollbackSkillRelease(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
	id, err := a.requireStr("release_id")
	if err != nil {
		return nil, err
	}
	r, err := c.RollbackSkillRelease(ctx, id)
	if err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("Rollback completed.\nnew_release_id: %s\nskill_key: %s\nversion: %d\nrollback_of: %s",
		r.ID, r.SkillKey, r.Version, pyText(r.RollbackOf))), nil
}
