package sdk

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// Timeouts of a browser batch, in seconds: the budget of the whole batch.
const (
	DefaultBrowserBatchTimeout = 60
	MaxBrowserBatchTimeout     = 600
)

// BrowserRequest is the body of POST .../browser/exec.
type BrowserRequest struct {
	// Cmd is one browser command line without the "agent-browser" prefix, e.g.
	// "open https://example.com" or "screenshot shot.png". Bay splits it into words like a
	// POSIX shell but runs no shell.
	Cmd string
	// Timeout of the command, 1 s..300 s (whole seconds, rounded up); 0 = bay's default (30 s).
	Timeout time.Duration
	// Description and Tags (comma-separated) are stored in the execution history.
	Description string
	Tags        string
	// Learn marks the execution as evidence for skill learning; IncludeTrace asks for a
	// trace_ref (GET with BrowserTrace); both keep the trace in bay.
	Learn        bool
	IncludeTrace bool
}

// BrowserBatchRequest is the body of POST .../browser/exec_batch.
type BrowserBatchRequest struct {
	// Commands run in order, each like BrowserRequest.Cmd; at least one.
	Commands []string
	// Timeout is the budget of the whole batch, 1 s..600 s (whole seconds, rounded up); 0 =
	// bay's default (60 s).
	Timeout time.Duration
	// ContinueOnError runs the remaining commands after a failing one (bay's default is to
	// stop at the first failure).
	ContinueOnError bool
	Description     string
	Tags            string
	Learn           bool
	IncludeTrace    bool
}

// ExecBrowser runs one browser command in the sandbox's browser (POST .../browser/exec). A
// command that fails is a successful call with Success false, ExitCode set and the
// command's stderr in Error. Errors: capability_not_supported (the profile has no browser),
// validation_error. A browser command changes the page, so the call is not retried (except
// on session_not_ready, when nothing ran) unless the caller passes WithIdempotencyKey, which
// declares a repeat harmless: bay does not deduplicate browser calls, so pass one only for
// commands that may run twice (reads such as "get title").
func (c *Client) ExecBrowser(ctx context.Context, id string, req BrowserRequest, opts ...CallOption) (*BrowserResult, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	o := applyCallOptions(opts)
	body := bayapi.BrowserExecRequest{Cmd: &req.Cmd, Timeout: optSeconds(req.Timeout), Description: optStr(req.Description),
		Tags: optStr(req.Tags), Learn: req.Learn, IncludeTrace: req.IncludeTrace}
	var out BrowserResult
	if err := c.doJSON(ctx, &request{method: http.MethodPost, path: sbPath(bayapi.PathBrowserExec, id), jsonBody: body,
		idemKey: o.idemKey, requestID: o.requestID, timeout: c.execTimeout(req.Timeout, bayapi.DefaultExecTimeout)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExecBrowserBatch runs browser commands in order within one request (POST
// .../browser/exec_batch); Results holds one entry per command that ran. Retries as for
// ExecBrowser.
func (c *Client) ExecBrowserBatch(ctx context.Context, id string, req BrowserBatchRequest, opts ...CallOption) (*BrowserBatchResult, error) {
	if err := checkID("sandbox", id); err != nil {
		return nil, err
	}
	o := applyCallOptions(opts)
	body := bayapi.BrowserBatchRequest{Commands: req.Commands, Timeout: optSeconds(req.Timeout), Description: optStr(req.Description),
		Tags: optStr(req.Tags), Learn: req.Learn, IncludeTrace: req.IncludeTrace}
	if req.ContinueOnError {
		f := false
		body.StopOnError = &f
	}
	var out BrowserBatchResult
	if err := c.doJSON(ctx, &request{method: http.MethodPost, path: sbPath(bayapi.PathBrowserBatch, id), jsonBody: body,
		idemKey: o.idemKey, requestID: o.requestID, timeout: c.execTimeout(req.Timeout, DefaultBrowserBatchTimeout)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// BrowserCommandError is a browser command that ran and failed (non-zero exit code).
type BrowserCommandError struct {
	Cmd      string
	ExitCode int
	Stderr   string
}

func (e *BrowserCommandError) Error() string {
	msg := fmt.Sprintf("sdk: browser command %q exited with %d", e.Cmd, e.ExitCode)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += ": " + s
	}
	return msg
}

// ScreenshotPath checks a workspace path for a screenshot ("shot.png", "shots/a.png", or the
// same under "/workspace/") and returns it relative to the workspace.
func ScreenshotPath(p string) (string, error) {
	if strings.ContainsAny(p, "\x00\n\r") {
		return "", fmt.Errorf("sdk: screenshot path %q: control characters", p)
	}
	if strings.HasPrefix(p, "/workspace/") {
		p = strings.TrimPrefix(p, "/workspace/")
	}
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("sdk: screenshot path %q: must be inside /workspace", p)
	}
	clean := path.Clean(p)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || strings.HasSuffix(p, "/") {
		return "", fmt.Errorf("sdk: screenshot path %q: must name a file inside /workspace", p)
	}
	return clean, nil
}

// BrowserCommand joins words into one browser command line, quoting each word that needs it
// with POSIX rules (bay splits the line back into the same words), e.g.
// BrowserCommand("fill", "@e1", "a b") = "fill @e1 'a b'".
func BrowserCommand(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = quoteWord(w)
	}
	return strings.Join(q, " ")
}

// quoteWord quotes s as one POSIX shell word when it needs it.
func quoteWord(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./+,:@%=", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Screenshot makes the sandbox's browser write a PNG of the current page to the workspace file
// remotePath (relative to /workspace; "screenshot <path>" with full adding --full) and streams
// that file into w. It returns the command's answer and the number of bytes written. A command
// that fails is a *BrowserCommandError (nothing is downloaded). The file stays in the
// workspace.
func (c *Client) Screenshot(ctx context.Context, id, remotePath string, full bool, w io.Writer) (*BrowserResult, int64, error) {
	rel, err := ScreenshotPath(remotePath)
	if err != nil {
		return nil, 0, err
	}
	cmd := BrowserCommand("screenshot", rel)
	if full {
		cmd += " --full"
	}
	res, err := c.ExecBrowser(ctx, id, BrowserRequest{Cmd: cmd})
	if err != nil {
		return nil, 0, err
	}
	if res.ExitCode != 0 {
		return res, 0, &BrowserCommandError{Cmd: cmd, ExitCode: res.ExitCode, Stderr: res.Error}
	}
	n, err := c.Download(ctx, id, rel, w)
	return res, n, err
}
