package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestSkillLifecycleOverHTTP walks a skill through the API: candidate from two executions,
// a failing then a passing evaluation, canary, health from tagged executions, stable,
// rollback, deletes; with the contract's status codes, error codes and messages.
func TestSkillLifecycleOverHTTP(t *testing.T) {
	h := newHarness(t)
	sb := h.sandbox("alice")
	exec := func(code, tags string) string {
		r := h.do("POST", "/v1/sandboxes/"+sb+"/python/exec", "alice", map[string]any{"code": code, "tags": tags})
		h.expect(r, 200, "")
		return r.json(t)["execution_id"].(string)
	}
	e1, e2 := exec("print(1)", ""), exec("print(2)", "")

	// Payloads.
	r := h.do("POST", "/v1/skills/payloads", "alice", `{"payload":{"commands":["open http://x/","click @e1"]},"kind":"candidate_payload"}`)
	h.expect(r, 201, "")
	ref := r.json(t)["payload_ref"].(string)
	if !strings.HasPrefix(ref, "blob:blob-") || r.json(t)["kind"] != "candidate_payload" {
		t.Fatalf("payload: %s", r.body)
	}
	r = h.do("GET", "/v1/skills/payloads/"+ref, "alice", nil)
	h.expect(r, 200, "")
	if !strings.Contains(string(r.body), `"payload":{"commands":["open http://x/","click @e1"]}`) {
		t.Fatalf("get payload: %s", r.body)
	}
	h.expect(h.do("GET", "/v1/skills/payloads/"+ref, "bob", nil), 404, "not_found")
	h.expect(h.do("GET", "/v1/skills/payloads/s3:x", "alice", nil), 400, "validation_error")
	// Bay's refs never contain "/": such a path is no payload route.
	h.expect(h.do("GET", "/v1/skills/payloads/s3:x/y", "alice", nil), 404, "not_found")
	h.expect(h.do("POST", "/v1/skills/payloads", "alice", `{"payload":"text"}`), 422, "validation_error")
	h.expect(h.do("POST", "/v1/skills/payloads", "alice", `{"kind":"x"}`), 422, "validation_error")
	h.expect(h.do("POST", "/v1/skills/payloads", "alice", `{"payload":{"a":"`+strings.Repeat("x", 1<<20)+`"}}`), 413, "payload_too_large")

	// Candidates.
	for _, c := range []struct {
		body   string
		status int
		msg    string
	}{
		{`{"skill_key":" ","source_execution_ids":["` + e1 + `"]}`, 400, "skill_key must not be empty"},
		{`{"skill_key":"csv","source_execution_ids":[]}`, 400, "source_execution_ids must not be empty"},
		{`{"skill_key":"csv","source_execution_ids":["exec-000000000000"]}`, 400, "Execution ID not found or not owned: exec-000000000000"},
		{`{"skill_key":"csv"}`, 422, ""},
		{`{"skill_key":"csv","source_execution_ids":["` + e1 + `"],"preconditions":[1]}`, 422, ""},
	} {
		r := h.do("POST", "/v1/skills/candidates", "alice", c.body)
		if r.status != c.status || !strings.Contains(string(r.body), c.msg) {
			t.Errorf("%s: %d %s", c.body, r.status, r.body)
		}
	}
	// bob cannot build on alice's executions.
	h.expect(h.do("POST", "/v1/skills/candidates", "bob", `{"skill_key":"csv","source_execution_ids":["`+e1+`"]}`), 400, "validation_error")
	candidate := func(summary string) string {
		r := h.do("POST", "/v1/skills/candidates", "alice", fmt.Sprintf(`{"skill_key":"csv","source_execution_ids":[%q,%q],"payload_ref":%q,"summary":%q,"preconditions":{"file":"data.csv"}}`, e1, e2, ref, summary))
		h.expect(r, 201, "")
		m := r.json(t)
		if m["status"] != "draft" || m["skill_type"] != "code" || m["created_by"] != "alice" || m["postconditions"] != nil ||
			fmt.Sprint(m["source_execution_ids"]) != fmt.Sprint([]any{e1, e2}) || fmt.Sprint(m["preconditions"]) != "map[file:data.csv]" {
			t.Fatalf("candidate: %s", r.body)
		}
		return m["id"].(string)
	}
	c1 := candidate("first")
	r = h.do("GET", "/v1/skills/candidates?status=draft&skill_key=csv&limit=10", "alice", nil)
	h.expect(r, 200, "")
	if r.json(t)["total"] != float64(1) {
		t.Fatalf("list: %s", r.body)
	}
	h.expect(h.do("GET", "/v1/skills/candidates?status=bogus", "alice", nil), 400, "validation_error")
	h.expect(h.do("GET", "/v1/skills/candidates?limit=501", "alice", nil), 422, "validation_error")
	h.expect(h.do("GET", "/v1/skills/candidates?offset=-1", "alice", nil), 422, "validation_error")
	h.expect(h.do("GET", "/v1/skills/candidates/"+c1, "bob", nil), 404, "not_found")

	// Evaluate: failing → rejected, promotion blocked; then passing.
	h.expect(h.do("POST", "/v1/skills/candidates/"+c1+"/evaluate", "alice", `{"score":1}`), 422, "validation_error")
	r = h.do("POST", "/v1/skills/candidates/"+c1+"/evaluate", "alice", `{"passed":false,"score":0.1}`)
	h.expect(r, 200, "")
	if m := r.json(t); m["passed"] != false || m["candidate_id"] != c1 || m["evaluated_by"] != "alice" {
		t.Fatalf("evaluate: %s", r.body)
	}
	if m := h.do("GET", "/v1/skills/candidates/"+c1, "alice", nil).json(t); m["status"] != "rejected" || m["latest_pass"] != false {
		t.Fatalf("rejected: %v", m)
	}
	r = h.do("POST", "/v1/skills/candidates/"+c1+"/promote", "alice", `{}`)
	h.expect(r, 409, "conflict")
	if !strings.Contains(string(r.body), `"message":"Candidate has no passing evaluation; promotion is blocked"`) || !strings.Contains(string(r.body), `"candidate_id":"`+c1+`"`) {
		t.Fatalf("blocked: %s", r.body)
	}
	h.expect(h.do("POST", "/v1/skills/candidates/"+c1+"/evaluate", "alice", `{"passed":true,"score":0.95,"report":"{\"replay_success\":1.0,\"samples\":40}"}`), 200, "")
	h.expect(h.do("POST", "/v1/skills/candidates/"+c1+"/promote", "alice", `{"stage":"beta"}`), 400, "validation_error")

	// Canary without a body (the stage defaults), health from tagged executions.
	r = h.do("POST", "/v1/skills/candidates/"+c1+"/promote", "alice", nil)
	h.expect(r, 200, "")
	rel1 := r.json(t)
	if rel1["version"] != float64(1) || rel1["stage"] != "canary" || rel1["is_active"] != true || rel1["release_mode"] != "manual" || rel1["rollback_of"] != nil {
		t.Fatalf("canary: %s", r.body)
	}
	r1 := rel1["id"].(string)
	exec("print(3)", "release:"+r1+",stage:canary")
	exec("print(4)", "RELEASE:"+r1)
	r = h.do("GET", "/v1/skills/releases/"+r1+"/health", "alice", nil)
	h.expect(r, 200, "")
	hm := r.json(t)
	if hm["samples"] != float64(2) || hm["success_rate"] != float64(1) || hm["healthy"] != true || hm["should_rollback"] != false ||
		hm["window_complete"] != false || fmt.Sprint(hm["rollback_reasons"]) != "[]" || fmt.Sprint(hm["thresholds"]) != "map[error_rate_multiplier:2 success_drop:0.03]" {
		t.Fatalf("health: %s", r.body)
	}
	h.expect(h.do("GET", "/v1/skills/releases/"+r1+"/health", "bob", nil), 404, "not_found")

	// Stable from a second candidate; v1 deactivated.
	c2 := candidate("second")
	h.expect(h.do("POST", "/v1/skills/candidates/"+c2+"/evaluate", "alice", `{"passed":true}`), 200, "")
	r = h.do("POST", "/v1/skills/candidates/"+c2+"/promote", "alice", `{"stage":"stable","change_summary":"better"}`)
	h.expect(r, 200, "")
	r2 := r.json(t)["id"].(string)
	if m := r.json(t); m["version"] != float64(2) || m["stage"] != "stable" || m["change_summary"] != "better" {
		t.Fatalf("stable: %s", r.body)
	}
	r = h.do("GET", "/v1/skills/releases?skill_key=csv&active_only=true", "alice", nil)
	h.expect(r, 200, "")
	if m := r.json(t); m["total"] != float64(1) || !strings.Contains(string(r.body), r2) {
		t.Fatalf("active: %s", r.body)
	}
	h.expect(h.do("GET", "/v1/skills/releases?stage=beta", "alice", nil), 400, "validation_error")
	h.expect(h.do("GET", "/v1/skills/releases?active_only=maybe", "alice", nil), 422, "validation_error")

	// Rollback of v2: v3 from v1's candidate and stage; c2 rolled back.
	r = h.do("POST", "/v1/skills/releases/"+r2+"/rollback", "alice", nil)
	h.expect(r, 200, "")
	if m := r.json(t); m["version"] != float64(3) || m["candidate_id"] != c1 || m["stage"] != "canary" || m["rollback_of"] != r2 || m["is_active"] != true {
		t.Fatalf("rollback: %s", r.body)
	}
	r3 := r.json(t)["id"].(string)
	if m := h.do("GET", "/v1/skills/candidates/"+c2, "alice", nil).json(t); m["status"] != "rolled_back" {
		t.Fatalf("rolled back candidate: %v", m)
	}
	r = h.do("POST", "/v1/skills/releases/"+r1+"/rollback", "alice", nil)
	h.expect(r, 409, "conflict")
	if !strings.Contains(string(r.body), "Rollback is unavailable: no previous release exists") || !strings.Contains(string(r.body), `"release_id":"`+r1+`"`) {
		t.Fatalf("rollback of v1: %s", r.body)
	}

	// Deletes: the active release's candidate is protected; releases go even when active.
	r = h.do("DELETE", "/v1/skills/candidates/"+c1, "alice", nil)
	h.expect(r, 409, "conflict")
	if !strings.Contains(string(r.body), "Candidate referenced by active release cannot be deleted") {
		t.Fatalf("delete live candidate: %s", r.body)
	}
	r = h.do("DELETE", "/v1/skills/releases/"+r3, "alice", `{"reason":"superseded"}`)
	h.expect(r, 200, "")
	if m := r.json(t); m["id"] != r3 || m["deleted_by"] != "alice" || m["delete_reason"] != "superseded" || m["deleted_at"] == nil {
		t.Fatalf("delete release: %s", r.body)
	}
	h.expect(h.do("DELETE", "/v1/skills/releases/"+r3, "alice", nil), 404, "not_found")
	r = h.do("DELETE", "/v1/skills/candidates/"+c1, "alice", nil)
	h.expect(r, 200, "")
	if m := r.json(t); m["delete_reason"] != nil {
		t.Fatalf("delete candidate: %s", r.body)
	}
	h.expect(h.do("GET", "/v1/skills/candidates/"+c1, "alice", nil), 404, "not_found")
	// Versions continue after deleted releases.
	c3 := candidate("third")
	h.expect(h.do("POST", "/v1/skills/candidates/"+c3+"/evaluate", "alice", `{"passed":true}`), 200, "")
	if m := h.do("POST", "/v1/skills/candidates/"+c3+"/promote", "alice", `{}`).json(t); m["version"] != float64(4) {
		t.Fatalf("version after delete: %v", m)
	}
	if m := h.do("GET", "/v1/skills/releases", "bob", nil).json(t); m["total"] != float64(0) {
		t.Fatalf("bob sees releases: %v", m)
	}
}

// TestParallelReleasesOverHTTP races promotes and rollbacks of one skill through the API:
// versions stay unique and consecutive and exactly one release stays active.
func TestParallelReleasesOverHTTP(t *testing.T) {
	h := newHarness(t)
	sb := h.sandbox("alice")
	r := h.do("POST", "/v1/sandboxes/"+sb+"/python/exec", "alice", `{"code":"1"}`)
	h.expect(r, 200, "")
	e := r.json(t)["execution_id"].(string)
	var cands []string
	for range 3 {
		r := h.do("POST", "/v1/skills/candidates", "alice", `{"skill_key":"race","source_execution_ids":["`+e+`"]}`)
		h.expect(r, 201, "")
		id := r.json(t)["id"].(string)
		h.expect(h.do("POST", "/v1/skills/candidates/"+id+"/evaluate", "alice", `{"passed":true}`), 200, "")
		cands = append(cands, id)
	}
	h.expect(h.do("POST", "/v1/skills/candidates/"+cands[0]+"/promote", "alice", nil), 200, "")
	r = h.do("POST", "/v1/skills/candidates/"+cands[1]+"/promote", "alice", nil)
	h.expect(r, 200, "")
	second := r.json(t)["id"].(string)
	const n = 20
	statuses := make(chan int, n)
	for i := range n {
		go func() {
			path := "/v1/skills/candidates/" + cands[i%3] + "/promote"
			if i%4 == 3 {
				path = "/v1/skills/releases/" + second + "/rollback"
			}
			req, _ := http.NewRequest("POST", h.srv.URL+path, nil)
			req.Header.Set("Authorization", "Bearer alice-key")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			res.Body.Close()
			statuses <- res.StatusCode
		}()
	}
	for range n {
		if st := <-statuses; st != 200 {
			t.Errorf("a parallel release call answered %d", st)
		}
	}
	var list struct {
		Items []struct {
			Version  int  `json:"version"`
			IsActive bool `json:"is_active"`
		} `json:"items"`
		Total int `json:"total"`
	}
	r = h.do("GET", "/v1/skills/releases?skill_key=race&limit=500", "alice", nil)
	h.expect(r, 200, "")
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	seen, active := map[int]bool{}, 0
	for _, it := range list.Items {
		seen[it.Version] = true
		if it.IsActive {
			active++
		}
	}
	for v := 1; v <= n+2; v++ {
		if !seen[v] {
			t.Errorf("version %d missing", v)
		}
	}
	if list.Total != n+2 || active != 1 {
		t.Fatalf("%d releases, %d active: %s", list.Total, active, r.body)
	}
}
