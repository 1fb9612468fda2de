package e2e

import (
	"strings"
	"testing"
)

// Browser traces and skill replay on the real engine: a command kept with its trace, a
// learning batch whose trace is kept but not returned, then a release of a form flow replayed
// through gull, its history row tagged for the release's health.
func TestBrowserTracesAndSkillReplay(t *testing.T) {
	t.Parallel()
	b := startBay(t, bayOptions{profiles: browserProfiles})
	id := b.create(map[string]any{"profile": "browser-python"}, nil).Str("id")
	b.writeFile(id, "site/index.html", formPage)
	serveSite(t, b, id)
	base := "/v1/sandboxes/" + id

	// include_trace: the trace is stored and its reference returned.
	open := expect(t, b.do("POST", base+"/browser/exec", map[string]any{"cmd": "open http://ship:8000/index.html", "include_trace": true}, nil), 200, "open")
	ref := open.Str("trace_ref")
	if open.Get("success") != true || !strings.HasPrefix(ref, "blob:blob-") {
		t.Fatalf("exec with include_trace: %s", open)
	}
	tr := expect(t, b.do("GET", base+"/browser/traces/"+ref, nil, nil), 200, "trace")
	if tr.Str("trace_ref") != ref || tr.Str("trace.kind") != "browser_exec_trace" {
		t.Fatalf("trace: %s", tr)
	}
	step := tr.Get("trace.steps").([]any)[0].(map[string]any)
	if step["kind"] != "individual_action" || step["cmd"] != "open http://ship:8000/index.html" || step["exit_code"] != float64(0) ||
		step["step_index"] != float64(0) || !strings.Contains(step["stdout"].(string), "Form") {
		t.Fatalf("trace step: %v", step)
	}
	expectError(t, b.do("GET", base+"/browser/traces/file:x", nil, nil), 400, "validation_error", "foreign ref")
	expectError(t, b.do("GET", base+"/browser/traces/blob:blob-000000000000", nil, nil), 404, "not_found", "missing trace")

	// learn without include_trace: kept for learning, reference only in the history row.
	learn := expect(t, b.do("POST", base+"/browser/exec_batch", map[string]any{
		"commands": []string{"fill #name Ada", "click button", "get title"}, "learn": true}, nil), 200, "learning batch")
	if learn.Get("success") != true || learn.Get("trace_ref") != nil {
		t.Fatalf("learning batch: %s", learn)
	}
	row := expect(t, b.do("GET", base+"/history/"+learn.Str("execution_id"), nil, nil), 200, "history row")
	if row.Get("learn_enabled") != true || row.Str("learn_status") != "pending" || !strings.HasPrefix(row.Str("payload_ref"), "blob:") {
		t.Fatalf("learning history row: %s", row)
	}
	bt := expect(t, b.do("GET", base+"/browser/traces/"+row.Str("payload_ref"), nil, nil), 200, "batch trace")
	if bt.Str("trace.kind") != "browser_batch_trace" || bt.Get("trace.total_steps") != float64(3) || bt.Get("trace.success") != true ||
		len(bt.Get("trace.steps").([]any)) != 3 {
		t.Fatalf("batch trace: %s", bt)
	}
	if plain := expect(t, b.do("GET", base+"/history/"+open.Str("execution_id"), nil, nil), 200, "row"); plain.Str("learn_status") != "skipped" {
		t.Fatalf("row without learning: %s", plain)
	}

	// A release of the form flow, replayed.
	flow := []string{"open http://ship:8000/index.html", "fill #name Grace", " ", "click button", "get title"}
	payload := expect(t, b.do("POST", "/v1/skills/payloads", map[string]any{"payload": map[string]any{"commands": flow}, "kind": "candidate_payload"}, nil), 201, "payload")
	cand := expect(t, b.do("POST", "/v1/skills/candidates", map[string]any{"skill_key": "form-flow", "payload_ref": payload.Str("payload_ref"),
		"source_execution_ids": []string{open.Str("execution_id"), learn.Str("execution_id")}}, nil), 201, "candidate")
	expectError(t, b.do("POST", base+"/browser/skills/form-flow/run", map[string]any{}, nil), 404, "not_found", "run before release")
	expect(t, b.do("POST", "/v1/skills/candidates/"+cand.Str("id")+"/evaluate", map[string]any{"passed": true, "score": 1.0}, nil), 200, "evaluate")
	rel := expect(t, b.do("POST", "/v1/skills/candidates/"+cand.Str("id")+"/promote", map[string]any{"stage": "canary"}, nil), 200, "promote")

	run := expect(t, b.do("POST", base+"/browser/skills/form-flow/run", map[string]any{"tags": "replay", "timeout": 120}, nil), 200, "run")
	results, _ := run.Get("results").([]any)
	if run.Str("skill_key") != "form-flow" || run.Str("release_id") != rel.Str("id") || run.Get("success") != true ||
		run.Get("total_steps") != float64(4) || run.Get("completed_steps") != float64(4) || len(results) != 4 || run.Get("trace_ref") != nil {
		t.Fatalf("run: %s", run)
	}
	if title := strings.TrimSpace(results[3].(map[string]any)["stdout"].(string)); title != "Hello, Grace" {
		t.Fatalf("title after the replay = %q", title)
	}
	hist := expect(t, b.do("GET", base+"/history/"+run.Str("execution_id"), nil, nil), 200, "run row")
	if hist.Str("exec_type") != "browser_batch" || hist.Str("tags") != "release:"+rel.Str("id")+",replay,skill:form-flow,stage:canary" ||
		hist.Get("learn_enabled") != false || hist.Str("learn_status") != "skipped" {
		t.Fatalf("run history row: %s", hist)
	}
	health := expect(t, b.do("GET", "/v1/skills/releases/"+rel.Str("id")+"/health", nil, nil), 200, "health")
	if health.Get("samples") != float64(1) || health.Get("success_rate") != float64(1) || health.Get("healthy") != true {
		t.Fatalf("health after one replay: %s", health)
	}
	traced := expect(t, b.do("POST", base+"/browser/skills/form-flow/run", map[string]any{"include_trace": true}, nil), 200, "traced run")
	if !strings.HasPrefix(traced.Str("trace_ref"), "blob:") {
		t.Fatalf("traced run: %s", traced)
	}
	expectError(t, b.do("POST", base+"/browser/skills/form-flow/run", map[string]any{"timeout": 601}, nil), 422, "validation_error", "run timeout")
}
