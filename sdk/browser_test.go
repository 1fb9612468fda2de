package sdk_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
	"github.com/shipyard-dev/shipyard/sdk/sdktest"
)

func TestBrowserExecAndBatch(t *testing.T) {
	fake, c := newPair(t, "tok")
	ctx := ctxT(t)
	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{Profile: "browser-python"})
	if err != nil {
		t.Fatal(err)
	}

	res, err := sb.Browser(ctx, "open https://example.com")
	if err != nil || !res.Success || res.Output != "✓ https://example.com\n" || res.Error != "" || res.ExitCode != 0 ||
		!strings.HasPrefix(res.ExecutionID, "exec-") || res.TraceRef != "" {
		t.Fatalf("open: %+v, %v", res, err)
	}
	res, err = sb.ExecBrowser(ctx, sdk.BrowserRequest{Cmd: "click fail-button", Timeout: 5 * time.Second, Description: "d", Tags: "b, a"})
	if err != nil || res.Success || res.ExitCode != 1 || !strings.Contains(res.Error, "fail-button") {
		t.Fatalf("failing command: %+v, %v", res, err)
	}
	calls := fake.Calls("POST", "/v1/sandboxes/"+sb.ID+"/browser/exec")
	if len(calls) != 2 {
		t.Fatalf("calls %d", len(calls))
	}
	e, err := sb.Client().LastExecution(ctx, sb.ID, bayapi.ExecBrowser)
	if err != nil || e.Code != "click fail-button" || e.Success || e.Tags != "a,b" || e.Description != "d" ||
		e.LearnStatus != "skipped" {
		t.Fatalf("history: %+v, %v", e, err)
	}

	batch, err := sb.BrowserBatch(ctx, sdk.BrowserBatchRequest{Commands: []string{"open https://a.test", "get title", "fail now", "get title"}})
	if err != nil || batch.Success || batch.TotalSteps != 4 || batch.CompletedSteps != 3 || len(batch.Results) != 3 {
		t.Fatalf("stopping batch: %+v, %v", batch, err)
	}
	if st := batch.Results[1]; st.Cmd != "get title" || st.Stdout != sdktest.FakePageTitle+"\n" || st.StepIndex != 1 || st.ExitCode != 0 {
		t.Fatalf("step 1: %+v", st)
	}
	batch, err = sb.BrowserBatch(ctx, sdk.BrowserBatchRequest{Commands: []string{"fail", "get title"}, ContinueOnError: true, Timeout: 600 * time.Second})
	if err != nil || batch.Success || batch.CompletedSteps != 2 || batch.Results[1].ExitCode != 0 {
		t.Fatalf("continuing batch: %+v, %v", batch, err)
	}
	e, err = sb.Client().LastExecution(ctx, sb.ID, bayapi.ExecBrowserBatch)
	if err != nil || e.Code != "fail\nget title" || e.Success || e.Output != sdktest.FakePageTitle {
		t.Fatalf("batch history: %+v, %v", e, err)
	}

	// Validation mirrors bay: 422 for a missing or out-of-range field.
	for what, call := range map[string]func() error{
		"empty cmd": func() error { _, err := sb.Browser(ctx, ""); return err },
		"timeout 301": func() error {
			_, err := sb.ExecBrowser(ctx, sdk.BrowserRequest{Cmd: "get title", Timeout: 301 * time.Second})
			return err
		},
		"no commands": func() error { _, err := sb.BrowserBatch(ctx, sdk.BrowserBatchRequest{}); return err },
		"batch timeout 601": func() error {
			_, err := sb.BrowserBatch(ctx, sdk.BrowserBatchRequest{Commands: []string{"get title"}, Timeout: 601 * time.Second})
			return err
		},
	} {
		var apiErr *sdk.Error
		if err := call(); !errors.As(err, &apiErr) || apiErr.Status != 422 || apiErr.Code != bayapi.CodeValidation {
			t.Errorf("%s: %v, want 422 validation_error", what, err)
		}
	}
	// include_trace answers the trace's reference; learn keeps the trace without answering it.
	traced, err := sb.ExecBrowser(ctx, sdk.BrowserRequest{Cmd: "get title", IncludeTrace: true})
	if err != nil || !strings.HasPrefix(traced.TraceRef, "blob:") {
		t.Errorf("include_trace: %+v %v", traced, err)
	}
	learned, err := sb.BrowserBatch(ctx, sdk.BrowserBatchRequest{Commands: []string{"get title"}, Learn: true})
	if err != nil || learned.TraceRef != "" {
		t.Fatalf("learn: %+v %v", learned, err)
	}
	if e, err := sb.Client().GetExecution(ctx, sb.ID, learned.ExecutionID); err != nil || e.PayloadRef == "" || e.LearnStatus != "pending" || !e.LearnEnabled {
		t.Errorf("learning row: %+v %v", e, err)
	}
}

// The SDK sends the reference's field names and leaves unset options to bay's defaults.
func TestBrowserWireBody(t *testing.T) {
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			t.Errorf("body: %v", err)
		}
		got = append(got, m)
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/exec_batch") {
			w.Write([]byte(`{"results":[],"total_steps":1,"completed_steps":0,"success":false,"duration_ms":0,"execution_id":"exec-1","execution_time_ms":1,"trace_ref":"blob:b"}`))
			return
		}
		w.Write([]byte(`{"success":true,"output":"ok","error":null,"exit_code":0,"execution_id":"exec-1","execution_time_ms":1,"trace_ref":"blob:a"}`))
	}))
	defer srv.Close()
	c, _ := sdk.New(srv.URL, "")
	ctx := ctxT(t)
	r, err := c.ExecBrowser(ctx, "sandbox-1", sdk.BrowserRequest{Cmd: "get title"})
	if err != nil || r.TraceRef != "blob:a" {
		t.Fatalf("%+v %v", r, err)
	}
	c.ExecBrowser(ctx, "sandbox-1", sdk.BrowserRequest{Cmd: "x", Timeout: 9 * time.Second, Description: "d", Tags: "t", Learn: true, IncludeTrace: true})
	c.ExecBrowserBatch(ctx, "sandbox-1", sdk.BrowserBatchRequest{Commands: []string{"a"}})
	b, err := c.ExecBrowserBatch(ctx, "sandbox-1", sdk.BrowserBatchRequest{Commands: []string{"a", "b"}, Timeout: 90 * time.Second, ContinueOnError: true, IncludeTrace: true})
	if err != nil || b.TraceRef != "blob:b" {
		t.Fatalf("%+v %v", b, err)
	}
	want := []string{
		`{"cmd":"get title"}`,
		`{"cmd":"x","description":"d","include_trace":true,"learn":true,"tags":"t","timeout":9}`,
		`{"commands":["a"]}`,
		`{"commands":["a","b"],"include_trace":true,"stop_on_error":false,"timeout":90}`,
	}
	for i, w := range want {
		b, _ := json.Marshal(got[i])
		if string(b) != w {
			t.Errorf("body %d: %s, want %s", i, b, w)
		}
	}
}

func TestBrowserNeverRetriedWithoutKey(t *testing.T) {
	fake, c := newPair(t, "")
	ctx := ctxT(t)
	id := fake.AddSandbox("browser-python", 0)
	sp := "/v1/sandboxes/" + id
	for _, p := range []string{sp + "/browser/exec", sp + "/browser/exec_batch"} {
		fake.Fail(sdktest.Fault{Method: "POST", Path: p, Status: 502, Code: "ship_error"})
	}
	if _, err := c.ExecBrowser(ctx, id, sdk.BrowserRequest{Cmd: "click @e1"}); !sdk.IsCode(err, "ship_error") {
		t.Fatalf("exec: %v", err)
	}
	if _, err := c.ExecBrowserBatch(ctx, id, sdk.BrowserBatchRequest{Commands: []string{"click @e1"}}); !sdk.IsCode(err, "ship_error") {
		t.Fatalf("batch: %v", err)
	}
	if n := fake.Count("POST", sp+"/browser/*"); n != 2 {
		t.Fatalf("attempts %d, want one per call", n)
	}

	// A caller's Idempotency-Key declares the repeat harmless: retried, with the same key.
	fake.ResetCalls()
	fake.Fail(sdktest.Fault{Method: "POST", Path: sp + "/browser/exec", Status: 503, Code: "unavailable"})
	res, err := c.ExecBrowser(ctx, id, sdk.BrowserRequest{Cmd: "get title"}, sdk.WithIdempotencyKey("title-1"))
	if err != nil || res.Output != sdktest.FakePageTitle+"\n" {
		t.Fatalf("keyed exec: %+v, %v", res, err)
	}
	calls := fake.Calls("POST", sp+"/browser/exec")
	if len(calls) != 2 || calls[0].Header.Get(bayapi.HeaderIdempotencyKey) != "title-1" || calls[1].Header.Get(bayapi.HeaderIdempotencyKey) != "title-1" {
		t.Fatalf("keyed attempts %d %v", len(calls), calls)
	}

	// session_not_ready is answered before anything ran: retried without a key.
	fake.ResetCalls()
	fake.Fail(sdktest.Fault{Method: "POST", Path: sp + "/browser/exec_batch", Status: 503, Code: "session_not_ready",
		Details: map[string]any{"retry_after_ms": 1}})
	if b, err := c.ExecBrowserBatch(ctx, id, sdk.BrowserBatchRequest{Commands: []string{"get title"}}); err != nil || !b.Success {
		t.Fatalf("batch after session_not_ready: %+v, %v", b, err)
	}
	if n := fake.Count("POST", sp+"/browser/exec_batch"); n != 2 {
		t.Fatalf("attempts %d", n)
	}
}

func TestScreenshot(t *testing.T) {
	fake, c := newPair(t, "")
	ctx := ctxT(t)
	id := fake.AddSandbox("browser-python", 0)
	var buf bytes.Buffer
	res, n, err := c.Screenshot(ctx, id, "/workspace/shots/my page.png", true, &buf)
	if err != nil || n != int64(len(sdktest.TinyPNG())) || !bytes.Equal(buf.Bytes(), sdktest.TinyPNG()) {
		t.Fatalf("screenshot: %+v %d %v", res, n, err)
	}
	if res.Output != "Screenshot saved to /workspace/shots/my page.png\n" {
		t.Fatalf("output %q", res.Output)
	}
	if e, _ := c.LastExecution(ctx, id, bayapi.ExecBrowser); e == nil || e.Code != "screenshot 'shots/my page.png' --full" {
		t.Fatalf("command sent: %+v", e)
	}
	if _, _, _, ok := fake.File(id, "shots/my page.png"); !ok {
		t.Fatal("the screenshot stays in the workspace")
	}

	for _, bad := range []string{"", "/etc/x.png", "../x.png", "a/../../x.png", "dir/", "a\nb.png"} {
		if _, _, err := c.Screenshot(ctx, id, bad, false, &buf); err == nil {
			t.Errorf("screenshot path %q accepted", bad)
		}
	}
	if n := fake.Count("POST", "/v1/sandboxes/"+id+"/browser/exec"); n != 1 {
		t.Fatalf("bad paths reached bay: %d calls", n)
	}

	fake.SetBrowserFunc(func(_, cmd string) sdktest.BrowserResult {
		return sdktest.BrowserResult{Stderr: "no page open", ExitCode: 1}
	})
	fake.ResetCalls()
	buf.Reset()
	_, _, err = c.Screenshot(ctx, id, "x.png", false, &buf)
	var ce *sdk.BrowserCommandError
	if !errors.As(err, &ce) || ce.ExitCode != 1 || ce.Stderr != "no page open" || buf.Len() != 0 {
		t.Fatalf("failed screenshot: %v", err)
	}
	if fake.Count("GET", "/v1/sandboxes/"+id+"/filesystem/download") != 0 {
		t.Fatal("downloaded after a failed screenshot")
	}

	noBrowser := fake.AddSandbox("python-default", 0)
	if _, _, err := c.Screenshot(ctx, noBrowser, "x.png", false, &buf); !sdk.IsCode(err, bayapi.CodeCapabilityNotSupported) {
		t.Fatalf("python-default: %v", err)
	}
}
