package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk/sdktest"
)

func TestBrowserExec(t *testing.T) {
	fake := newFake(t)
	id := fake.AddSandbox("browser-python", 0)
	if r := run(t, fake.URL, "", "browser", "exec", id, "open https://example.com"); r.code != 0 || r.stdout != "✓ https://example.com\n" || r.stderr != "" {
		t.Fatalf("open: %+v", r)
	}
	// Several arguments are words: quoted so that bay splits them back alike.
	var got []string
	fake.SetBrowserFunc(func(_, cmd string) sdktest.BrowserResult {
		got = append(got, cmd)
		return sdktest.BrowserResult{Stdout: "filled\n"}
	})
	if r := run(t, fake.URL, "", "browser", "exec", id, "fill", "@e1", "two words", "it's"); r.code != 0 || r.stdout != "filled\n" {
		t.Fatalf("fill: %+v", r)
	}
	if len(got) != 1 || got[0] != `fill @e1 'two words' 'it'\''s'` {
		t.Fatalf("sent %q", got)
	}
	fake.SetBrowserFunc(nil)

	// The exit code is the command's; its stderr goes to stderr.
	r := run(t, fake.URL, "", "browser", "exec", id, "click", "@fail", "--description", "d", "--tags", "x")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "fake failure: click @fail") {
		t.Fatalf("failing: %+v", r)
	}
	r = run(t, fake.URL, "", "browser", "exec", id, "get title", "-o", "json")
	var res bayapi.BrowserExecResponse
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 || res.Output != sdktest.FakePageTitle+"\n" || !strings.HasPrefix(res.ExecutionID, "exec-") {
		t.Fatalf("json: %+v %v", r, err)
	}
	fake.SetBrowserFunc(func(string, string) sdktest.BrowserResult {
		return sdktest.BrowserResult{Stderr: "timed out", ExitCode: -1}
	})
	if r = run(t, fake.URL, "", "browser", "exec", id, "wait 999999"); r.code != 124 {
		t.Fatalf("timeout: %+v", r)
	}
	fake.SetBrowserFunc(nil)

	// Refusals of bay keep their exit codes.
	plain := fake.AddSandbox("python-default", 0)
	if r = run(t, fake.URL, "", "browser", "exec", plain, "get title"); r.code != 65 || !strings.Contains(r.stderr, "[capability_not_supported]") {
		t.Fatalf("no browser: %+v", r)
	}
	if r = run(t, fake.URL, "", "browser", "exec", id, "get title", "--exec-timeout", "301"); r.code != 65 {
		t.Fatalf("timeout 301: %+v", r)
	}
	if r = run(t, fake.URL, "", "browser", "exec", id); r.code != 64 {
		t.Fatalf("no command: %+v", r)
	}
	r = run(t, fake.URL, "", "history", id, "--last", "--type", "browser", "-o", "json")
	var e bayapi.ExecutionHistoryEntry
	if json.Unmarshal([]byte(r.stdout), &e); r.code != 0 || e.ExecType != bayapi.ExecBrowser || e.Code != "wait 999999" || e.Success {
		t.Fatalf("history: %+v", r)
	}
	if r = run(t, fake.URL, "", "browser", "exec", id, "get title", "--include-trace"); r.code != 0 || !strings.HasPrefix(r.stderr, "trace_ref: blob:blob-") {
		t.Fatalf("include-trace: %+v", r)
	}
}

func TestBrowserScreenshot(t *testing.T) {
	fake := newFake(t)
	id := fake.AddSandbox("browser-python", 0)
	dir := t.TempDir()
	out := filepath.Join(dir, "page.png")

	r := run(t, fake.URL, "", "browser", "exec", id, "open https://example.com", "--screenshot", out)
	if r.code != 0 || !strings.Contains(r.stdout, "✓ https://example.com") || !strings.Contains(r.stdout, "screenshot saved to "+out) {
		t.Fatalf("exec+screenshot: %+v", r)
	}
	if b, err := os.ReadFile(out); err != nil || !bytes.Equal(b, sdktest.TinyPNG()) {
		t.Fatalf("png: %v", err)
	}
	// The temporary workspace copy is removed.
	dels := fake.Calls("DELETE", "/v1/sandboxes/"+id+"/filesystem/files")
	if len(dels) != 1 || !strings.HasPrefix(dels[0].Query.Get("path"), ".shipyard-screenshot-") {
		t.Fatalf("deletes %+v", dels)
	}
	if _, _, _, ok := fake.File(id, dels[0].Query.Get("path")); ok {
		t.Fatal("workspace copy left")
	}

	// An existing file is kept without --force, before anything runs.
	os.WriteFile(out, []byte("keep"), 0o644)
	fake.ResetCalls()
	if r = run(t, fake.URL, "", "browser", "exec", id, "--screenshot", out); r.code != 64 || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("overwrite refused: %+v", r)
	}
	if b, _ := os.ReadFile(out); string(b) != "keep" || fake.Count("POST", "/v1/sandboxes/"+id+"/browser/exec") != 0 {
		t.Fatalf("file changed or bay called: %q", b)
	}
	r = run(t, fake.URL, "", "browser", "exec", id, "--screenshot", out, "--force", "--full", "-o", "json")
	var js struct {
		Result     *bayapi.BrowserExecResponse `json:"result"`
		Screenshot struct {
			LocalPath string `json:"local_path"`
			Size      int64  `json:"size"`
		} `json:"screenshot"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil || r.code != 0 || js.Result != nil || js.Screenshot.Size != int64(len(sdktest.TinyPNG())) {
		t.Fatalf("forced json: %+v %v", r, err)
	}
	if b, _ := os.ReadFile(out); !bytes.Equal(b, sdktest.TinyPNG()) {
		t.Fatal("not overwritten with --force")
	}

	// A failing command takes no screenshot; a failing screenshot leaves no file.
	out2 := filepath.Join(dir, "none.png")
	if r = run(t, fake.URL, "", "browser", "exec", id, "click @fail", "--screenshot", out2); r.code != 1 {
		t.Fatalf("failing command: %+v", r)
	}
	fake.SetBrowserFunc(func(_, cmd string) sdktest.BrowserResult {
		return sdktest.BrowserResult{Stderr: "no page", ExitCode: 2}
	})
	if r = run(t, fake.URL, "", "browser", "exec", id, "--screenshot", out2); r.code != 2 || !strings.Contains(r.stderr, "screenshot failed: no page") {
		t.Fatalf("failing screenshot: %+v", r)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("files left: %v", entries)
	}
}

func TestBrowserBatch(t *testing.T) {
	fake := newFake(t)
	id := fake.AddSandbox("browser-python", 0)
	r := run(t, fake.URL, "", "browser", "batch", id, "open https://a.test", "get title")
	if r.code != 0 || r.stdout != "--- step 1/2: open https://a.test (exit 0, 1 ms)\n✓ https://a.test\n--- step 2/2: get title (exit 0, 1 ms)\n"+sdktest.FakePageTitle+"\n" ||
		!strings.Contains(r.stderr, "batch succeeded: 2/2 steps ran") {
		t.Fatalf("batch: %+v", r)
	}

	file := filepath.Join(t.TempDir(), "commands.txt")
	os.WriteFile(file, []byte("# log in\nopen https://a.test\n\nclick @fail\nget title\n"), 0o644)
	r = run(t, fake.URL, "", "browser", "batch", id, "-f", file)
	if r.code != 1 || strings.Contains(r.stdout, "step 3/3") || !strings.Contains(r.stderr, "batch failed: 2/3 steps ran") {
		t.Fatalf("stopping batch: %+v", r)
	}
	r = run(t, fake.URL, "open https://a.test\nclick @fail\nget title\n", "browser", "batch", id, "--continue-on-error", "-o", "json")
	var res bayapi.BrowserBatchResponse
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 1 || res.CompletedSteps != 3 || res.Success {
		t.Fatalf("continuing batch from stdin: %+v %v", r, err)
	}
	r = run(t, fake.URL, "", "history", id, "--last", "--type", "browser_batch", "-o", "json")
	var e bayapi.ExecutionHistoryEntry
	if json.Unmarshal([]byte(r.stdout), &e); e.Code != "open https://a.test\nclick @fail\nget title" {
		t.Fatalf("history: %+v", r)
	}

	if r = run(t, fake.URL, "", "browser", "batch", id, "-f", file, "get title"); r.code != 64 {
		t.Fatalf("both: %+v", r)
	}
	if r = run(t, fake.URL, "# nothing\n\n", "browser", "batch", id); r.code != 64 {
		t.Fatalf("empty: %+v", r)
	}
	if r = run(t, fake.URL, "", "browser", "batch", id, "get title", "--exec-timeout", "601"); r.code != 65 {
		t.Fatalf("timeout 601: %+v", r)
	}
}
