package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

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
	later := expect(t, b.do("GET", "/v1/sandbox/execs/"+r.Str("exec.exec_id")+"/outputs", nil, nil), 200, "outputs later")
	if later.Str("outputs.stdout") != "late\n" || later.Get("outputs_valid") != true {
		t.Fatalf("outputs read later: %s", later)
	}
	expectError(t, b.do("GET", "/v1/sandbox/execs/"+r.Str("exec.exec_id"), nil, map[string]string{"Authorization": "Bearer " + aliceKey}), 404, "not_found", "another owner")
}

// TestSkillToolsOverMCP: bay's MCP server offers every invocable skill the allow-list admits
// as the tool skill.<id> with interface.inputs as its input schema; calling it invokes the
// skill and returns the outputs as text and structured content; bad arguments come back as
// the API's violations; an upload and a delete change the list and notify the session
// (notifications/tools/list_changed), as the poll of the library finds them.
func TestSkillToolsOverMCP(t *testing.T) {
	t.Parallel()
	docker(t)
	b, _ := invokeBay(t, "SHIPYARD_SKILLS_POLL_SECONDS=0.3", "SHIPYARD_ALLOWED_TOOLS=skill.shell.*,skill.echo.*,list_profiles")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	changed := make(chan struct{}, 16)
	c := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "e2e", Version: "1"}, &mcpsdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcpsdk.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	s, err := c.Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: b.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{apiKey}}}, nil)
	if err != nil {
		t.Fatalf("mcp connect: %v", err)
	}
	defer s.Close()
	tools := func() map[string]*mcpsdk.Tool {
		t.Helper()
		list, err := s.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*mcpsdk.Tool{}
		for _, tl := range list.Tools {
			out[tl.Name] = tl
		}
		return out
	}
	names := func(m map[string]*mcpsdk.Tool) string {
		var n []string
		for k := range m {
			n = append(n, k)
		}
		slices.Sort(n)
		return strings.Join(n, ",")
	}
	got := tools()
	if names(got) != "list_profiles,skill.shell.run" {
		t.Fatalf("tools under the allow-list: %s", names(got))
	}
	schema, _ := json.Marshal(got["skill.shell.run"].InputSchema)
	if !strings.Contains(string(schema), `"required":["script"]`) || !strings.Contains(string(schema), `"additionalProperties":false`) {
		t.Fatalf("skill.shell.run input schema is not interface.inputs: %s", schema)
	}
	text := func(res *mcpsdk.CallToolResult) string {
		var out []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcpsdk.TextContent); ok {
				out = append(out, tc.Text)
			}
		}
		return strings.Join(out, "\n")
	}
	res, err := s.CallTool(ctx, &mcpsdk.CallToolParams{Name: "skill.shell.run", Arguments: map[string]any{"script": "echo hi from $(id -u)"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := res.StructuredContent.(map[string]any)
	if res.IsError || out["stdout"] != "hi from 1000\n" || out["exit_code"] != float64(0) || !strings.Contains(text(res), "succeeded") {
		t.Fatalf("skill.shell.run: %s %v", text(res), res.StructuredContent)
	}
	res, err = s.CallTool(ctx, &mcpsdk.CallToolParams{Name: "skill.shell.run", Arguments: map[string]any{"script": 5}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), "validation_error") || !strings.Contains(text(res), "/script") {
		t.Fatalf("bad arguments: %s", text(res))
	}

	// An upload adds a tool, and the session is told.
	drain := func() {
		for {
			select {
			case <-changed:
			default:
				return
			}
		}
	}
	waitChanged := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(20 * time.Second):
			t.Fatalf("no notifications/tools/list_changed after %s", what)
		}
	}
	drain()
	archive := skillArchive(t, map[string]string{
		"echo.it/SKILL.md": "---\nname: echo.it\ndescription: Echo a text.\n---\nEchoes inputs.text as outputs.echo.\n",
		"echo.it/manifest.json": `{"schema_version": 1, "id": "echo.it", "name": "Echo", "description": "Echo a text.",
  "interface": {"inputs": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
    "outputs": {"type": "object", "required": ["echo"], "properties": {"echo": {"type": "string"}}}},
  "runtime": {"kind": "docker", "image": "ship:latest", "entrypoint": ["python3", "/skills/echo.it/run.py"]},
  "permissions": {"fs": {"read": ["inputs/**"], "write": ["artifacts/**"]}, "net": {"mode": "none"}},
  "limits": {"timeout_ms": 30000}}`,
		"echo.it/run.py": "import json\nt = json.load(open('/workspace/inputs/inputs.json'))['text']\njson.dump({'echo': t}, open('/workspace/artifacts/outputs.json', 'w'))\n",
	})
	expect(t, b.uploadSkill(apiKey, archive), 201, "upload echo.it")
	waitChanged("an upload")
	if got := names(tools()); got != "list_profiles,skill.echo.it,skill.shell.run" {
		t.Fatalf("tools after the upload: %s", got)
	}
	res, err = s.CallTool(ctx, &mcpsdk.CallToolParams{Name: "skill.echo.it", Arguments: map[string]any{"text": "hey"}})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := res.StructuredContent.(map[string]any); res.IsError || out["echo"] != "hey" || !strings.Contains(text(res), "artifacts/outputs.json") {
		t.Fatalf("skill.echo.it: %s %v", text(res), res.StructuredContent)
	}
	drain()
	expect(t, b.do("DELETE", "/v1/admin/skills/echo.it", nil, nil), 204, "delete echo.it")
	waitChanged("a delete")
	if got := names(tools()); got != "list_profiles,skill.shell.run" {
		t.Fatalf("tools after the delete: %s", got)
	}
}
