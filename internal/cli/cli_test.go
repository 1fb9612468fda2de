package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/testenv"
	"github.com/shipyard-dev/shipyard/sdk/sdktest"
)

var binary, bayBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shipyard-cli-test")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "shipyard")
	out, err := exec.Command("go", "build", "-o", binary, "github.com/shipyard-dev/shipyard/cmd/shipyard").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		panic("build shipyard: " + err.Error() + "\n" + string(out))
	}
	bayBinary = filepath.Join(dir, "bay")
	if out, err := exec.Command("go", "build", "-o", bayBinary, "github.com/shipyard-dev/shipyard/cmd/bay").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic("build bay: " + err.Error() + "\n" + string(out))
	}
	restoreFirewall := testenv.KeepHostFirewallAsFound()
	code := m.Run()
	restoreFirewall()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// run executes the CLI against endpoint with the given stdin.
func run(t *testing.T, endpoint, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "SHIPYARD_ENDPOINT="+endpoint, "SHIPYARD_TOKEN=", "BAY_ENDPOINT=", "BAY_TOKEN=")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

func newFake(t *testing.T) *sdktest.Server {
	f := sdktest.New()
	t.Cleanup(f.Close)
	return f
}

func TestSandboxLifecycleJSON(t *testing.T) {
	fake := newFake(t)
	r := run(t, fake.URL, "", "sandbox", "create", "--ttl", "600", "-o", "json")
	if r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	var sb bayapi.SandboxResponse
	if err := json.Unmarshal([]byte(r.stdout), &sb); err != nil || !strings.HasPrefix(sb.ID, "sandbox-") || sb.ExpiresAt == nil {
		t.Fatalf("create json: %v %q", err, r.stdout)
	}
	// the JSON is the API's: every field present, nulls included
	var raw map[string]any
	json.Unmarshal([]byte(r.stdout), &raw)
	for _, k := range []string{"id", "status", "profile", "cargo_id", "capabilities", "created_at", "expires_at", "idle_expires_at", "containers"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("create json lacks %q", k)
		}
	}
	r = run(t, fake.URL, "", "sandbox", "list", "-o", "json")
	var list bayapi.SandboxList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Items) != 1 || list.Items[0].ID != sb.ID {
		t.Fatalf("list: %v %q", err, r.stdout)
	}
	r = run(t, fake.URL, "", "sandbox", "list")
	if r.code != 0 || !strings.Contains(r.stdout, sb.ID) || !strings.Contains(r.stdout, "STATUS") {
		t.Fatalf("list text: %+v", r)
	}
	r = run(t, fake.URL, "", "sandbox", "extend", sb.ID, "60", "-o", "json")
	var ext bayapi.SandboxResponse
	if json.Unmarshal([]byte(r.stdout), &ext); r.code != 0 || !ext.ExpiresAt.Time.Equal(sb.ExpiresAt.Time.Add(60e9)) {
		t.Fatalf("extend: %+v", r)
	}
	for _, sub := range []string{"keepalive", "stop"} {
		if r = run(t, fake.URL, "", "sandbox", sub, sb.ID); r.code != 0 {
			t.Fatalf("%s: %+v", sub, r)
		}
	}
	if r = run(t, fake.URL, "", "sandbox", "get", sb.ID); r.code != 0 || !strings.Contains(r.stdout, "profile:") {
		t.Fatalf("get: %+v", r)
	}
	if r = run(t, fake.URL, "", "sandbox", "delete", sb.ID, "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"deleted"`) {
		t.Fatalf("delete: %+v", r)
	}
	r = run(t, fake.URL, "", "sandbox", "get", sb.ID)
	if r.code != 66 || !strings.Contains(r.stderr, "[not_found] Sandbox not found: "+sb.ID) {
		t.Fatalf("get deleted: %+v", r)
	}
	r = run(t, fake.URL, "", "sandbox", "get", sb.ID, "-o", "json")
	var env bayapi.ErrorEnvelope
	if r.code != 66 || json.Unmarshal([]byte(r.stderr), &env) != nil || env.Error.Code != "not_found" {
		t.Fatalf("json error: %+v", r)
	}
}

func TestExitCodes(t *testing.T) {
	fake := newFake(t)
	id := fake.AddSandbox("python-default", 0)
	infinite := id
	cases := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"usage: missing args", []string{"python"}, 64, "wrong number of arguments"},
		{"usage: bad flag", []string{"sandbox", "list", "--nope"}, 64, "unknown flag"},
		{"usage: bad output", []string{"profiles", "-o", "yaml"}, 64, "--output"},
		{"usage: unknown command", []string{"frobnicate"}, 64, "unknown command"},
		{"not found", []string{"sandbox", "get", "sandbox-000000000000"}, 66, "[not_found]"},
		{"rejected path", []string{"fs", "ls", id, "../x"}, 65, "[invalid_path]"},
		{"rejected profile", []string{"sandbox", "create", "--profile", "nope"}, 65, "[validation_error] Invalid profile: nope"},
		{"conflict", []string{"sandbox", "extend", infinite, "10"}, 67, "[sandbox_ttl_infinite]"},
		{"download missing", []string{"fs", "get", id, "nope.txt", "-"}, 66, "[file_not_found]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, fake.URL, "", tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.err) {
				t.Fatalf("got %d %q, want %d %q", r.code, r.stderr, tc.code, tc.err)
			}
		})
	}
	t.Run("ship error", func(t *testing.T) {
		fake.Fail(sdktest.Fault{Method: "POST", Path: "/v1/sandboxes/" + id + "/shell/exec", Status: 502, Code: "ship_error", Message: "Ship request failed: 500"})
		if r := run(t, fake.URL, "", "shell", id, "ls"); r.code != 70 || !strings.Contains(r.stderr, "[ship_error] Ship request failed: 500") {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("client mistake not retried", func(t *testing.T) {
		if r := run(t, fake.URL, "content", "fs", "put", id, "-", "a.txt"); r.code != 0 {
			t.Fatalf("put: %+v", r)
		}
		// One failure only: a retry would succeed, so success here would mean a retry.
		fake.Fail(sdktest.Fault{Method: "GET", Path: "/v1/sandboxes/" + id + "/filesystem/download", Times: 1, Status: 400, Code: "is_a_directory", Message: "Path is a directory"})
		if r := run(t, fake.URL, "", "fs", "cat", id, "a.txt"); r.code != 65 || !strings.Contains(r.stderr, "[is_a_directory] Path is a directory") {
			t.Fatalf("%+v", r)
		}
		if r := run(t, fake.URL, "", "fs", "cat", id, "a.txt"); r.code != 0 || r.stdout != "content" {
			t.Fatalf("after the fault: %+v", r)
		}
	})
	t.Run("session not ready", func(t *testing.T) {
		fake.Fail(sdktest.Fault{Method: "GET", Path: "/v1/sandboxes/" + id, Times: 10, Status: 503, Code: "session_not_ready", Details: map[string]any{"retry_after_ms": 1}})
		if r := run(t, fake.URL, "", "sandbox", "get", id); r.code != 69 || !strings.Contains(r.stderr, "retry_after_ms") {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("unauthorized", func(t *testing.T) {
		fake.SetToken("secret")
		defer func() { fake.SetToken("") }()
		if r := run(t, fake.URL, "", "sandbox", "list"); r.code != 77 || !strings.Contains(r.stderr, "[unauthorized] Authentication required") || !strings.Contains(r.stderr, "--token, else $SHIPYARD_TOKEN") {
			t.Fatalf("%+v", r)
		}
		if r := run(t, fake.URL, "", "--token", "secret", "sandbox", "list"); r.code != 0 {
			t.Fatalf("with token: %+v", r)
		}
	})
	t.Run("cli deadline", func(t *testing.T) {
		release := make(chan struct{})
		t.Cleanup(func() { close(release) }) // before the fake closes
		fake.SetPythonFunc(func(string) bayapi.PythonExecResponse { <-release; return bayapi.PythonExecResponse{Success: true} })
		defer func() { fake.SetPythonFunc(nil) }()
		if r := run(t, fake.URL, "", "--timeout", "300ms", "python", id, "1"); r.code != 75 || !strings.Contains(r.stderr, "timed out") {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		if r := run(t, "http://127.0.0.1:1", "", "sandbox", "list"); r.code != 69 || !strings.Contains(r.stderr, "cannot reach bay") {
			t.Fatalf("%+v", r)
		}
	})
}

func TestShellExitCodePropagation(t *testing.T) {
	fake := newFake(t)
	id := fake.AddSandbox("python-default", 0)
	r := run(t, fake.URL, "", "shell", id, "echo hi; >&2 oops; exit 7")
	if r.code != 7 || r.stdout != "hi\n" || r.stderr != "oops\n" {
		t.Fatalf("%+v", r)
	}
	if r = run(t, fake.URL, "", "shell", id, "echo", "ok"); r.code != 0 || r.stdout != "ok\n" {
		t.Fatalf("%+v", r)
	}
	r = run(t, fake.URL, "", "shell", id, "exit 300", "-o", "json")
	var res bayapi.ShellExecResponse
	if json.Unmarshal([]byte(r.stdout), &res); r.code != 300&0xff || res.ExitCode != 300 {
		t.Fatalf("json: %+v", r)
	}
	fake.SetShellFunc(func(string, string) sdktest.ShellResult {
		return sdktest.ShellResult{Stderr: "Command timed out", ExitCode: -1}
	})
	if r = run(t, fake.URL, "", "shell", id, "sleep 999"); r.code != 124 || !strings.Contains(r.stderr, "timed out") {
		t.Fatalf("timeout: %+v", r)
	}
	// A python cell past its timeout exits like a shell command past its own: 124, not the 1
	// of code that raised.
	fake.SetPythonFunc(func(string) bayapi.PythonExecResponse {
		msg := "Code execution timed out after 1 seconds"
		return bayapi.PythonExecResponse{Error: &msg, TimedOut: true}
	})
	if r = run(t, fake.URL, "", "python", id, "while True: pass"); r.code != 124 || !strings.Contains(r.stderr, "timed out") {
		t.Fatalf("python timeout: %+v", r)
	}
	fake.SetPythonFunc(nil)
	if r = run(t, fake.URL, "", "python", id, `raise ValueError("x")`); r.code != 1 {
		t.Fatalf("python raising: %+v", r)
	}
	// Output the runtime cut is said so on stderr, and kept in the JSON.
	fake.SetShellFunc(func(string, string) sdktest.ShellResult {
		return sdktest.ShellResult{Stdout: "head", ExitCode: 0, StdoutTruncated: true}
	})
	if r = run(t, fake.URL, "", "shell", id, "yes"); r.code != 0 || r.stdout != "head\n" || !strings.Contains(r.stderr, "stdout cut by the sandbox") {
		t.Fatalf("truncated: %+v", r)
	}
	r = run(t, fake.URL, "", "shell", id, "yes", "-o", "json")
	if json.Unmarshal([]byte(r.stdout), &res); !res.StdoutTruncated || res.StderrTruncated {
		t.Fatalf("truncated json: %+v", r)
	}
}

func TestPythonInputsAndFailure(t *testing.T) {
	fake := newFake(t)
	id := fake.AddSandbox("python-default", 0)
	// argument
	if r := run(t, fake.URL, "", "python", id, `print("arg")`); r.code != 0 || r.stdout != "arg\n" {
		t.Fatalf("arg: %+v", r)
	}
	// stdin via "-" and via no argument
	if r := run(t, fake.URL, `print("dash")`, "python", id, "-"); r.code != 0 || r.stdout != "dash\n" {
		t.Fatalf("dash: %+v", r)
	}
	if r := run(t, fake.URL, `print("piped")`, "python", id); r.code != 0 || r.stdout != "piped\n" {
		t.Fatalf("piped: %+v", r)
	}
	// file
	f := filepath.Join(t.TempDir(), "x.py")
	os.WriteFile(f, []byte(`print("file")`), 0o644)
	if r := run(t, fake.URL, "", "python", id, "-f", f); r.code != 0 || r.stdout != "file\n" {
		t.Fatalf("file: %+v", r)
	}
	last := fake.Calls("POST", "/v1/sandboxes/"+id+"/python/exec")
	if len(last) != 4 {
		t.Fatalf("calls %d", len(last))
	}
	// failure: exit 1, traceback on stderr
	r := run(t, fake.URL, "", "python", id, "raise ValueError('boom')")
	if r.code != 1 || !strings.Contains(r.stderr, "ValueError: boom") || strings.Contains(r.stdout, "ValueError") {
		t.Fatalf("raise: %+v", r)
	}
	r = run(t, fake.URL, "", "python", id, "raise X", "-o", "json")
	var res bayapi.PythonExecResponse
	if json.Unmarshal([]byte(r.stdout), &res); r.code != 1 || res.Success || res.Error == nil {
		t.Fatalf("raise json: %+v", r)
	}
	// stdin for shell too
	if r := run(t, fake.URL, "echo from-stdin", "shell", id); r.code != 0 || r.stdout != "from-stdin\n" {
		t.Fatalf("shell stdin: %+v", r)
	}
	// history shows them
	r = run(t, fake.URL, "", "history", id, "-o", "json", "--type", "python")
	var hist bayapi.ExecutionHistoryList
	if json.Unmarshal([]byte(r.stdout), &hist); r.code != 0 || hist.Total != 6 {
		t.Fatalf("history: %+v", r)
	}
	if r = run(t, fake.URL, "", "history", id, "--last"); r.code != 0 || !strings.Contains(r.stdout, "echo from-stdin") {
		t.Fatalf("history --last: %+v", r)
	}
	if r = run(t, fake.URL, "", "history", id, hist.Entries[0].ID, "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, hist.Entries[0].ID) {
		t.Fatalf("history entry: %+v", r)
	}
}

func TestFilesRoundTrip(t *testing.T) {
	fake := newFake(t)
	id := fake.AddSandbox("python-default", 0)
	dir := t.TempDir()
	src := filepath.Join(dir, "blob.bin")
	data := bytes.Repeat([]byte{0, 1, 2, 0xff, '\n'}, 100000)
	os.WriteFile(src, data, 0o644)
	r := run(t, fake.URL, "", "fs", "put", id, src, "data/blob.bin", "-o", "json")
	var up bayapi.UploadResponse
	if json.Unmarshal([]byte(r.stdout), &up); r.code != 0 || up.Size != int64(len(data)) || up.Path != "data/blob.bin" {
		t.Fatalf("put: %+v", r)
	}
	if r = run(t, fake.URL, "streamed from stdin", "fs", "put", id, "-", "notes.txt"); r.code != 0 {
		t.Fatalf("put stdin: %+v", r)
	}
	dst := filepath.Join(dir, "back.bin")
	if r = run(t, fake.URL, "", "fs", "get", id, "data/blob.bin", dst); r.code != 0 {
		t.Fatalf("get: %+v", r)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Fatal("round trip changed the content")
	}
	// An existing local file is replaced only with --force.
	os.WriteFile(dst, []byte("mine"), 0o644)
	if r = run(t, fake.URL, "", "fs", "get", id, "data/blob.bin", dst); r.code != 64 || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("get over an existing file: %+v", r)
	}
	if got, _ := os.ReadFile(dst); string(got) != "mine" {
		t.Fatal("get without --force overwrote the local file")
	}
	if r = run(t, fake.URL, "", "fs", "get", "--force", id, "data/blob.bin", dst); r.code != 0 {
		t.Fatalf("get --force: %+v", r)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Fatal("get --force did not replace the file")
	}
	if r = run(t, fake.URL, "", "fs", "cat", id, "notes.txt"); r.code != 0 || r.stdout != "streamed from stdin" {
		t.Fatalf("cat: %+v", r)
	}
	r = run(t, fake.URL, "", "fs", "ls", id)
	if r.code != 0 || !strings.Contains(r.stdout, "data/") || !strings.Contains(r.stdout, "notes.txt") {
		t.Fatalf("ls: %+v", r)
	}
	if r = run(t, fake.URL, "", "fs", "rm", id, "data"); r.code != 0 {
		t.Fatalf("rm: %+v", r)
	}
	if r = run(t, fake.URL, "", "fs", "get", id, "data/blob.bin", filepath.Join(dir, "gone.bin")); r.code != 66 {
		t.Fatalf("get removed: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone.bin")); !os.IsNotExist(err) {
		t.Fatal("failed download left a file")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".part-") {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
}

func TestProfilesCargoHealth(t *testing.T) {
	fake := newFake(t)
	r := run(t, fake.URL, "", "profiles", "-o", "json")
	var pl bayapi.ProfileList
	if json.Unmarshal([]byte(r.stdout), &pl); r.code != 0 || len(pl.Items) != 3 {
		t.Fatalf("profiles: %+v", r)
	}
	if r = run(t, fake.URL, "", "profiles", "--detail"); r.code != 0 || !strings.Contains(r.stdout, "python-default") {
		t.Fatalf("profiles text: %+v", r)
	}
	r = run(t, fake.URL, "", "cargo", "create", "--size-mb", "64")
	cid := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(cid, "ws-") {
		t.Fatalf("cargo create: %+v", r)
	}
	if r = run(t, fake.URL, "", "cargo", "list"); !strings.Contains(r.stdout, cid) {
		t.Fatalf("cargo list: %+v", r)
	}
	if r = run(t, fake.URL, "", "cargo", "get", cid); r.code != 0 || !strings.Contains(r.stdout, "size_mb=64") {
		t.Fatalf("cargo get: %+v", r)
	}
	if r = run(t, fake.URL, "", "cargo", "delete", cid); r.code != 0 {
		t.Fatalf("cargo delete: %+v", r)
	}
	if r = run(t, fake.URL, "", "health"); r.code != 0 || !strings.HasPrefix(r.stdout, "ok") {
		t.Fatalf("health: %+v", r)
	}
}

func TestEnvFallbacks(t *testing.T) {
	fake := newFake(t)
	fake.SetToken("tk")
	cmd := exec.Command(binary, "sandbox", "list", "-o", "json")
	cmd.Env = append(os.Environ(), "SHIPYARD_ENDPOINT=", "SHIPYARD_TOKEN=", "BAY_ENDPOINT="+fake.URL, "BAY_TOKEN=tk")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("BAY_* fallback: %v %s", err, out)
	}
}

// TestSandboxCreateReuse: --reuse-key prints the key's sandbox, created once.
func TestSandboxCreateReuse(t *testing.T) {
	fake := newFake(t)
	var ids [2]string
	for i := range ids {
		r := run(t, fake.URL, "", "sandbox", "create", "--reuse-key", "proj:agent", "--reuse-hard-ttl", "2h")
		if r.code != 0 {
			t.Fatalf("create: %+v", r)
		}
		ids[i] = strings.TrimSpace(r.stdout)
	}
	if ids[0] != ids[1] || !strings.HasPrefix(ids[0], "sandbox-") {
		t.Fatalf("reuse-key ids %v", ids)
	}
	if r := run(t, fake.URL, "", "sandbox", "create", "--reuse-key", "other"); r.code != 0 || strings.TrimSpace(r.stdout) == ids[0] {
		t.Fatalf("another key: %+v", r)
	}
}

// A local file that cannot be read is named once in the error, not once by the CLI and again
// by the operating system's message.
func TestLocalFileErrorsSayItOnce(t *testing.T) {
	fake := newFake(t)
	id := fake.AddSandbox("python-default", 0)
	missing := filepath.Join(t.TempDir(), "nope.py")
	for _, args := range [][]string{
		{"python", id, "-f", missing},
		{"fs", "put", id, missing},
		{"browser", "batch", id, "-f", missing},
	} {
		r := run(t, fake.URL, "", args...)
		if r.code != 64 || strings.Count(r.stderr, missing) != 1 || !strings.Contains(r.stderr, "no such file") {
			t.Errorf("%v: %+v", args, r)
		}
	}
}

// The shell completion offers the caller's sandboxes for a <sandbox> argument and the
// profiles for --profile, read from bay; without a bay it offers nothing and does not hang.
func TestCompletionOffersSandboxesAndProfiles(t *testing.T) {
	fake := newFake(t)
	id := fake.AddSandbox("python-default", 0)
	for _, args := range [][]string{{"shell", ""}, {"fs", "get", ""}, {"sandbox", "delete", ""}, {"term", id[:9]}} {
		r := run(t, fake.URL, "", append([]string{"__complete"}, args...)...)
		if r.code != 0 || !strings.Contains(r.stdout, id+"\tpython-default, ") || !strings.Contains(r.stdout, ":4\n") {
			t.Errorf("complete %q: %+v", args, r)
		}
	}
	if r := run(t, fake.URL, "", "__complete", "shell", id, ""); strings.Contains(r.stdout, id) {
		t.Errorf("a second argument is completed with sandbox ids: %+v", r)
	}
	if r := run(t, fake.URL, "", "__complete", "sandbox", "create", "--profile", ""); r.code != 0 || !strings.Contains(r.stdout, "python-default\n") {
		t.Errorf("complete --profile: %+v", r)
	}
	if r := run(t, "http://127.0.0.1:1", "", "__complete", "shell", ""); r.code != 0 || strings.Contains(r.stdout, "sandbox-") {
		t.Errorf("complete without a bay: %+v", r)
	}
	if r := run(t, fake.URL, "", "completion", "bash"); r.code != 0 || !strings.Contains(r.stdout, "__start_shipyard") {
		t.Errorf("completion bash: code %d, %d bytes", r.code, len(r.stdout))
	}
}

// The CLI's JSON output is bay's answer as bay sent it: the same fields, the same values, the
// same nulls, whatever the SDK's result types look like in Go.
func TestJSONOutputIsTheAPIAnswer(t *testing.T) {
	fake := newFake(t)
	r := run(t, fake.URL, "", "sandbox", "create", "-o", "json")
	var sb struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &sb); r.code != 0 || err != nil {
		t.Fatalf("create: %+v %v", r, err)
	}
	if r = run(t, fake.URL, "", "python", sb.ID, "print(1)"); r.code != 0 {
		t.Fatalf("python: %+v", r)
	}
	if r = run(t, fake.URL, "", "shell", sb.ID, "echo out; exit 3"); r.code != 3 {
		t.Fatalf("shell: %+v", r)
	}
	if r = run(t, fake.URL, "", "fs", "put", sb.ID, "-", "d/a.txt"); r.code != 0 {
		t.Fatalf("put: %+v", r)
	}
	if r = run(t, fake.URL, "", "cargo", "create"); r.code != 0 {
		t.Fatalf("cargo: %+v", r)
	}
	r = run(t, fake.URL, "", "history", sb.ID, "--last", "-o", "json")
	var last struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &last); r.code != 0 || err != nil {
		t.Fatalf("history --last: %+v %v", r, err)
	}
	checkJSONIsAnswer(t, fake.URL, "", func(args ...string) result { return run(t, fake.URL, "", args...) }, []jsonCase{
		{[]string{"sandbox", "get", sb.ID}, "/v1/sandboxes/" + sb.ID},
		{[]string{"sandbox", "list"}, "/v1/sandboxes"},
		{[]string{"history", sb.ID}, "/v1/sandboxes/" + sb.ID + "/history"},
		{[]string{"history", sb.ID, last.ID}, "/v1/sandboxes/" + sb.ID + "/history/" + last.ID},
		{[]string{"fs", "ls", sb.ID, "d"}, "/v1/sandboxes/" + sb.ID + "/filesystem/directories?path=d"},
		{[]string{"profiles", "--detail"}, "/v1/profiles?detail=true"},
		{[]string{"cargo", "list"}, "/v1/cargos"},
		{[]string{"health"}, "/health"},
	})
}

// jsonCase is a CLI command whose -o json output must be bay's answer to a GET of path.
type jsonCase struct {
	args []string
	path string
}

// checkJSONIsAnswer runs each case (with -o json) and compares its output with bay's answer
// to the GET at url (with token, when set), both compacted.
func checkJSONIsAnswer(t *testing.T, url, token string, run func(args ...string) result, cases []jsonCase) {
	t.Helper()
	get := func(path string) string {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		return string(b)
	}
	compact := func(s string) string {
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(s)); err != nil {
			t.Fatalf("not JSON: %v: %q", err, s)
		}
		return b.String()
	}
	for _, c := range cases {
		r := run(append(c.args, "-o", "json")...)
		if r.code != 0 {
			t.Errorf("%v: %+v", c.args, r)
			continue
		}
		if got, want := compact(r.stdout), compact(get(c.path)); got != want {
			t.Errorf("%v:\n got %s\nwant %s", c.args, got, want)
		}
	}
}
