package e2e

import (
	"strings"
	"testing"
	"time"
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

// greeterPage is a form flow any sandbox can reach: a data: URL, no server needed.
const greeterPage = `data:text/html,<title>Form</title><input id=who><button onclick=document.title=who.value>Go</button>`

// Browser learning on the real engine: a recorded three-step flow becomes a candidate that is
// replayed in a fresh sandbox, passes and goes to canary; a flow that only worked against a
// page of its own sandbox fails its replays and is rejected.
func TestBrowserLearningReplays(t *testing.T) {
	t.Parallel()
	b := startBay(t, bayOptions{profiles: browserProfiles, extraConfig: "browser_learning:\n  interval_seconds: 2\n"})
	id := b.create(map[string]any{"profile": "browser-python"}, nil).Str("id")
	base := "/v1/sandboxes/" + id

	good := expect(t, b.do("POST", base+"/browser/exec_batch", map[string]any{"learn": true, "tags": "skill:greeter",
		"description": "Greet a visitor!", "commands": []string{"open '" + greeterPage + "'", "fill #who Ada", "click button", "get title"}}, nil), 200, "recorded flow")
	if good.Get("success") != true || strings.TrimSpace(good.Get("results").([]any)[3].(map[string]any)["stdout"].(string)) != "Ada" {
		t.Fatalf("recorded flow: %s", good)
	}
	b.writeFile(id, "site/index.html", formPage)
	serveSite(t, b, id)
	local := expect(t, b.do("POST", base+"/browser/exec_batch", map[string]any{"learn": true, "tags": "skill:local-form",
		"commands": []string{"open http://ship:8000/index.html", "fill #name Bob", "click button"}}, nil), 200, "local flow")
	if local.Get("success") != true {
		t.Fatalf("local flow: %s", local)
	}

	// Wait for the learner to process both rows.
	deadline := time.Now().Add(4 * time.Minute)
	for _, ex := range []string{good.Str("execution_id"), local.Str("execution_id")} {
		for {
			row := expect(t, b.do("GET", base+"/history/"+ex, nil, nil), 200, "row")
			if st := row.Str("learn_status"); st == "processed" {
				break
			} else if st == "error" || st == "skipped" || time.Now().After(deadline) {
				t.Fatalf("learning of %s: %s", ex, row)
			}
			time.Sleep(time.Second)
		}
	}

	cands := expect(t, b.do("GET", "/v1/skills/candidates?skill_key=greeter", nil, nil), 200, "greeter candidates")
	if cands.Get("total") != float64(1) {
		t.Fatalf("greeter candidates: %s", cands)
	}
	c := cands.Get("items").([]any)[0].(map[string]any)
	if c["status"] != "promoted_canary" || c["skill_type"] != "browser" || c["created_by"] != "system:auto" || c["latest_pass"] != true ||
		c["latest_score"] != float64(1) || c["scenario_key"] != "greet-a-visitor" || c["auto_release_eligible"] != true {
		t.Fatalf("greeter candidate: %v", c)
	}
	seg := expect(t, b.do("GET", "/v1/skills/payloads/"+c["payload_ref"].(string), nil, nil), 200, "segment")
	if seg.Str("kind") != "browser_segment" || len(seg.Get("payload.commands").([]any)) != 3 {
		t.Fatalf("segment: %s", seg)
	}
	rels := expect(t, b.do("GET", "/v1/skills/releases?skill_key=greeter&active_only=true", nil, nil), 200, "greeter releases")
	rel := rels.Get("items").([]any)[0].(map[string]any)
	if rel["stage"] != "canary" || rel["release_mode"] != "auto" || rel["health_window_end_at"] == nil || rel["promoted_by"] != "system:auto" {
		t.Fatalf("greeter release: %s", rels)
	}

	local2 := expect(t, b.do("GET", "/v1/skills/candidates?skill_key=local-form", nil, nil), 200, "local candidates")
	lc := local2.Get("items").([]any)[0].(map[string]any)
	if lc["status"] != "rejected" || lc["latest_pass"] != false || lc["latest_score"] != float64(0) {
		t.Fatalf("local-form candidate (its page is not reachable from a fresh sandbox): %v", lc)
	}

	// The released skill replays in the recording sandbox; its run feeds the canary's health.
	run := expect(t, b.do("POST", base+"/browser/skills/greeter/run", map[string]any{}, nil), 200, "run")
	if run.Get("success") != true || run.Str("release_id") != rel["id"] {
		t.Fatalf("run: %s", run)
	}
	health := expect(t, b.do("GET", "/v1/skills/releases/"+rel["id"].(string)+"/health", nil, nil), 200, "health")
	if health.Get("samples") != float64(1) || health.Get("healthy") != true {
		t.Fatalf("health: %s", health)
	}
}
