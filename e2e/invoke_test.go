package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/testenv"
)

// invokeBay starts a bay with audited execs and the bundled skill library.
func invokeBay(t *testing.T, env ...string) (*Bay, string) {
	t.Helper()
	cli, err := testenv.EngineClient(context.Background(), "ship:latest")
	if err != nil {
		t.Fatalf("the invoke tests need the Docker engine and ship:latest (the bundled manifests' image): %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	ws := filepath.Join(t.TempDir(), "ws")
	b := startBay(t, bayOptions{
		extraConfig: fmt.Sprintf("execs:\n  workspace_root: %q\n  image: %q\nskills:\n  seed_dir: %q\n", ws, execImage, filepath.Join(repoRoot, "skills")),
		env:         append([]string{`BAY_SECURITY__API_KEYS=[{"key":"` + aliceKey + `","owner":"alice"}]`}, env...),
	})
	t.Cleanup(func() { execLeftovers(t, cli) })
	return b, ws
}

func invokeBody(project string, inputs map[string]any, extra map[string]any) map[string]any {
	body := map[string]any{"project_id": project, "inputs": inputs}
	for k, v := range extra {
		body[k] = v
	}
	return body
}

// TestSkillInvoke: the bundled shell.run and python.run run on the real engine from the
// library (their version mounted read-only at /skills/<id>, their inputs in inputs.json),
// answer their outputs by the rule (the exec's, or outputs.json validated against
// interface.outputs); inputs against interface.inputs are refused with every violation; a
// knowledge skill is not invocable; wait:false is 202; invocations are the owner's.
func TestSkillInvoke(t *testing.T) {
	t.Parallel()
	docker(t)
	b, ws := invokeBay(t)
	shellVersion := expect(t, b.do("GET", "/v1/skills/shell.run", nil, nil), 200, "shell.run").Str("version")

	script := `echo "uid $(id -u)"; cat /workspace/inputs/inputs.json; touch /skills/shell.run/x 2>/dev/null || echo read-only; ` +
		`ls /sys/class/net; echo oops >&2; exit 3`
	r := expect(t, b.do("POST", "/v1/skills/shell.run/invoke", invokeBody("inv", map[string]any{"script": script}, nil), nil), 200, "invoke shell.run")
	if r.Str("exec.status") != "failed" || r.Get("exec.exit_code") != float64(3) || r.Str("exec.skill_id") != "shell.run" ||
		r.Str("exec.skill_version") != shellVersion || r.Str("exec.kind") != "skill" || r.Str("exec.image") != "ship:latest" {
		t.Fatalf("shell.run exec: %s", r)
	}
	stdout := r.Str("outputs.stdout")
	for _, want := range []string{"uid 1000", `{"script":`, "read-only", "lo\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("shell.run stdout lacks %q: %q", want, stdout)
		}
	}
	if strings.Contains(stdout, "eth0") {
		t.Errorf("an invocation has a network interface: %q", stdout)
	}
	if r.Get("outputs.exit_code") != float64(3) || r.Str("outputs.stderr") != "oops\n" || r.Str("outputs_source") != "exec" || r.Get("outputs_valid") != true {
		t.Fatalf("shell.run outputs: %s", r)
	}
	id := r.Str("exec.exec_id")
	inputs := filepath.Join(ws, filepath.Dir(filepath.Dir(r.Str("exec.artifacts_dir"))), "invocations", id, "inputs.json")
	if b, err := os.ReadFile(inputs); err != nil || !strings.Contains(string(b), `"script"`) {
		t.Fatalf("the invocation's inputs.json: %q, %v", b, err)
	}

	r = expect(t, b.do("POST", "/v1/skills/python.run/invoke", invokeBody("inv", map[string]any{"code": "import os\nprint(6*7)\nprint(os.getcwd())"}, nil), nil), 200, "invoke python.run")
	if r.Str("exec.status") != "succeeded" || r.Str("outputs.stdout") != "42\n/workspace/work\n" || r.Get("outputs.exit_code") != float64(0) || r.Get("outputs_valid") != true {
		t.Fatalf("python.run: %s", r)
	}
	// outputs.json is the outputs, and is held to interface.outputs: a mismatch is reported.
	code := "import json\njson.dump({'exit_code': 'seven', 'note': 1}, open('/workspace/artifacts/outputs.json', 'w'))"
	r = expect(t, b.do("POST", "/v1/skills/python.run/invoke", invokeBody("inv", map[string]any{"code": code}, nil), nil), 200, "outputs.json")
	errs, _ := r.Get("outputs_errors").([]any)
	if r.Str("outputs_source") != "artifacts/outputs.json" || r.Str("outputs.exit_code") != "seven" || r.Get("outputs_valid") != false ||
		len(errs) == 0 || errs[0].(map[string]any)["pointer"] != "/exit_code" {
		t.Fatalf("outputs.json against interface.outputs: %s", r)
	}

	// Inputs against interface.inputs: every violation with its pointer; nothing runs.
	e := expectError(t, b.do("POST", "/v1/skills/shell.run/invoke", invokeBody("inv", map[string]any{"script": "", "extra": 1}, nil), nil), 400, "validation_error", "bad inputs")
	var pointers []string
	for _, v := range e.Get("error.details.errors").([]any) {
		pointers = append(pointers, v.(map[string]any)["pointer"].(string))
	}
	if !slices.Contains(pointers, "/") || !slices.Contains(pointers, "/script") {
		t.Fatalf("violations: %s", e)
	}
	expectError(t, b.do("POST", "/v1/skills/shell.run/invoke", invokeBody("inv", nil, nil), nil), 400, "validation_error", "no inputs")
	e = expectError(t, b.do("POST", "/v1/skills/csv-report/invoke", invokeBody("inv", map[string]any{}, nil), nil), 400, "validation_error", "knowledge skill")
	if !strings.Contains(e.Str("error.message"), "not invocable") {
		t.Fatalf("knowledge skill: %s", e)
	}
	expectError(t, b.do("POST", "/v1/skills/no.such/invoke", invokeBody("inv", map[string]any{}, nil), nil), 404, "not_found", "unknown skill")
	expectError(t, b.do("POST", "/v1/skills/shell.run/invoke", invokeBody("inv", map[string]any{"script": "true"},
		map[string]any{"policy_overrides": map[string]any{"timeout_ms": 120000}}), nil), 400, "policy_violation", "above the manifest")
	list := expect(t, b.do("GET", "/v1/sandbox/execs?project_id=inv", nil, nil), 200, "list")
	if list.Get("total") != float64(3) {
		t.Fatalf("refused invocations left records: %s", list)
	}

	// wait:false answers 202 at once; the exec is the caller's alone.
	r = expect(t, b.do("POST", "/v1/skills/shell.run/invoke", invokeBody("inv", map[string]any{"script": "sleep 1; echo late"}, map[string]any{"wait": false}), nil), 202, "wait false")
	if r.Get("outputs") != nil || r.Str("exec.status") != "queued" {
		t.Fatalf("wait false: %s", r)
	}
	done := b.waitExec(r.Str("exec.exec_id"), 60*time.Second, "succeeded")
	if done.Str("skill_version") != shellVersion {
		t.Fatalf("final record: %s", done)
	}
	expectError(t, b.do("GET", "/v1/sandbox/execs/"+r.Str("exec.exec_id"), nil, map[string]string{"Authorization": "Bearer " + aliceKey}), 404, "not_found", "another owner")
}
