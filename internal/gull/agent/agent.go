package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shipyard-dev/shipyard/internal/gull/browser"
)

// Result is the outcome of one command line.
type Result struct {
	Stdout   string
	Stderr   string
	ExitCode int
}

// DefaultMaxOutput is the default bound of a command's stdout.
const DefaultMaxOutput = 1 << 20

// Truncate cuts s to at most max bytes (on a UTF-8 boundary) and says so at
// the end.
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n...[output truncated: %d of %d bytes shown]\n", cut, len(s))
}

// releaseTimeout bounds the release of a command's page objects.
const releaseTimeout = 2 * time.Second

// ExitTimeout is the exit code of a command that ran out of time.
const ExitTimeout = -1

// TimedOut is the Result of a command that ran out of its timeout.
func TimedOut(timeout time.Duration) Result {
	return Result{Stderr: fmt.Sprintf("Command timed out after %ds", int(math.Ceil(timeout.Seconds()))), ExitCode: ExitTimeout}
}

// Browsers is what the runner needs from the browser manager.
type Browsers interface {
	Get(ctx context.Context) (*browser.Browser, error)
	CloseBrowser(ctx context.Context) bool
}

// Runner runs command lines one at a time.
type Runner struct {
	Browsers Browsers
	// Workspace is the workspace root; screenshots and PDFs are written
	// inside it only. WorkspaceDir is its path (for messages and absolute
	// paths the caller gives).
	Workspace    *os.Root
	WorkspaceDir string
	// Session is the sandbox's session name (`session list`).
	Session string
	// Version is gull's version (`--version`).
	Version string
	// MaxOutput bounds stdout (a snapshot, get html or eval of a huge page);
	// default DefaultMaxOutput.
	MaxOutput int
	Log       *slog.Logger

	sem chan struct{}
}

// NewRunner returns a runner; see the fields of Runner.
func NewRunner(r Runner) *Runner {
	r.sem = make(chan struct{}, 1)
	if r.MaxOutput <= 0 {
		r.MaxOutput = DefaultMaxOutput
	}
	if r.Log == nil {
		r.Log = slog.Default()
	}
	return &r
}

// Exec runs one command line within timeout. It never returns an error: a
// failure is exit code 1 with the message on stderr, a timeout exit code -1.
func (r *Runner) Exec(ctx context.Context, line string, timeout time.Duration) Result {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return TimedOut(timeout)
	}
	defer func() { <-r.sem }()
	out, err := r.run(ctx, line)
	out = Truncate(out, r.MaxOutput)
	if err == nil {
		return Result{Stdout: out}
	}
	if ctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return TimedOut(timeout)
	}
	var ue *browser.UserError
	if errors.As(err, &ue) {
		return Result{Stdout: out, Stderr: ue.Msg + "\n", ExitCode: 1}
	}
	r.Log.Warn("browser command failed", "cmd", line, "err", err)
	return Result{Stdout: out, Stderr: "Error: " + err.Error() + "\n", ExitCode: 1}
}

func (r *Runner) run(ctx context.Context, line string) (string, error) {
	words, err := Split(line)
	if err != nil {
		return "", usage("cannot parse the command: %v", err)
	}
	words, err = stripAgentBrowser(words)
	if err != nil {
		return "", err
	}
	if len(words) == 0 {
		return "", usage("empty command (try: open <url>, snapshot -i, click @e1; see the browser-automation skill)")
	}
	name, args := words[0], words[1:]
	c, ok := commands[name]
	if !ok {
		return "", usage("unsupported command %q: gull implements %s", name, commandList())
	}
	if c.noBrowser != nil {
		return c.noBrowser(ctx, r, args)
	}
	b, err := r.Browsers.Get(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("browser not available: %w", err)
	}
	defer func() {
		// Within the command's time: the browser does not answer while the
		// page is stuck in a script. A group left behind is freed by a
		// later release on the same page or by its next navigation.
		rctx, cancel := context.WithTimeout(ctx, releaseTimeout)
		defer cancel()
		b.Release(rctx)
	}()
	if err := b.SyncTabs(ctx); err != nil {
		return "", err
	}
	return c.run(ctx, r, b, args)
}

// stripAgentBrowser drops a leading "agent-browser" and refuses the global
// flags gull manages itself.
func stripAgentBrowser(words []string) ([]string, error) {
	if len(words) > 0 && words[0] == "agent-browser" {
		words = words[1:]
	}
	for _, w := range words {
		flag, _, _ := strings.Cut(w, "=")
		switch flag {
		case "--session", "--profile", "--cdp", "--executable-path", "--state", "--headed", "--extension", "--provider", "--args", "--user-agent", "--proxy":
			return nil, usage("%s is not accepted: gull manages the browser, its session and its profile", flag)
		}
	}
	return words, nil
}

func usage(format string, args ...any) error {
	return &browser.UserError{Msg: fmt.Sprintf(format, args...)}
}

// outputPath maps a path the caller gave (relative to the workspace, or
// absolute inside it) to a path relative to the workspace root.
func (r *Runner) outputPath(p string) (string, error) {
	if p == "" {
		return "", usage("empty path")
	}
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(r.WorkspaceDir, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return "", usage("path %s is outside the workspace %s", p, r.WorkspaceDir)
		}
		p = rel
	}
	p = path.Clean(filepath.ToSlash(p))
	if p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return "", usage("path %s is outside the workspace", p)
	}
	return p, nil
}

// writeFile writes data to a path inside the workspace (creating its
// directories) and returns the absolute path.
func (r *Runner) writeFile(p string, data []byte) (string, error) {
	rel, err := r.outputPath(p)
	if err != nil {
		return "", err
	}
	if dir := path.Dir(rel); dir != "." {
		if err := r.Workspace.MkdirAll(dir, 0o755); err != nil {
			return "", usage("cannot create %s: %v", dir, unwrapPath(err))
		}
	}
	f, err := r.Workspace.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", usage("cannot write %s: %v", rel, unwrapPath(err))
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", fmt.Errorf("write %s: %w", rel, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", rel, err)
	}
	return path.Join(filepath.ToSlash(r.WorkspaceDir), rel), nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
