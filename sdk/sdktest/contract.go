package sdktest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

// RunContract checks, through the SDK, the behaviour of bay that the clients' tests rely on
// when they run against this fake: status codes and error codes, the shapes of sandboxes,
// executions, files and history, idempotent replays. The SDK's tests run it against the fake;
// the clients' real-bay tests run it against the real bay binary, so that the fake cannot
// drift from bay unnoticed. Code is kept to what both answer alike (the fake runs no code:
// print of a string literal, echo, raise).
func RunContract(t *testing.T, c *sdk.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	wantCode := func(what string, err error, code string) {
		t.Helper()
		if !sdk.IsCode(err, code) {
			t.Errorf("%s: %v, want %s", what, err, code)
		}
	}

	if h, err := c.Health(ctx); err != nil || h.Status == "" {
		t.Fatalf("health: %+v, %v", h, err)
	}
	_, err := c.GetSandbox(ctx, "sandbox-000000000000")
	wantCode("get of a missing sandbox", err, bayapi.CodeNotFound)

	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: 600 * time.Second}, sdk.WithIdempotencyKey("contract-"+randomKey()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.WithoutCancel(ctx), sb.ID) })
	if !strings.HasPrefix(sb.ID, "sandbox-") || sb.Status != bayapi.StatusIdle || sb.Profile != bayapi.DefaultProfile ||
		sb.ExpiresAt.IsZero() || !slices.Contains(sb.Capabilities, "python") {
		t.Errorf("created sandbox %+v", sb)
	}
	key := "contract-" + randomKey()
	first, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: 600 * time.Second}, sdk.WithIdempotencyKey(key))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(context.WithoutCancel(ctx), first.ID) })
	if again, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: 600 * time.Second}, sdk.WithIdempotencyKey(key)); err != nil || again.ID != first.ID {
		t.Errorf("idempotent replay: %v, %v; want sandbox %s again", again, err, first.ID)
	}
	_, err = c.CreateSandbox(ctx, sdk.CreateSandboxRequest{Profile: "no-such-profile"})
	wantCode("create with an unknown profile", err, bayapi.CodeValidation)

	py, err := sb.Python(ctx, `print("42")`)
	if err != nil || !py.Success || py.Output != "42" || py.ExecutionID == "" || py.Data.Images == nil {
		t.Fatalf("python: %+v, %v", py, err)
	}
	py, err = sb.Python(ctx, `raise ValueError("boom")`)
	if err != nil || py.Success || !strings.Contains(py.Error, "ValueError") {
		t.Errorf("python raising: %+v, %v", py, err)
	}
	sh, err := sb.Shell(ctx, "echo hi; exit 3")
	if err != nil || sh.Success || sh.ExitCode != 3 || sh.Output != "hi" {
		t.Errorf("shell: %+v, %v", sh, err)
	}
	// A profile without the browser capability refuses browser calls before running anything.
	_, err = sb.Browser(ctx, "get title")
	wantBrowserRefused(t, "browser exec", err)
	_, err = sb.BrowserBatch(ctx, sdk.BrowserBatchRequest{Commands: []string{"get title"}})
	wantBrowserRefused(t, "browser batch", err)
	if err := sb.Refresh(ctx); err != nil || sb.Status != bayapi.StatusReady {
		t.Errorf("after a call: refresh %v, status %s; want ready", err, sb.Status)
	}

	if err := sb.WriteFile(ctx, "dir/a.txt", "hello"); err != nil {
		t.Fatal(err)
	}
	if s, err := sb.ReadFile(ctx, "dir/a.txt"); err != nil || s != "hello" {
		t.Errorf("read back: %q, %v", s, err)
	}
	files, err := sb.ListFiles(ctx, "dir")
	if err != nil || !slices.ContainsFunc(files, func(f sdk.FileInfo) bool { return f.Name == "a.txt" && f.IsFile }) {
		t.Errorf("list: %+v, %v", files, err)
	}
	_, err = sb.ReadFile(ctx, "dir/missing.txt")
	wantCode("read of a missing file", err, bayapi.CodeFileNotFound)
	_, err = sb.ReadFile(ctx, "../etc/passwd")
	wantCode("read above the workspace", err, bayapi.CodeInvalidPath)
	_, err = sb.ReadFile(ctx, "/etc/passwd")
	wantCode("read of an absolute path", err, bayapi.CodeInvalidPath)
	if err := sb.DeleteFile(ctx, "dir/a.txt"); err != nil {
		t.Errorf("delete: %v", err)
	}
	wantCode("delete of a deleted file", sb.DeleteFile(ctx, "dir/a.txt"), bayapi.CodeFileNotFound)

	data := bytes.Repeat([]byte("shipyard"), 64<<10)
	if up, err := sb.Upload(ctx, "up/blob.bin", bytes.NewReader(data), int64(len(data))); err != nil || up.Size != int64(len(data)) {
		t.Fatalf("upload: %+v, %v", up, err)
	}
	var buf bytes.Buffer
	if n, err := sb.Download(ctx, "up/blob.bin", &buf); err != nil || n != int64(len(data)) || !bytes.Equal(buf.Bytes(), data) {
		t.Errorf("download: %d bytes, %v", n, err)
	}

	h, err := sb.History(ctx, sdk.HistoryRequest{ExecType: bayapi.ExecPython})
	if err != nil || h.Total < 2 || len(h.Entries) < 2 || h.Entries[0].ExecType != bayapi.ExecPython {
		t.Errorf("history: %+v, %v", h, err)
	}

	if err := sb.ExtendTTL(ctx, 60*time.Second); err != nil {
		t.Errorf("extend ttl: %v", err)
	}
	inf, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ExtendTTL(ctx, inf.ID, 60*time.Second)
	wantCode("extend of an infinite TTL", err, bayapi.CodeSandboxTTLInfinite)
	if err := c.DeleteSandbox(ctx, inf.ID); err != nil {
		t.Errorf("delete: %v", err)
	}
	_, err = c.GetSandbox(ctx, inf.ID)
	wantCode("get of a deleted sandbox", err, bayapi.CodeNotFound)
}

// wantBrowserRefused checks the answer to a browser call on a profile without the browser
// capability: 400 capability_not_supported with a message.
func wantBrowserRefused(t *testing.T, what string, err error) {
	t.Helper()
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) || apiErr.Code != bayapi.CodeCapabilityNotSupported || apiErr.Status != 400 ||
		!strings.Contains(apiErr.Message, bayapi.CapBrowser) {
		t.Errorf("%s on a profile without browser: %v, want 400 capability_not_supported naming browser", what, err)
	}
}

// randomKey is unique enough for idempotency keys of one run.
func randomKey() string {
	return strings.ReplaceAll(time.Now().UTC().Format("150405.000000000"), ".", "")
}
