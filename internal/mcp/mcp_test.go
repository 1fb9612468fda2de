package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shipyard-dev/shipyard/internal/mcp"
	"github.com/shipyard-dev/shipyard/sdk"
	"github.com/shipyard-dev/shipyard/sdk/sdktest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shipyard-mcp-test")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "shipyard")
	if out, err := exec.Command("go", "build", "-o", binary, "github.com/shipyard-dev/shipyard/cmd/shipyard").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic("build shipyard: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var referenceTools = []string{"create_sandbox", "delete_sandbox", "execute_python", "execute_shell", "read_file", "write_file",
	"list_files", "delete_file", "upload_file", "download_file", "get_execution_history", "get_execution",
	"get_last_execution", "annotate_execution", "execute_browser", "execute_browser_batch", "list_profiles",
	"create_skill_payload", "get_skill_payload", "create_skill_candidate", "evaluate_skill_candidate", "promote_skill_candidate",
	"list_skill_candidates", "list_skill_releases", "delete_skill_release", "delete_skill_candidate", "rollback_skill_release"}

var ourTools = []string{"get_sandbox", "list_sandboxes", "stop_sandbox", "extend_ttl", "keepalive",
	"run_cmd", "run_cmd_async", "start_job", "task_status", "task_watch", "cancel_job"}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func connect(t *testing.T, tr mcpsdk.Transport) *mcpsdk.ClientSession {
	t.Helper()
	c := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil)
	s, err := c.Connect(ctxT(t), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func call(t *testing.T, s *mcpsdk.ClientSession, name string, args map[string]any) (string, *mcpsdk.CallToolResult) {
	t.Helper()
	res, err := s.CallTool(ctxT(t), &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcpsdk.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n"), res
}

// ok calls a tool that must succeed and must contain every want.
func ok(t *testing.T, s *mcpsdk.ClientSession, name string, args map[string]any, want ...string) string {
	t.Helper()
	text, res := call(t, s, name, args)
	if res.IsError {
		t.Fatalf("%s failed: %s", name, text)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Fatalf("%s: %q lacks %q", name, text, w)
		}
	}
	return text
}

// fails calls a tool that must fail with a text starting with prefix.
func fails(t *testing.T, s *mcpsdk.ClientSession, name string, args map[string]any, prefix string, want ...string) string {
	t.Helper()
	text, res := call(t, s, name, args)
	if !res.IsError || !strings.HasPrefix(text, prefix) {
		t.Fatalf("%s: want error %q, got IsError=%v %q", name, prefix, res.IsError, text)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Fatalf("%s: %q lacks %q", name, text, w)
		}
	}
	return text
}

var idRE = regexp.MustCompile("`(sandbox-[0-9a-f]{12})`")

func checkToolList(t *testing.T, s *mcpsdk.ClientSession, local bool) {
	t.Helper()
	lt, err := s.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mcpsdk.Tool{}
	for _, tool := range lt.Tools {
		got[tool.Name] = tool
	}
	// What an agent needs to know before its first call is in the descriptions.
	for name, facts := range map[string][]string{
		"create_sandbox": {"/workspace", "uid 1000", "no root", "network follows its policy", "Python 3.13", "numpy", "Node.js"},
		"execute_python": {"/workspace", "uid 1000", "images come back as images", "timeout", "Network access follows"},
		"execute_shell":  {"bash", "/workspace", "uid 1000", "exit code -1", "Network access follows"},
	} {
		for _, f := range facts {
			if tool := got[name]; tool == nil || !strings.Contains(tool.Description, f) {
				t.Errorf("%s's description does not say %q", name, f)
			}
		}
	}
	var want []string
	for _, n := range append(append([]string{}, referenceTools...), ourTools...) {
		if !local && (n == "upload_file" || n == "download_file") {
			continue
		}
		want = append(want, n)
	}
	if len(got) != len(want) {
		var names []string
		for n := range got {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Fatalf("tools %v, want %v", names, want)
	}
	for _, n := range want {
		if got[n] == nil {
			t.Fatalf("missing tool %s", n)
		}
	}
	// Schemas carry the reference's arguments.
	schema := func(name string) map[string]any { return got[name].InputSchema.(map[string]any) }
	props := func(name string) map[string]any { return schema(name)["properties"].(map[string]any) }
	required := func(name string) []string {
		var out []string
		for _, r := range schema(name)["required"].([]any) {
			out = append(out, r.(string))
		}
		return out
	}
	for tool, args := range map[string][]string{
		"create_sandbox":        {"profile", "ttl", "reuse_key", "reuse_idle_ttl", "reuse_hard_ttl"},
		"execute_python":        {"sandbox_id", "code", "timeout", "include_code", "description", "tags"},
		"execute_shell":         {"sandbox_id", "command", "cwd", "timeout", "include_code", "description", "tags"},
		"write_file":            {"sandbox_id", "path", "content"},
		"get_execution_history": {"sandbox_id", "exec_type", "success_only", "limit", "tags", "has_notes", "has_description"},
		"annotate_execution":    {"sandbox_id", "execution_id", "description", "tags", "notes"},
		"execute_browser":       {"sandbox_id", "cmd", "timeout", "description", "tags", "learn", "include_trace"},
		"execute_browser_batch": {"sandbox_id", "commands", "timeout", "stop_on_error", "description", "tags", "learn", "include_trace"},
	} {
		for _, a := range args {
			if props(tool)[a] == nil {
				t.Errorf("%s lacks argument %s", tool, a)
			}
		}
	}
	if r := required("execute_python"); strings.Join(r, ",") != "sandbox_id,code" {
		t.Errorf("execute_python required %v", r)
	}
	if tp := props("execute_python")["timeout"].(map[string]any); tp["minimum"] != 1.0 || tp["maximum"] != 300.0 {
		t.Errorf("timeout range %v", tp)
	}
	if r := required("execute_browser"); strings.Join(r, ",") != "sandbox_id,cmd" {
		t.Errorf("execute_browser required %v", r)
	}
	if r := required("execute_browser_batch"); strings.Join(r, ",") != "sandbox_id,commands" {
		t.Errorf("execute_browser_batch required %v", r)
	}
	if tp := props("execute_browser")["timeout"].(map[string]any); tp["maximum"] != 300.0 || tp["default"] != 30.0 {
		t.Errorf("browser timeout %v", tp)
	}
	if tp := props("execute_browser_batch")["timeout"].(map[string]any); tp["maximum"] != 600.0 || tp["default"] != 60.0 {
		t.Errorf("batch timeout %v", tp)
	}
	if cp := props("execute_browser_batch")["commands"].(map[string]any); cp["type"] != "array" || cp["items"].(map[string]any)["type"] != "string" {
		t.Errorf("commands schema %v", cp)
	}
	if sp := props("execute_browser_batch")["stop_on_error"].(map[string]any); sp["default"] != true {
		t.Errorf("stop_on_error schema %v", sp)
	}
	if local {
		if r := required("upload_file"); strings.Join(r, ",") != "sandbox_id,local_path" {
			t.Errorf("upload_file required %v", r)
		}
	}
}

// exercise calls every tool against the fake bay.
func exercise(t *testing.T, s *mcpsdk.ClientSession, fake *sdktest.Server, local bool, workdir string) {
	text := ok(t, s, "create_sandbox", map[string]any{"ttl": 600}, "Sandbox created successfully.", "**Profile:** python-default", "**TTL:** 600 seconds")
	m := idRE.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no id in %q", text)
	}
	id := m[1]
	// The structured content of a sandbox is bay's sandbox object, as bay renders it.
	_, res := call(t, s, "create_sandbox", map[string]any{"ttl": 60})
	created, _ := json.Marshal(res.StructuredContent)
	var cid struct {
		ID string `json:"id"`
	}
	json.Unmarshal(created, &cid)
	if wire, found := fake.Sandbox(cid.ID); !found {
		t.Errorf("create_sandbox structured content %s names no sandbox", created)
	} else {
		raw, _ := json.Marshal(wire)
		var want any
		json.Unmarshal(raw, &want)
		if !reflect.DeepEqual(res.StructuredContent, want) {
			t.Errorf("create_sandbox structured content:\n got %s\nwant %s", created, raw)
		}
	}
	ok(t, s, "delete_sandbox", map[string]any{"sandbox_id": cid.ID})
	// A reuse key names one sandbox: the second call returns the first's.
	var reused [2]string
	for i := range reused {
		text := ok(t, s, "create_sandbox", map[string]any{"reuse_key": "proj:agent", "reuse_hard_ttl": 3600}, `Sandbox of reuse key "proj:agent"`)
		reused[i] = idRE.FindStringSubmatch(text)[1]
	}
	if reused[0] != reused[1] || reused[0] == id {
		t.Fatalf("reuse_key sandboxes %v (first sandbox %s)", reused, id)
	}
	ok(t, s, "delete_sandbox", map[string]any{"sandbox_id": reused[0]})
	sid := map[string]any{"sandbox_id": id}
	with := func(kv ...any) map[string]any {
		out := map[string]any{"sandbox_id": id}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}

	ok(t, s, "execute_python", with("code", `print("hello")`, "tags", "demo", "include_code", true),
		"**Execution successful**", "```\nhello\n```", "execution_id: exec-", "code:\nprint(\"hello\")")
	ok(t, s, "execute_python", with("code", "raise ValueError()"), "**Execution failed**", "ValueError: boom")
	_, res = call(t, s, "execute_python", with("code", "plot()"))
	var img *mcpsdk.ImageContent
	for _, c := range res.Content {
		if ic, ok := c.(*mcpsdk.ImageContent); ok {
			img = ic
		}
	}
	if img == nil || img.MIMEType != "image/png" || !strings.HasPrefix(string(img.Data), "\x89PNG") {
		t.Fatalf("image: %+v", res.Content)
	}
	// The structured twin of the text: what an agent's code reads without parsing markdown.
	if st, _ := res.StructuredContent.(map[string]any); st["success"] != true || st["images"] != float64(1) || st["timed_out"] != false ||
		!strings.HasPrefix(fmt.Sprint(st["execution_id"]), "exec-") {
		t.Errorf("python structured content: %#v", res.StructuredContent)
	}
	_, res = call(t, s, "execute_shell", with("command", "exit 2"))
	if st, _ := res.StructuredContent.(map[string]any); st["exit_code"] != float64(2) || st["success"] != false {
		t.Errorf("shell structured content: %#v", res.StructuredContent)
	}
	// It is bay's shell answer: every field, nulls included.
	shell, _ := json.Marshal(res.StructuredContent)
	var keys map[string]json.RawMessage
	json.Unmarshal(shell, &keys)
	if got := slices.Sorted(maps.Keys(keys)); strings.Join(got, ",") != "command,error,execution_id,execution_time_ms,exit_code,output,stderr_truncated,stdout_truncated,success" ||
		string(keys["command"]) != "null" {
		t.Errorf("shell structured content: %s", shell)
	}
	ok(t, s, "execute_shell", with("command", "echo hi; >&2 warn; exit 2", "cwd", "sub", "timeout", 10),
		"**Command failed** (exit code: 2)", "hi\nwarn")
	ok(t, s, "write_file", with("path", "src/a.py", "content", "x = 1\n"), "File `src/a.py` written successfully (6 bytes).")
	ok(t, s, "read_file", with("path", "src/a.py"), "**File: src/a.py**", "x = 1")
	ok(t, s, "list_files", sid, "**Directory: .**", "📁 src/")
	ok(t, s, "list_files", with("path", "src"), "📄 a.py (6 bytes)")
	ok(t, s, "delete_file", with("path", "src/a.py"), "Deleted `src/a.py` successfully.")

	hist := ok(t, s, "get_execution_history", with("exec_type", "python", "limit", 10), "Total: 3", "| python | success=true")
	execID := regexp.MustCompile(`exec-\d{12}`).FindString(hist)
	ok(t, s, "get_execution", with("execution_id", execID), "**Execution "+execID+"**")
	ok(t, s, "get_last_execution", with("exec_type", "shell"), "- type: shell", "echo hi")
	ok(t, s, "annotate_execution", with("execution_id", execID, "notes", "works", "tags", "b,a"), "Execution annotated.", "- notes: works", "- tags: a,b")
	ok(t, s, "get_execution_history", with("has_notes", true), "Total: 1", "notes=works")
	ok(t, s, "list_profiles", nil, "**Available Profiles** (3)", "- **python-default**", "└ primary (ship)")

	ok(t, s, "get_sandbox", sid, "**Sandbox ID:** `"+id+"`", "**Status:** ready", "ship (ship) vfake ✅")
	ok(t, s, "list_sandboxes", map[string]any{"limit": 5}, "**Sandboxes** (1)", id)
	ok(t, s, "extend_ttl", with("extend_by", 60), "extended by 60 seconds")
	ok(t, s, "keepalive", sid, "kept alive")
	ok(t, s, "stop_sandbox", sid, "stopped")

	if local {
		src := filepath.Join(workdir, "in.bin")
		os.WriteFile(src, []byte("local\x00bytes"), 0o644)
		ok(t, s, "upload_file", with("local_path", src, "sandbox_path", "data/in.bin"), "File uploaded successfully.", "**Size:** 11 bytes")
		if data, _, _, _ := fake.File(id, "data/in.bin"); string(data) != "local\x00bytes" {
			t.Fatalf("uploaded %q", data)
		}
		ok(t, s, "upload_file", with("local_path", src), "**Sandbox:** `in.bin`")
		ok(t, s, "download_file", with("sandbox_path", "data/in.bin"), "File downloaded successfully.", "**Size:** 11 bytes")
		if b, err := os.ReadFile(filepath.Join(workdir, "in.bin")); err != nil || string(b) != "local\x00bytes" {
			t.Fatalf("download to cwd: %q %v", b, err)
		}
		dst := filepath.Join(workdir, "out", "copy.bin")
		ok(t, s, "download_file", with("sandbox_path", "data/in.bin", "local_path", dst), "**Local:** `"+dst+"`")
		fails(t, s, "download_file", with("sandbox_path", "nope.bin", "local_path", filepath.Join(workdir, "nope.bin")), "**API Error:** [file_not_found]")
		if _, err := os.Stat(filepath.Join(workdir, "nope.bin")); !os.IsNotExist(err) {
			t.Fatal("failed download left a file")
		}
		fails(t, s, "upload_file", with("local_path", filepath.Join(workdir, "missing")), "**Validation Error:** local file not found")
	}

	exerciseBrowser(t, s, fake)

	ok(t, s, "delete_sandbox", sid, "Sandbox `"+id+"` deleted successfully.")
	fails(t, s, "get_sandbox", sid, "**API Error:** [not_found] Sandbox not found: "+id)
}

// exerciseBrowser calls the browser tools on a sandbox of a profile with the browser.
func exerciseBrowser(t *testing.T, s *mcpsdk.ClientSession, fake *sdktest.Server) {
	id := fake.AddSandbox("browser-python", 0)
	with := func(kv ...any) map[string]any {
		out := map[string]any{"sandbox_id": id}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	text := ok(t, s, "execute_browser", with("cmd", "open https://example.com", "timeout", 60, "tags", "web"))
	if !regexp.MustCompile("^\\*\\*Browser command successful\\*\\* \\(exit code: 0\\)\n\n```\n✓ https://example.com\n\n```\n\nexecution_id: exec-\\d{12}\nexecution_time_ms: 4$").MatchString(text) {
		t.Fatalf("execute_browser: %q", text)
	}
	text = ok(t, s, "execute_browser", with("cmd", "click @fail"))
	if !regexp.MustCompile("^\\*\\*Browser command failed\\*\\* \\(exit code: 1\\)\n\n```\n\\(no output\\)\n```\n\nexecution_id: exec-\\d{12}\nexecution_time_ms: 4\n\nstderr:\n✗ fake failure: click @fail\n$").MatchString(text) {
		t.Fatalf("failing execute_browser: %q", text)
	}
	ok(t, s, "get_last_execution", with("exec_type", "browser"), "- type: browser", "click @fail")

	text = ok(t, s, "execute_browser_batch", with("commands", []any{"open https://a.test", "click @fail", "get title"}))
	if !regexp.MustCompile("^\\*\\*Batch execution failed\\*\\* \\(2/3 steps, 2ms\\)\n\nexecution_id: exec-\\d{12}\nexecution_time_ms: 5\n" +
		"✅ Step 0: `open https://a.test` \\(exit=0, 1ms\\)\n   stdout: ✓ https://a.test\n" +
		"❌ Step 1: `click @fail` \\(exit=1, 1ms\\)\n   stderr: ✗ fake failure: click @fail$").MatchString(text) {
		t.Fatalf("batch: %q", text)
	}
	ok(t, s, "execute_browser_batch", with("commands", []any{"click @fail", "get title"}, "stop_on_error", false, "timeout", 600),
		"**Batch execution failed** (2/2 steps,", "✅ Step 1: `get title`")
	ok(t, s, "execute_browser_batch", with("commands", []any{"get title"}), "**Batch execution completed** (1/1 steps, 1ms)")
	ok(t, s, "get_last_execution", with("exec_type", "browser_batch"), "- type: browser_batch")

	ok(t, s, "execute_browser", with("cmd", "get title", "include_trace", true), "\ntrace_ref: blob:blob-")
	if text := ok(t, s, "execute_browser_batch", with("commands", []any{"get title"}, "learn", true)); strings.Contains(text, "trace_ref") {
		t.Fatalf("learn without include_trace shows a trace_ref: %q", text)
	}
	plain := fake.AddSandbox("python-default", 0)
	fails(t, s, "execute_browser", map[string]any{"sandbox_id": plain, "cmd": "get title"},
		"**API Error:** [capability_not_supported] Profile 'python-default' does not support capability: browser")
}

func validationPaths(t *testing.T, s *mcpsdk.ClientSession, fake *sdktest.Server) {
	id := fake.AddSandbox("python-default", 0)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"execute_python", map[string]any{"sandbox_id": "bad id!", "code": "1"}, "sandbox_id"},
		{"execute_python", map[string]any{"code": "1"}, "missing required field: sandbox_id"},
		{"execute_python", map[string]any{"sandbox_id": id}, "missing required field: code"},
		{"execute_python", map[string]any{"sandbox_id": id, "code": "1", "timeout": 0}, "'timeout' must be >= 1"},
		{"execute_shell", map[string]any{"sandbox_id": id, "command": "ls", "timeout": 301}, "'timeout' must be <= 300"},
		{"execute_shell", map[string]any{"sandbox_id": id, "command": "ls", "timeout": 1.5}, "'timeout' must be an integer"},
		{"execute_shell", map[string]any{"sandbox_id": id, "command": "ls", "cwd": "/etc"}, "'cwd' must be a relative path"},
		{"read_file", map[string]any{"sandbox_id": id, "path": "a/../../etc/passwd"}, "'..'"},
		{"read_file", map[string]any{"sandbox_id": id, "path": ""}, "'path' must not be empty"},
		{"write_file", map[string]any{"sandbox_id": id, "path": "x"}, "missing required field: content"},
		{"list_files", map[string]any{"sandbox_id": id, "path": "/"}, "relative"},
		{"delete_file", map[string]any{"sandbox_id": id, "path": ".."}, "'..'"},
		{"create_sandbox", map[string]any{"ttl": -1}, "'ttl' must be >= 0"},
		{"create_sandbox", map[string]any{"profile": 3}, "'profile' must be a"},
		{"get_execution_history", map[string]any{"sandbox_id": id, "limit": 501}, "'limit' must be <= 500"},
		{"get_execution_history", map[string]any{"sandbox_id": id, "exec_type": "perl"}, "exec_type"},
		{"annotate_execution", map[string]any{"sandbox_id": id, "execution_id": "exec-1"}, "at least one of"},
		{"extend_ttl", map[string]any{"sandbox_id": id}, "missing required field: extend_by"},
		{"extend_ttl", map[string]any{"sandbox_id": id, "extend_by": 0}, "'extend_by' must be >= 1"},
		{"list_sandboxes", map[string]any{"status": "zombie"}, "'status' must be one of"},
		{"execute_browser", map[string]any{"sandbox_id": id}, "missing required field: cmd"},
		{"execute_browser", map[string]any{"sandbox_id": id, "cmd": "  "}, "missing required field: cmd"},
		{"execute_browser", map[string]any{"sandbox_id": id, "cmd": "x", "timeout": 301}, "'timeout' must be <= 300"},
		{"execute_browser", map[string]any{"sandbox_id": id, "cmd": "x", "learn": "maybe"}, "'learn' must be a boolean"},
		{"execute_browser_batch", map[string]any{"sandbox_id": id}, "missing required field: commands"},
		{"execute_browser_batch", map[string]any{"sandbox_id": id, "commands": []any{}}, "'commands' must be a non-empty array of strings"},
		{"execute_browser_batch", map[string]any{"sandbox_id": id, "commands": []any{"a", 3}}, "'commands' must be a non-empty array of strings"},
		{"execute_browser_batch", map[string]any{"sandbox_id": id, "commands": "open x"}, "'commands' must be a non-empty array of strings"},
		{"execute_browser_batch", map[string]any{"sandbox_id": id, "commands": []any{"a"}, "timeout": 601}, "'timeout' must be <= 600"},
		{"execute_browser_batch", map[string]any{"sandbox_id": id, "commands": []any{"a"}, "stop_on_error": 2}, "'stop_on_error' must be a boolean"},
	} {
		fails(t, s, tc.tool, tc.args, "**Validation Error:**", tc.want)
	}
	if n := fake.Count("POST", "/v1/sandboxes/"+id+"/*"); n != 0 {
		t.Fatalf("invalid arguments reached bay %d times", n)
	}
	// API errors carry the code, message and details.
	fails(t, s, "read_file", map[string]any{"sandbox_id": id, "path": "missing.txt"}, "**API Error:** [file_not_found] File not found: missing.txt")
	fails(t, s, "create_sandbox", map[string]any{"profile": "nope"}, "**API Error:** [validation_error] Invalid profile: nope")
	fails(t, s, "extend_ttl", map[string]any{"sandbox_id": id, "extend_by": 5}, "**API Error:** [sandbox_ttl_infinite]", `details: {"sandbox_id":"`+id+`"}`)
	fake.Fail(sdktest.Fault{Method: "POST", Path: "/v1/sandboxes/" + id + "/python/exec", Status: 503, Code: "session_not_ready", Times: 10,
		Details: map[string]any{"sandbox_id": id, "retry_after_ms": 1}})
	fails(t, s, "execute_python", map[string]any{"sandbox_id": id, "code": "1"}, "**API Error:** [session_not_ready]", `"retry_after_ms":1`)
}

func TestStdio(t *testing.T) {
	fake := sdktest.New()
	defer fake.Close()
	work := t.TempDir()
	cmd := exec.Command(binary, "mcp")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "SHIPYARD_ENDPOINT="+fake.URL, "SHIPYARD_TOKEN=", "SHIPYARD_MAX_TOOL_TEXT_CHARS=300",
		"SHIPYARD_MAX_WRITE_FILE_BYTES=64", "SHIPYARD_DEFAULT_TTL=120")
	s := connect(t, &mcpsdk.CommandTransport{Command: cmd})
	if got := s.InitializeResult().ServerInfo.Name; got != "shipyard" {
		t.Fatalf("server name %q", got)
	}
	checkToolList(t, s, true)
	exercise(t, s, fake, true, work)
	validationPaths(t, s, fake)

	// Truncation and size limits from the environment.
	id := fake.AddSandbox("python-default", 0)
	text := ok(t, s, "execute_python", map[string]any{"sandbox_id": id, "code": "big:1000"}, "…[truncated 700 chars; original=1000]")
	if !strings.Contains(text, strings.Repeat("x", 300)+"\n…[") || strings.Contains(text, strings.Repeat("x", 301)) {
		t.Fatalf("truncation: %q", text)
	}
	fails(t, s, "write_file", map[string]any{"sandbox_id": id, "path": "a", "content": strings.Repeat("y", 65)},
		"**Validation Error:** write_file content too large: 65 bytes exceeds limit of 64 bytes")
	ok(t, s, "create_sandbox", nil, "**TTL:** 120 seconds")
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestHTTPHandler(t *testing.T) {
	fake := sdktest.New()
	defer fake.Close()
	fake.SetToken("secret")
	fakeAddr := strings.TrimPrefix(fake.URL, "http://")
	port := fakeAddr[strings.LastIndex(fakeAddr, ":"):]
	newClient := mcp.LoopbackClients(func() string { return "0.0.0.0" + port })
	opts := mcp.DefaultOptions()
	srv := httptest.NewServer(mcp.NewHTTPHandler(newClient, opts))
	t.Cleanup(srv.Close) // after the sessions' cleanups, which end their SSE streams

	s := connect(t, &mcpsdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{"secret"}}})
	checkToolList(t, s, false)
	exercise(t, s, fake, false, "")
	validationPaths(t, s, fake)

	// Every call is authenticated with the caller's own key.
	anon := connect(t, &mcpsdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{""}}})
	fails(t, anon, "list_sandboxes", nil, "**API Error:** [unauthorized] Authentication required")
	wrong := connect(t, &mcpsdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{"nope"}}})
	fails(t, wrong, "create_sandbox", nil, "**API Error:** [unauthorized] Invalid API key")
	ok(t, anon, "list_profiles", nil, "python-default") // /v1/profiles needs no key
}

func TestTruncate(t *testing.T) {
	fake := sdktest.New()
	defer fake.Close()
	c, _ := sdk.New(fake.URL, "")
	opts := mcp.DefaultOptions()
	opts.MaxToolTextChars = 10
	srvT, cliT := mcpsdk.NewInMemoryTransports()
	server := mcp.NewServer(c, opts)
	ss, err := server.Connect(ctxT(t), srvT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	s := connect(t, cliT)
	id := fake.AddSandbox("python-default", 0)
	fake.PutFile(id, "u.txt", []byte("ééééééééééééééé")) // 15 runes, 30 bytes
	text := ok(t, s, "read_file", map[string]any{"sandbox_id": id, "path": "u.txt"})
	if !strings.Contains(text, "éééééééééé\n…[truncated 5 chars; original=15]") {
		t.Fatalf("%q", text)
	}
}

// Each step of a browser batch shows at most 500 characters of its stdout and stderr.
func TestBrowserBatchStepTruncation(t *testing.T) {
	fake := sdktest.New()
	defer fake.Close()
	c, _ := sdk.New(fake.URL, "")
	srvT, cliT := mcpsdk.NewInMemoryTransports()
	ss, err := mcp.NewServer(c, mcp.DefaultOptions()).Connect(ctxT(t), srvT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	s := connect(t, cliT)
	id := fake.AddSandbox("browser-python", 0)
	fake.SetBrowserFunc(func(_, cmd string) sdktest.BrowserResult {
		return sdktest.BrowserResult{Stdout: "\n" + strings.Repeat("y", 600) + "\n", Stderr: "é"}
	})
	text := ok(t, s, "execute_browser_batch", map[string]any{"sandbox_id": id, "commands": []any{"snapshot"}},
		"\n   stdout: "+strings.Repeat("y", 500)+"\n…[truncated 100 chars; original=600]\n   stderr: é")
	if strings.Contains(text, strings.Repeat("y", 501)) {
		t.Fatalf("%q", text)
	}
}

func TestLoopbackClients(t *testing.T) {
	fake := sdktest.New()
	defer fake.Close()
	addr := ""
	f := mcp.LoopbackClients(func() string { return addr })
	r, _ := http.NewRequest("POST", "/mcp", nil)
	if f(r) != nil {
		t.Fatal("client before bay listens")
	}
	addr = strings.TrimPrefix(fake.URL, "http://")
	r.Header.Set("Authorization", "Bearer k1")
	r.Header.Set("X-Owner", "alice")
	c := f(r)
	if c == nil || c.Endpoint() != fake.URL {
		t.Fatalf("client %v", c)
	}
	c.ListProfiles(ctxT(t), false)
	call := fake.Calls("GET", "/v1/profiles")[0]
	if call.Header.Get("Authorization") != "Bearer k1" || call.Header.Get("X-Owner") != "alice" {
		t.Fatalf("headers %v", call.Header)
	}
	r.Header.Set("Authorization", "Basic x")
	r.Header.Del("X-Owner")
	f(r).ListProfiles(ctxT(t), false)
	if call := fake.Calls("GET", "/v1/profiles")[1]; call.Header.Get("Authorization") != "" || call.Header.Get("X-Owner") != "" {
		t.Fatalf("headers %v", call.Header)
	}
}

// TestAllowedTools: only the allow-list's tools are listed and callable.
func TestAllowedTools(t *testing.T) {
	fake := sdktest.New()
	defer fake.Close()
	c, _ := sdk.New(fake.URL, "")
	opts := mcp.DefaultOptions()
	opts.AllowedTools = []string{"execute_*", "list_profiles", "[bad"}
	srvT, cliT := mcpsdk.NewInMemoryTransports()
	ss, err := mcp.NewServer(c, opts).Connect(ctxT(t), srvT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	s := connect(t, cliT)
	list, err := s.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "execute_browser,execute_browser_batch,execute_python,execute_shell,list_profiles" {
		t.Fatalf("tools %v", names)
	}
	if res, err := s.CallTool(ctxT(t), &mcpsdk.CallToolParams{Name: "delete_sandbox", Arguments: map[string]any{"sandbox_id": "x"}}); err == nil && !res.IsError {
		t.Fatal("a tool outside the allow-list ran")
	}
}
