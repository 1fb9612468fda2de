package sdk_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
	"github.com/shipyard-dev/shipyard/sdk/sdktest"
)

func newPair(t *testing.T, token string, opts ...sdk.Option) (*sdktest.Server, *sdk.Client) {
	t.Helper()
	fake := sdktest.New()
	fake.SetToken(token)
	t.Cleanup(fake.Close)
	opts = append([]sdk.Option{sdk.WithBackoff(func(int) time.Duration { return time.Millisecond })}, opts...)
	c, err := sdk.New(fake.URL, token, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return fake, c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestNewValidatesEndpoint(t *testing.T) {
	for _, bad := range []string{"", "ftp://x", "http://"} {
		if _, err := sdk.New(bad, ""); err == nil {
			t.Errorf("New(%q) succeeded", bad)
		}
	}
	c, err := sdk.New("localhost:8114/", "")
	if err != nil || c.Endpoint() != "http://localhost:8114" {
		t.Fatalf("got %v %v", c, err)
	}
}

func TestNewFromEnv(t *testing.T) {
	t.Setenv("SHIPYARD_ENDPOINT", "")
	t.Setenv("SHIPYARD_TOKEN", "")
	t.Setenv("BAY_ENDPOINT", "http://bay.example:9000")
	t.Setenv("BAY_TOKEN", "bt")
	c, err := sdk.NewFromEnv()
	if err != nil || c.Endpoint() != "http://bay.example:9000" || sdk.TokenFromEnv() != "bt" {
		t.Fatalf("bay fallback: %v %v", c, err)
	}
	t.Setenv("SHIPYARD_ENDPOINT", "http://ship.example")
	t.Setenv("SHIPYARD_TOKEN", "st")
	c, _ = sdk.NewFromEnv()
	if c.Endpoint() != "http://ship.example" || sdk.TokenFromEnv() != "st" {
		t.Fatalf("shipyard vars must win: %s", c.Endpoint())
	}
}

// TestEveryMethod exercises every API method of the SDK against the fake bay.
func TestEveryMethod(t *testing.T) {
	fake, c := newPair(t, "secret")
	ctx := ctxT(t)

	h, err := c.Health(ctx)
	if err != nil || h.Status != "ok" {
		t.Fatalf("health: %v %v", h, err)
	}
	profs, err := c.ListProfiles(ctx, true)
	if err != nil || len(profs.Items) == 0 || profs.Items[0].Containers == nil {
		t.Fatalf("profiles: %+v %v", profs, err)
	}

	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: 600 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sb.ID, "sandbox-") || sb.Status != "idle" || sb.ExpiresAt.IsZero() || sb.Profile != bayapi.DefaultProfile {
		t.Fatalf("create: %+v", sb)
	}
	list, err := c.ListSandboxes(ctx, sdk.ListSandboxesRequest{Limit: 10, Status: "idle"})
	if err != nil || len(list.Items) != 1 || list.Items[0].ID != sb.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	old := sb.ExpiresAt
	if err := sb.ExtendTTL(ctx, 60*time.Second); err != nil || !sb.ExpiresAt.Equal(old.Add(time.Minute)) {
		t.Fatalf("extend: %v %v", sb.ExpiresAt, err)
	}
	if err := sb.Keepalive(ctx); err != nil {
		t.Fatal(err)
	}

	py, err := sb.ExecPython(ctx, sdk.PythonRequest{Code: `print("hi")`, ExecOptions: sdk.ExecOptions{Timeout: 10 * time.Second, IncludeCode: true, Tags: "b,a"}})
	if err != nil || !py.Success || py.Output != "hi" || py.Code != `print("hi")` || !strings.HasPrefix(py.ExecutionID, "exec-") {
		t.Fatalf("python: %+v %v", py, err)
	}
	py, err = sb.Python(ctx, "raise ValueError('boom')")
	if err != nil || py.Success || !strings.Contains(py.Error, "ValueError") {
		t.Fatalf("python error: %+v %v", py, err)
	}
	sh, err := sb.ExecShell(ctx, sdk.ShellRequest{Command: "pwd", Cwd: "src/../sub"})
	if err != nil || sh.Output != "/workspace/sub" || sh.ExitCode != 0 {
		t.Fatalf("shell: %+v %v", sh, err)
	}
	sh, err = sb.Shell(ctx, "echo out; >&2 bad; exit 3")
	if err != nil || sh.Success || sh.ExitCode != 3 || sh.Output != "out" || sh.Error != "bad" {
		t.Fatalf("shell exit: %+v %v", sh, err)
	}

	if err := sb.WriteFile(ctx, "src/main.py", "print(1)\n"); err != nil {
		t.Fatal(err)
	}
	if s, err := sb.ReadFile(ctx, "src/main.py"); err != nil || s != "print(1)\n" {
		t.Fatalf("read: %q %v", s, err)
	}
	ents, err := sb.ListFiles(ctx, "")
	if err != nil || len(ents) != 1 || ents[0].Name != "src" || !ents[0].IsDir {
		t.Fatalf("list dir: %+v %v", ents, err)
	}
	up, err := sb.Upload(ctx, "data/in.bin", strings.NewReader("abc\x00def"), 7)
	if err != nil || up.Size != 7 || up.Path != "data/in.bin" {
		t.Fatalf("upload: %+v %v", up, err)
	}
	var buf bytes.Buffer
	if n, err := sb.Download(ctx, "data/in.bin", &buf); err != nil || n != 7 || buf.String() != "abc\x00def" {
		t.Fatalf("download: %d %q %v", n, buf.String(), err)
	}
	if err := sb.DeleteFile(ctx, "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Download(ctx, "data/in.bin", io.Discard); !sdk.IsNotFound(err) || !sdk.IsCode(err, bayapi.CodeFileNotFound) {
		t.Fatalf("download deleted: %v", err)
	}

	hist, err := sb.History(ctx, sdk.HistoryRequest{ExecType: "python", Limit: 5})
	if err != nil || hist.Total != 2 || len(hist.Entries) != 2 {
		t.Fatalf("history: %+v %v", hist, err)
	}
	last, err := c.LastExecution(ctx, sb.ID, "shell")
	if err != nil || last.ExecType != "shell" || last.Code != "echo out; >&2 bad; exit 3" {
		t.Fatalf("last: %+v %v", last, err)
	}
	got, err := c.GetExecution(ctx, sb.ID, last.ID)
	if err != nil || got.ID != last.ID {
		t.Fatalf("get exec: %+v %v", got, err)
	}
	notes, tags := "works", "z, y ,y"
	ann, err := c.AnnotateExecution(ctx, sb.ID, last.ID, sdk.AnnotateRequest{Notes: &notes, Tags: &tags})
	if err != nil || ann.Notes != "works" || ann.Tags != "y,z" {
		t.Fatalf("annotate: %+v %v", ann, err)
	}
	if _, err := c.GetExecution(ctx, sb.ID, "exec-missing"); !sdk.IsNotFound(err) {
		t.Fatalf("missing exec: %v", err)
	}

	cargo, err := c.CreateCargo(ctx, 0)
	if err != nil || cargo.Managed || cargo.SizeLimitMB != 1024 {
		t.Fatalf("cargo: %+v %v", cargo, err)
	}
	cl, err := c.ListCargos(ctx, sdk.ListCargosRequest{})
	if err != nil || len(cl.Items) != 1 {
		t.Fatalf("cargo list: %+v %v", cl, err)
	}
	yes := true
	if cl, err = c.ListCargos(ctx, sdk.ListCargosRequest{Managed: &yes}); err != nil || len(cl.Items) != 1 || cl.Items[0].ID != sb.CargoID {
		t.Fatalf("managed cargo list: %+v %v", cl, err)
	}
	if g, err := c.GetCargo(ctx, cargo.ID); err != nil || g.ID != cargo.ID {
		t.Fatalf("cargo get: %v", err)
	}
	sb2, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{CargoID: cargo.ID, Profile: "shell-only"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteCargo(ctx, cargo.ID); !sdk.IsCode(err, bayapi.CodeConflict) {
		t.Fatalf("delete used cargo: %v", err)
	}
	if _, err := sb2.Python(ctx, "1"); !sdk.IsCode(err, bayapi.CodeCapabilityNotSupported) {
		t.Fatalf("capability: %v", err)
	}
	if err := sb2.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteCargo(ctx, cargo.ID); err != nil {
		t.Fatal(err)
	}

	gs, err := c.GCStatus(ctx)
	if err != nil || !gs.Enabled || len(gs.Tasks) != 4 {
		t.Fatalf("gc status: %+v %v", gs, err)
	}
	gr, err := c.RunGC(ctx, sdk.GCRequest{Tasks: []string{bayapi.GCIdleSession}})
	if err != nil || len(gr.Results) != 1 {
		t.Fatalf("gc run: %+v %v", gr, err)
	}

	if err := sb.Refresh(ctx); err != nil || sb.Status != "ready" || len(sb.Containers) != 1 {
		t.Fatalf("refresh: %+v %v", sb, err)
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSandbox(ctx, sb.ID); !sdk.IsNotFound(err) {
		t.Fatalf("get deleted: %v", err)
	}
	for _, call := range fake.Calls("", "/v1/*") {
		if call.Header.Get("Authorization") != "Bearer secret" {
			t.Fatalf("%s %s without token", call.Method, call.Path)
		}
	}
}

func TestTerminal(t *testing.T) {
	fake, c := newPair(t, "tok")
	ctx := ctxT(t)
	id := fake.AddSandbox("python-default", 0)
	term, err := c.Terminal(ctx, id, 100, 30)
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	readUntil := func(want string) string {
		t.Helper()
		var got []byte
		buf := make([]byte, 256)
		for !bytes.Contains(got, []byte(want)) {
			n, err := term.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				t.Fatalf("read %q: got %q, %v", want, got, err)
			}
		}
		return string(got)
	}
	readUntil("$ ")
	if err := term.Resize(ctx, 120, 40); err != nil {
		t.Fatal(err)
	}
	if _, err := term.Write([]byte("h\xffi\r")); err != nil {
		t.Fatal(err)
	}
	readUntil("echo: h\xffi\r\n$ ")
	term.Write([]byte{0x04})
	readUntil("exit\r\n")
	if _, err := term.Read(make([]byte, 10)); err != io.EOF {
		t.Fatalf("after exit: %v, want io.EOF", err)
	}
	sizes := fake.TerminalSizes()
	if len(sizes) != 2 || sizes[0] != [2]int{100, 30} || sizes[1] != [2]int{120, 40} {
		t.Fatalf("sizes %v", sizes)
	}
	if _, err := c.Terminal(ctx, "sandbox-nope", 80, 24); !sdk.IsNotFound(err) {
		t.Fatalf("terminal of missing sandbox: %v", err)
	}
}

// TestNoAuthorizationWithoutToken: unlike the reference client, an anonymous client sends no
// Authorization header at all.
func TestNoAuthorizationWithoutToken(t *testing.T) {
	fake, c := newPair(t, "")
	ctx := ctxT(t)
	if _, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListSandboxes(ctx, sdk.ListSandboxesRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, call := range fake.Calls("", "") {
		if _, ok := call.Header["Authorization"]; ok {
			t.Fatalf("%s %s sent Authorization", call.Method, call.Path)
		}
	}
	owner, _ := sdk.New(fake.URL, "", sdk.WithOwner("alice"))
	owner.ListSandboxes(ctx, sdk.ListSandboxesRequest{})
	calls := fake.Calls("GET", "/v1/sandboxes")
	if calls[len(calls)-1].Header.Get("X-Owner") != "alice" {
		t.Fatal("X-Owner not sent")
	}
}

func TestErrorDecoding(t *testing.T) {
	fake, c := newPair(t, "tok", sdk.WithMaxRetries(0))
	ctx := ctxT(t)

	bad, _ := sdk.New(fake.URL, "wrong")
	_, err := bad.ListSandboxes(ctx, sdk.ListSandboxesRequest{})
	var e *sdk.Error
	if !errors.As(err, &e) || e.Status != 401 || e.Code != "unauthorized" || e.Message != "Invalid API key" || e.RequestID == "" {
		t.Fatalf("401: %#v", err)
	}

	_, err = c.GetSandbox(ctx, "sandbox-000000000000")
	if !errors.As(err, &e) || e.Status != 404 || e.Code != "not_found" || !strings.Contains(err.Error(), "[not_found] Sandbox not found: sandbox-000000000000") {
		t.Fatalf("404: %v", err)
	}

	id := fake.AddSandbox("python-default", 0)
	_, err = c.ReadFile(ctx, id, "../etc/passwd")
	if !errors.As(err, &e) || e.Code != "invalid_path" || e.Details["reason"] != "path_traversal" {
		t.Fatalf("invalid path: %#v", err)
	}

	_, err = c.ExecPython(ctx, id, sdk.PythonRequest{Code: "1", ExecOptions: sdk.ExecOptions{Timeout: 301 * time.Second}})
	if !errors.As(err, &e) || e.Status != 422 || e.Code != "validation_error" || e.Details["detail"] == nil {
		t.Fatalf("422: %#v", err)
	}

	fake.Fail(sdktest.Fault{Method: "GET", Path: "/v1/sandboxes", Status: 500, Raw: "Internal Server Error"})
	_, err = c.ListSandboxes(ctx, sdk.ListSandboxesRequest{})
	if !errors.As(err, &e) || e.Code != "http_500" || e.Message != "Internal Server Error" || e.Details["raw_response_snippet"] != "Internal Server Error" {
		t.Fatalf("plain 500: %#v", err)
	}

	fake.Fail(sdktest.Fault{Method: "POST", Path: "/v1/admin/gc/run", Status: 423, Raw: `{"detail":"GC is already running."}`})
	_, err = c.RunGC(ctx, sdk.GCRequest{})
	if !errors.As(err, &e) || e.Code != "http_423" || e.Message != "GC is already running." {
		t.Fatalf("detail string: %#v", err)
	}

	sb, _ := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{})
	if _, err := c.ExtendTTL(ctx, sb.ID, 10*time.Second); !sdk.IsCode(err, bayapi.CodeSandboxTTLInfinite) {
		t.Fatalf("infinite ttl: %v", err)
	}
	if _, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{Profile: "nope"}); !sdk.IsCode(err, bayapi.CodeValidation) {
		t.Fatalf("bad profile: %v", err)
	}
}

func TestRetriesOnlyWhereSafe(t *testing.T) {
	fake, c := newPair(t, "")
	ctx := ctxT(t)
	id := fake.AddSandbox("python-default", 600)
	sp := "/v1/sandboxes/" + id

	t.Run("GET retried on 503 then succeeds", func(t *testing.T) {
		fake.ResetCalls()
		fake.Fail(sdktest.Fault{Method: "GET", Path: sp, Times: 2, Status: 503, Code: "unavailable"})
		if _, err := c.GetSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
		if n := fake.Count("GET", sp); n != 3 {
			t.Fatalf("attempts %d, want 3", n)
		}
	})
	t.Run("GET gives up after max retries", func(t *testing.T) {
		fake.ResetCalls()
		fake.Fail(sdktest.Fault{Method: "GET", Path: sp, Times: 4, Status: 502, Code: "ship_error"})
		_, err := c.GetSandbox(ctx, id)
		if !sdk.IsCode(err, "ship_error") {
			t.Fatal(err)
		}
		if n := fake.Count("GET", sp); n != 4 {
			t.Fatalf("attempts %d, want 1+3", n)
		}
	})
	t.Run("transport error retried for PUT and DELETE", func(t *testing.T) {
		fake.ResetCalls()
		fp := sp + "/filesystem/files"
		fake.Fail(sdktest.Fault{Method: "PUT", Path: fp, Drop: true})
		fake.Fail(sdktest.Fault{Method: "DELETE", Path: fp, Times: 2, Status: 504, Code: "timeout"})
		if err := c.WriteFile(ctx, id, "a.txt", "x"); err != nil {
			t.Fatal(err)
		}
		if err := c.DeleteFile(ctx, id, "a.txt"); err != nil {
			t.Fatal(err)
		}
		if fake.Count("PUT", fp) != 2 || fake.Count("DELETE", fp) != 3 {
			t.Fatalf("PUT %d DELETE %d", fake.Count("PUT", fp), fake.Count("DELETE", fp))
		}
	})
	t.Run("429 retried", func(t *testing.T) {
		fake.ResetCalls()
		fake.Fail(sdktest.Fault{Method: "GET", Path: "/v1/profiles", Status: 429, Code: "quota_exceeded"})
		if _, err := c.ListProfiles(ctx, false); err != nil || fake.Count("GET", "/v1/profiles") != 2 {
			t.Fatalf("%v %d", err, fake.Count("GET", "/v1/profiles"))
		}
	})
	t.Run("4xx never retried", func(t *testing.T) {
		fake.ResetCalls()
		c.GetSandbox(ctx, "sandbox-missing")
		if n := fake.Count("GET", "/v1/sandboxes/sandbox-missing"); n != 1 {
			t.Fatalf("attempts %d", n)
		}
	})
	for _, tc := range []struct {
		name  string
		fault sdktest.Fault
	}{
		{"502", sdktest.Fault{Status: 502, Code: "ship_error"}},
		{"503 unavailable", sdktest.Fault{Status: 503, Code: "unavailable"}},
		{"504", sdktest.Fault{Status: 504, Code: "timeout"}},
		{"dropped connection", sdktest.Fault{Drop: true}},
	} {
		t.Run("exec POST not retried on "+tc.name, func(t *testing.T) {
			fake.ResetCalls()
			for _, p := range []string{sp + "/python/exec", sp + "/shell/exec", sp + "/keepalive", sp + "/stop"} {
				f := tc.fault
				f.Method, f.Path = "POST", p
				fake.Fail(f)
			}
			if _, err := c.ExecPython(ctx, id, sdk.PythonRequest{Code: "1"}); err == nil {
				t.Fatal("python succeeded")
			}
			if _, err := c.ExecShell(ctx, id, sdk.ShellRequest{Command: "ls"}); err == nil {
				t.Fatal("shell succeeded")
			}
			if err := c.Keepalive(ctx, id); err == nil {
				t.Fatal("keepalive succeeded")
			}
			if err := c.StopSandbox(ctx, id); err == nil {
				t.Fatal("stop succeeded")
			}
			if n := fake.Count("POST", sp+"/*"); n != 4 {
				t.Fatalf("attempts %d, want 4 (one per call)", n)
			}
		})
	}
	t.Run("exec retried on session_not_ready (nothing ran)", func(t *testing.T) {
		fake.ResetCalls()
		fake.Fail(sdktest.Fault{Method: "POST", Path: sp + "/python/exec", Status: 503, Code: "session_not_ready",
			Details: map[string]any{"sandbox_id": id, "retry_after_ms": 1}})
		r, err := c.ExecPython(ctx, id, sdk.PythonRequest{Code: `print("ok")`})
		if err != nil || r.Output != "ok" || fake.Count("POST", sp+"/python/exec") != 2 {
			t.Fatalf("%v %v %d", r, err, fake.Count("POST", sp+"/python/exec"))
		}
	})
	t.Run("create sandbox retried with one generated idempotency key", func(t *testing.T) {
		fake.ResetCalls()
		fake.Fail(sdktest.Fault{Method: "POST", Path: "/v1/sandboxes", Drop: true})
		fake.Fail(sdktest.Fault{Method: "POST", Path: "/v1/sandboxes", Status: 502, Code: "ship_error"})
		sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: 60 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		calls := fake.Calls("POST", "/v1/sandboxes")
		if len(calls) != 3 {
			t.Fatalf("attempts %d", len(calls))
		}
		key := calls[0].Header.Get("Idempotency-Key")
		if key == "" || calls[1].Header.Get("Idempotency-Key") != key || calls[2].Header.Get("Idempotency-Key") != key {
			t.Fatalf("keys differ: %v", calls)
		}
		// a new call gets a new key
		sb2, _ := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: 60 * time.Second})
		calls = fake.Calls("POST", "/v1/sandboxes")
		if calls[3].Header.Get("Idempotency-Key") == key || sb2.ID == sb.ID {
			t.Fatal("key reused across calls")
		}
	})
	t.Run("caller idempotency key replays", func(t *testing.T) {
		a, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: 60 * time.Second}, sdk.WithIdempotencyKey("k-1"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: 60 * time.Second}, sdk.WithIdempotencyKey("k-1"))
		if err != nil || b.ID != a.ID {
			t.Fatalf("replay: %v %v", b, err)
		}
		if _, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: 61 * time.Second}, sdk.WithIdempotencyKey("k-1")); !sdk.IsCode(err, "conflict") {
			t.Fatalf("reuse with another body: %v", err)
		}
		fake.ResetCalls()
		ext := "/v1/sandboxes/" + a.ID + "/extend_ttl"
		fake.Fail(sdktest.Fault{Method: "POST", Path: ext, Status: 503, Code: "unavailable"})
		if _, err := c.ExtendTTL(ctx, a.ID, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		calls := fake.Calls("POST", ext)
		if len(calls) != 2 || calls[0].Header.Get("Idempotency-Key") != calls[1].Header.Get("Idempotency-Key") {
			t.Fatalf("extend_ttl retry: %d", len(calls))
		}
		fake.ResetCalls()
		fake.Fail(sdktest.Fault{Method: "POST", Path: "/v1/cargos", Status: 504, Code: "timeout"})
		if _, err := c.CreateCargo(ctx, 10); err != nil || fake.Count("POST", "/v1/cargos") != 2 {
			t.Fatalf("cargo retry: %v", err)
		}
	})
	t.Run("upload retried only when replayable", func(t *testing.T) {
		fake.ResetCalls()
		up := sp + "/filesystem/upload"
		fake.Fail(sdktest.Fault{Method: "POST", Path: up, Status: 502, Code: "ship_error"})
		if _, err := c.Upload(ctx, id, "r.bin", io.MultiReader(strings.NewReader("data")), 4); !sdk.IsCode(err, "ship_error") {
			t.Fatalf("non-replayable: %v", err)
		}
		if n := fake.Count("POST", up); n != 1 {
			t.Fatalf("non-replayable attempts %d", n)
		}
		fake.Fail(sdktest.Fault{Method: "POST", Path: up, Times: 2, Status: 502, Code: "ship_error"})
		r := strings.NewReader("replayable body")
		res, err := c.Upload(ctx, id, "r.bin", r, r.Size())
		if err != nil || res.Size != 15 {
			t.Fatalf("replayable: %+v %v", res, err)
		}
		if n := fake.Count("POST", up); n != 4 {
			t.Fatalf("replayable attempts %d", n)
		}
		data, _, _, _ := fake.File(id, "r.bin")
		if string(data) != "replayable body" {
			t.Fatalf("stored %q", data)
		}
	})
}

func TestUploadSizeMismatch(t *testing.T) {
	fake, c := newPair(t, "")
	ctx := ctxT(t)
	id := fake.AddSandbox("python-default", 0)
	if _, err := c.Upload(ctx, id, "x", io.MultiReader(strings.NewReader("abc")), 5); err == nil {
		t.Fatal("short body accepted")
	}
	if _, err := c.Upload(ctx, id, "x", io.MultiReader(strings.NewReader("abcdef")), 5); err == nil {
		t.Fatal("long body accepted")
	}
	if _, ok := fakeFile(fake, id, "x"); ok {
		t.Fatal("a failed upload stored a file")
	}
	// unknown size: chunked
	res, err := c.Upload(ctx, id, "chunked.txt", io.MultiReader(strings.NewReader("chunky")), -1)
	if err != nil || res.Size != 6 {
		t.Fatalf("chunked: %+v %v", res, err)
	}
}

func fakeFile(f *sdktest.Server, id, p string) ([]byte, bool) {
	d, _, _, ok := f.File(id, p)
	return d, ok
}

// genReader yields Pattern bytes and counts them.
type genReader struct {
	r        io.Reader
	produced atomic.Int64
}

func (g *genReader) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	g.produced.Add(int64(n))
	return n, err
}

// TestUploadStreams64MiB sends a 64 MiB generated reader and checks, at every chunk the fake
// receives, that the client has not read more than a small window ahead of the server: the
// body is streamed, never buffered.
func TestUploadStreams64MiB(t *testing.T) {
	fake, c := newPair(t, "")
	ctx := ctxT(t)
	id := fake.AddSandbox("python-default", 0)
	const size = 64 << 20
	g := &genReader{r: sdktest.Pattern(size)}
	var maxAhead, received atomic.Int64
	fake.SetUploadProgress(func(n int64) {
		received.Store(n)
		if d := g.produced.Load() - n; d > maxAhead.Load() {
			maxAhead.Store(d)
		}
	})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := c.Upload(ctx, id, "big/blob.bin", g, size)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if res.Size != size || received.Load() != size {
		t.Fatalf("size %d received %d", res.Size, received.Load())
	}
	h := sha256.New()
	io.Copy(h, sdktest.Pattern(size))
	if _, _, sum, _ := fake.File(id, "big/blob.bin"); sum != hex.EncodeToString(h.Sum(nil)) {
		t.Fatal("hash mismatch")
	}
	t.Logf("max bytes read ahead of the server: %d; allocated during upload: %d MiB",
		maxAhead.Load(), (after.TotalAlloc-before.TotalAlloc)>>20)
	// Loopback socket buffers hold a few MiB; buffering the body would show ~64 MiB.
	if maxAhead.Load() > 16<<20 {
		t.Fatalf("client read %d bytes ahead of the server: the body is buffered", maxAhead.Load())
	}
}

type countingWriter struct {
	n int64
	h io.Writer
}

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return w.h.Write(p) }

func TestDownloadStreams64MiB(t *testing.T) {
	fake, c := newPair(t, "")
	ctx := ctxT(t)
	id := fake.AddSandbox("python-default", 0)
	const size = 64 << 20
	fake.PutGeneratedFile(id, "big.bin", size)
	h := sha256.New()
	w := &countingWriter{h: h}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n, err := c.Download(ctx, id, "big.bin", w)
	runtime.ReadMemStats(&after)
	if err != nil || n != size || w.n != size {
		t.Fatalf("%d %v", n, err)
	}
	want := sha256.New()
	io.Copy(want, sdktest.Pattern(size))
	if !bytes.Equal(h.Sum(nil), want.Sum(nil)) {
		t.Fatal("content mismatch")
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated during a 64 MiB download: %d KiB", alloc>>10)
	if alloc > 16<<20 {
		t.Fatalf("download allocated %d bytes: buffered", alloc)
	}
}

// The fake bay the clients' tests use is held to the contract the real bay passes
// (internal/cli's real-bay test runs the same contract against the bay binary).
func TestFakeHoldsTheContract(t *testing.T) {
	fake := sdktest.New()
	defer fake.Close()
	fake.SetToken("contract-token")
	c, err := sdk.New(fake.URL, "contract-token")
	if err != nil {
		t.Fatal(err)
	}
	sdktest.RunContract(t, c)
}
