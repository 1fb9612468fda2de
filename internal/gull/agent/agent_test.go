package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/gull/browser"
)

func TestSplit(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"open https://example.com", []string{"open", "https://example.com"}},
		{"  fill  @e1   'hello world' ", []string{"fill", "@e1", "hello world"}},
		{`fill @e1 "say \"hi\" \$HOME"`, []string{"fill", "@e1", `say "hi" $HOME`}},
		{`fill @e1 "back\slash"`, []string{"fill", "@e1", `back\slash`}},
		{`type #q it\'s`, []string{"type", "#q", "it's"}},
		{`eval 'document.title'`, []string{"eval", "document.title"}},
		{`a''b "" ''`, []string{"ab", "", ""}},
		{"wait --text 'a # b'", []string{"wait", "--text", "a # b"}},
		{"get\ttitle\n", []string{"get", "title"}},
		{"line\\\ncont", []string{"linecont"}},
		{`fill @e1 "日本語"`, []string{"fill", "@e1", "日本語"}},
		{"", nil},
		{"   ", nil},
	}
	for _, c := range cases {
		got, err := Split(c.in)
		if err != nil {
			t.Errorf("Split(%q): %v", c.in, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Split(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, bad := range []string{`fill 'open`, `fill "open`, `trailing \`} {
		if _, err := Split(bad); err == nil {
			t.Errorf("Split(%q) succeeded", bad)
		}
	}
}

func TestParseSnapshotArgs(t *testing.T) {
	o, err := ParseSnapshotArgs([]string{"-i", "-c", "-d", "3", "-s", "#main"})
	if err != nil || !o.Interactive || !o.Compact || o.MaxDepth != 3 || o.Selector != "#main" {
		t.Fatalf("got %+v, %v", o, err)
	}
	o, err = ParseSnapshotArgs([]string{"-ic"})
	if err != nil || !o.Interactive || !o.Compact {
		t.Fatalf("-ic: got %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"-d"}, {"-d", "0"}, {"-d", "x"}, {"-d", "99999999999999999999"}, {"-s"}, {"--json"}, {"-x"}} {
		if _, err := ParseSnapshotArgs(bad); err == nil {
			t.Errorf("ParseSnapshotArgs(%q) succeeded", bad)
		}
	}
}

func TestGlobToRegexp(t *testing.T) {
	cases := []struct {
		pat, url string
		want     bool
	}{
		{"**/done.html", "http://127.0.0.1:8080/a/done.html", true},
		{"**/done.html", "http://127.0.0.1:8080/done.html?x=1", false},
		{"**/done.html*", "http://127.0.0.1:8080/done.html?x=1", true},
		{"http://h/*/x", "http://h/a/x", true},
		{"http://h/*/x", "http://h/a/b/x", false},
		{"done", "http://h/done.html", true},
		{"a.b", "http://h/axb", false},
	}
	for _, c := range cases {
		if got := GlobToRegexp(c.pat).MatchString(c.url); got != c.want {
			t.Errorf("%q vs %q = %v, want %v", c.pat, c.url, got, c.want)
		}
	}
}

func TestFormatValue(t *testing.T) {
	for in, want := range map[string]string{`"abc"`: "abc", `3`: "3", `{"a":1}`: `{"a":1}`, `undefined`: "undefined", `null`: "null", `[1,"x"]`: `[1,"x"]`} {
		if got := FormatValue([]byte(in)); got != want {
			t.Errorf("FormatValue(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestTimedOut(t *testing.T) {
	for d, want := range map[time.Duration]string{30 * time.Second: "Command timed out after 30s", 59900 * time.Millisecond: "Command timed out after 60s", 200 * time.Millisecond: "Command timed out after 1s"} {
		r := TimedOut(d)
		if r.Stderr != want || r.ExitCode != -1 || r.Stdout != "" {
			t.Errorf("TimedOut(%v) = %+v, want %q", d, r, want)
		}
	}
}

// noBrowser fails the test when a command that must not reach the browser
// asks for it, and reports a start failure otherwise.
type noBrowser struct {
	t      *testing.T
	allow  bool
	closed bool
}

func (n *noBrowser) Get(ctx context.Context) (*browser.Browser, error) {
	if !n.allow {
		n.t.Error("the command asked for the browser")
	}
	return nil, errors.New("chromium not found at /nowhere")
}

func (n *noBrowser) CloseBrowser(ctx context.Context) bool { n.closed = true; return true }

func newTestRunner(t *testing.T, nb *noBrowser) *Runner {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return NewRunner(Runner{Browsers: nb, Workspace: root, WorkspaceDir: dir, Session: "sb-1", Version: "9.9"})
}

func TestDispatchWithoutBrowser(t *testing.T) {
	nb := &noBrowser{t: t}
	r := newTestRunner(t, nb)
	ctx := context.Background()
	cases := []struct {
		cmd        string
		code       int
		out, errIn string
	}{
		{"--version", 0, "agent-browser", ""},
		{"agent-browser --version", 0, "gull 9.9", ""},
		{"session list", 0, "sb-1\n", ""},
		{"session", 0, "sb-1\n", ""},
		{"close", 0, "Browser closed", ""},
		{"frobnicate now", 1, "", `unsupported command "frobnicate"`},
		{"--session other open x", 1, "", "--session is not accepted"},
		{"open x --profile /tmp/p", 1, "", "--profile is not accepted"},
		{"open --session=x", 1, "", "--session is not accepted"},
		{"fill 'unterminated", 1, "", "cannot parse"},
		{"agent-browser", 1, "", "empty command"},
	}
	for _, c := range cases {
		res := r.Exec(ctx, c.cmd, 5*time.Second)
		if res.ExitCode != c.code || !strings.Contains(res.Stdout, c.out) || !strings.Contains(res.Stderr, c.errIn) {
			t.Errorf("%q = %+v; want exit %d, stdout with %q, stderr with %q", c.cmd, res, c.code, c.out, c.errIn)
		}
	}
	if !nb.closed {
		t.Error("close did not close the browser")
	}
	// A browser command when Chromium cannot start: exit 1 with the reason.
	nb.allow = true
	res := r.Exec(ctx, "get title", 5*time.Second)
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "browser not available") || !strings.Contains(res.Stderr, "chromium not found") {
		t.Errorf("get title without chromium = %+v", res)
	}
}

func TestExecTimesOutWaitingForTheRunner(t *testing.T) {
	r := newTestRunner(t, &noBrowser{t: t})
	r.sem <- struct{}{} // another command holds the browser
	t0 := time.Now()
	res := r.Exec(context.Background(), "--version", 1500*time.Millisecond)
	if res.ExitCode != -1 || res.Stderr != "Command timed out after 2s" {
		t.Errorf("got %+v", res)
	}
	if d := time.Since(t0); d < 1400*time.Millisecond || d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestOutputPathConfined(t *testing.T) {
	r := newTestRunner(t, &noBrowser{t: t})
	good := map[string]string{
		"a.png":                                  "a.png",
		"shots/../b.png":                         "b.png",
		filepath.Join(r.WorkspaceDir, "c.png"):   "c.png",
		filepath.Join(r.WorkspaceDir, "d/e.png"): "d/e.png",
	}
	for in, want := range good {
		if got, err := r.outputPath(in); err != nil || got != want {
			t.Errorf("outputPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", ".", "..", "../x.png", "a/../../x.png", "/etc/passwd", r.WorkspaceDir, r.WorkspaceDir + "/../x"} {
		if got, err := r.outputPath(bad); err == nil {
			t.Errorf("outputPath(%q) = %q, want an error", bad, got)
		}
	}
	// A symlink out of the workspace is refused by the root.
	if err := os.Symlink("/tmp", filepath.Join(r.WorkspaceDir, "out")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.writeFile("out/x.png", []byte("x")); err == nil {
		t.Error("wrote through a symlink out of the workspace")
	}
	abs, err := r.writeFile("sub/dir/y.png", []byte("y"))
	if err != nil || abs != filepath.Join(r.WorkspaceDir, "sub/dir/y.png") {
		t.Fatalf("writeFile = %q, %v", abs, err)
	}
}

func TestTruncate(t *testing.T) {
	if Truncate("short", 10) != "short" {
		t.Error("short string changed")
	}
	got := Truncate("ab日本", 4) // 日 is 3 bytes: the cut moves back to 2
	if !strings.HasPrefix(got, "ab\n...[output truncated: 2 of 8 bytes shown]") {
		t.Errorf("Truncate = %q", got)
	}
}
