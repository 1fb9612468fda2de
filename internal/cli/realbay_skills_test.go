package cli_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/mcp"
	"github.com/shipyard-dev/shipyard/sdk"
)

// The skill lifecycle through the MCP tools and the SDK against the real bay: a candidate
// from two executions, a failing then a passing evaluation, canary, health from tagged
// executions, stable, rollback, deletes; with the reference's result texts.
func TestRealBaySkillLifecycle(t *testing.T) {
	url := startRealBay(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := sdk.New(url, realAPIKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mcp.NewHTTPHandler(mcp.LoopbackClients(func() string { return strings.TrimPrefix(url, "http://") }), mcp.DefaultOptions()))
	defer srv.Close()
	cl := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "t", Version: "1"}, nil)
	s, err := cl.Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearerRT(realAPIKey)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tool := func(name string, args map[string]any, wantErr bool) string {
		t.Helper()
		res, err := s.CallTool(ctx, &mcpsdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		text := res.Content[0].(*mcpsdk.TextContent).Text
		if res.IsError != wantErr {
			t.Fatalf("%s: error=%v: %s", name, res.IsError, text)
		}
		return text
	}
	field := func(text, key string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + key + `:? (\S+)$`).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no %s in %q", key, text)
		}
		return m[1]
	}

	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: 600 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	exec := func(code, tags string) string {
		r, err := c.ExecPython(ctx, sb.ID, sdk.PythonRequest{Code: code, ExecOptions: sdk.ExecOptions{Tags: tags}})
		if err != nil || !r.Success {
			t.Fatalf("python %q: %+v %v", code, r, err)
		}
		return r.ExecutionID
	}
	e1, e2 := exec("print(1)", ""), exec("print(2)", "")

	text := tool("create_skill_payload", map[string]any{"payload": map[string]any{"steps": []any{"clean"}}, "kind": "candidate_payload"}, false)
	ref := field(text, "Created skill payload")
	if !strings.HasPrefix(ref, "blob:blob-") || !strings.HasSuffix(text, "\nkind: candidate_payload") {
		t.Fatalf("create_skill_payload: %q", text)
	}
	if text = tool("get_skill_payload", map[string]any{"payload_ref": ref}, false); text != "payload_ref: "+ref+"\nkind: candidate_payload\npayload:\n{\"steps\":[\"clean\"]}" {
		t.Fatalf("get_skill_payload: %q", text)
	}
	tool("create_skill_payload", map[string]any{"payload": "x"}, true)

	candidate := func() string {
		text := tool("create_skill_candidate", map[string]any{"skill_key": "csv-clean", "source_execution_ids": []any{e1, e2},
			"payload_ref": ref, "preconditions": map[string]any{"file": "data.csv"}}, false)
		if !strings.HasSuffix(text, "\nskill_key: csv-clean\nstatus: draft\nsource_execution_ids: "+e1+", "+e2) {
			t.Fatalf("create_skill_candidate: %q", text)
		}
		return field(text, "Created skill candidate")
	}
	c1 := candidate()
	if text = tool("evaluate_skill_candidate", map[string]any{"candidate_id": c1, "passed": false}, false); !strings.HasSuffix(text, "\npassed: False\nscore: None") {
		t.Fatalf("failing evaluation: %q", text)
	}
	if text = tool("promote_skill_candidate", map[string]any{"candidate_id": c1}, true); !strings.HasPrefix(text,
		"**API Error:** [conflict] Candidate has no passing evaluation; promotion is blocked") {
		t.Fatalf("blocked promotion: %q", text)
	}
	if text = tool("list_skill_candidates", map[string]any{"status": "rejected"}, false); text != "Total: 1\n- "+c1+" | csv-clean | status=rejected | pass=False" {
		t.Fatalf("list_skill_candidates: %q", text)
	}
	if text = tool("evaluate_skill_candidate", map[string]any{"candidate_id": c1, "passed": true, "score": 1}, false); !strings.HasSuffix(text, "\npassed: True\nscore: 1.0") {
		t.Fatalf("passing evaluation: %q", text)
	}
	text = tool("promote_skill_candidate", map[string]any{"candidate_id": c1}, false)
	r1 := field(text, "release_id")
	if !strings.HasSuffix(text, "\nskill_key: csv-clean\nversion: 1\nstage: canary\nactive: True\nupgrade_of_release_id: None\nupgrade_reason: None") {
		t.Fatalf("promote: %q", text)
	}

	// Two executions tagged with the release, one failing: health from them.
	exec("print(3)", "release:"+r1)
	if r, err := c.ExecPython(ctx, sb.ID, sdk.PythonRequest{Code: "1/0", ExecOptions: sdk.ExecOptions{Tags: "release:" + r1}}); err != nil || r.Success {
		t.Fatalf("failing tagged execution: %+v %v", r, err)
	}
	h, err := c.SkillReleaseHealth(ctx, r1)
	if err != nil || h.Samples != 2 || h.SuccessRate != 0.5 || h.Healthy || !h.ShouldRollback ||
		strings.Join(h.RollbackReasons, ",") != "success_rate_drop,error_rate_regression" || h.Thresholds.SuccessDrop != 0.03 {
		t.Fatalf("health: %+v %v", h, err)
	}

	c2 := candidate()
	tool("evaluate_skill_candidate", map[string]any{"candidate_id": c2, "passed": true, "score": 0.95}, false)
	text = tool("promote_skill_candidate", map[string]any{"candidate_id": c2, "stage": "stable", "upgrade_of_release_id": r1, "upgrade_reason": "fix"}, false)
	r2 := field(text, "release_id")
	if !strings.Contains(text, "\nversion: 2\nstage: stable\nactive: True\nupgrade_of_release_id: "+r1+"\nupgrade_reason: fix") {
		t.Fatalf("stable: %q", text)
	}
	if text = tool("list_skill_releases", map[string]any{"skill_key": "csv-clean"}, false); text !=
		"Total: 2\n- "+r2+" | csv-clean v2 | stage=stable | active=True\n- "+r1+" | csv-clean v1 | stage=canary | active=False" {
		t.Fatalf("list_skill_releases: %q", text)
	}
	tool("list_skill_releases", map[string]any{"stage": "beta"}, true)

	text = tool("rollback_skill_release", map[string]any{"release_id": r2}, false)
	r3 := field(text, "new_release_id")
	if !strings.HasPrefix(text, "Rollback completed.\n") || !strings.HasSuffix(text, "\nskill_key: csv-clean\nversion: 3\nrollback_of: "+r2) {
		t.Fatalf("rollback: %q", text)
	}
	if cand, err := c.GetSkillCandidate(ctx, c2); err != nil || cand.Status != "rolled_back" {
		t.Fatalf("rolled back candidate: %+v %v", cand, err)
	}
	if text = tool("delete_skill_candidate", map[string]any{"candidate_id": c1}, true); !strings.Contains(text, "Candidate referenced by active release cannot be deleted") {
		t.Fatalf("delete live candidate: %q", text)
	}
	text = tool("delete_skill_release", map[string]any{"release_id": r3, "reason": "done"}, false)
	if !regexp.MustCompile(`^Skill release deleted: ` + r3 + `\ndeleted_at: \d{4}-\d\d-\d\dT[\d:.]+\ndeleted_by: default\ndelete_reason: done$`).MatchString(text) {
		t.Fatalf("delete_skill_release: %q", text)
	}
	if text = tool("delete_skill_candidate", map[string]any{"candidate_id": c1}, false); !strings.HasSuffix(text, "\ndeleted_by: default\ndelete_reason: None") {
		t.Fatalf("delete_skill_candidate: %q", text)
	}
	if _, err := c.GetSkillCandidate(ctx, c1); !sdk.IsCode(err, bayapi.CodeNotFound) {
		t.Fatalf("deleted candidate: %v", err)
	}
	if text = tool("list_skill_candidates", map[string]any{"skill_key": "nope"}, false); text != "No skill candidates found." {
		t.Fatalf("empty list: %q", text)
	}

	// The CLI's verbs.
	r := runReal(t, url, "", "skill", "payload", `{"a":[1]}`)
	pref := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(pref, "blob:blob-") {
		t.Fatalf("skill payload: %+v", r)
	}
	if r = runReal(t, url, "", "skill", "payload", pref); r.code != 0 || r.stdout != "{\"a\":[1]}\n" {
		t.Fatalf("skill payload get: %+v", r)
	}
	if r = runReal(t, url, "", "skill", "releases", "--skill", "csv-clean"); r.code != 0 ||
		r.stdout != "total 2\n"+r2+" csv-clean v2 stable active=false\n"+r1+" csv-clean v1 canary active=false\n" {
		t.Fatalf("skill releases: %+v", r)
	}
	if r = runReal(t, url, "", "skill", "health", r1); r.code != 0 || !strings.HasPrefix(r.stdout, "samples=2 success_rate=0.5 ") {
		t.Fatalf("skill health: %+v", r)
	}
	if r = runReal(t, url, "", "-o", "json", "skill", "show", c2); r.code != 0 || !strings.Contains(r.stdout, `"status": "rolled_back"`) {
		t.Fatalf("skill show: %+v", r)
	}
	if r = runReal(t, url, "", "skill", "rollback", r1); r.code == 0 || !strings.Contains(r.stderr, "Rollback is unavailable: no previous release exists") {
		t.Fatalf("skill rollback of v1: %+v", r)
	}
}
