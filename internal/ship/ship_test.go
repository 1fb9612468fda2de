package ship_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship"
	"github.com/shipyard-dev/shipyard/internal/ship/privsep"
	"github.com/shipyard-dev/shipyard/internal/ship/shiptest"
)

// daemon is a whole ship running in-process on 127.0.0.1:0 with a real kernel.
type daemon struct {
	url       string // with the runtime token as user info
	addr      string // host:port, for requests without it
	workspace string
	skills    string
}

var shared *daemon

const testMaxUpload = 1 << 20

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	// The suite needs one daemon for all tests; its kernel must be real.
	py := os.Getenv("SHIP_TEST_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	tmp, err := os.MkdirTemp("", "ship-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	ws := filepath.Join(tmp, "workspace")
	sk := filepath.Join(tmp, "skills")
	must(os.MkdirAll(filepath.Join(sk, "python-sandbox"), 0o755))
	must(os.WriteFile(filepath.Join(sk, "python-sandbox", "SKILL.md"),
		[]byte("---\nname: python-sandbox\ndescription: Run Python in the sandbox\n---\n# body\n"), 0o644))
	must(os.MkdirAll(filepath.Join(sk, "python-sandbox", "examples"), 0o755))
	must(os.WriteFile(filepath.Join(sk, "python-sandbox", "examples", "a.py"), []byte("print(1)\n"), 0o644))
	// A stale copy of the built-in skill and a user's own skill.
	must(os.MkdirAll(filepath.Join(ws, "skills", "python-sandbox"), 0o755))
	must(os.WriteFile(filepath.Join(ws, "skills", "python-sandbox", "stale.txt"), []byte("old"), 0o644))
	must(os.MkdirAll(filepath.Join(ws, "skills", "custom"), 0o755))
	must(os.WriteFile(filepath.Join(ws, "skills", "custom", "SKILL.md"), []byte("mine"), 0o644))

	// As bay starts it: with a runtime token in the environment. The tests' URL carries it as
	// user info (Go's client sends it as Basic credentials), as bay's does.
	os.Setenv(shipapi.EnvAuthToken, testToken)
	cfg := ship.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Workspace = ws
	cfg.SkillsDir = sk
	cfg.Python = py
	cfg.MaxUploadBytes = testMaxUpload
	cfg.MaxStdoutBytes = 64 << 10
	cfg.MaxStderrBytes = 64 << 10
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	os.Setenv("SHIP_TEST_PROFILE_VAR", "from-container-env")
	// Like the image's /opt/shipyard/matplotlibrc: Agg for scripts, plus
	// settings the kernel must keep while it shows figures inline.
	rc := filepath.Join(tmp, "matplotlibrc")
	must(os.WriteFile(rc, []byte(testMatplotlibRC), 0o644))
	os.Setenv("MATPLOTLIBRC", rc)
	// As in the image: HOME is the workspace, matplotlib's config and font
	// cache live outside it (/opt/shipyard/mplconfig there).
	os.Setenv("HOME", ws)
	os.Setenv("MPLCONFIGDIR", filepath.Join(tmp, "mplconfig"))
	if os.Geteuid() == 0 {
		// As in a sandbox: user code runs as uid 1000 and the file API acts as it. (Ship itself
		// stays root here: only the binary drops its own privileges, see cmd/ship.)
		cfg.Sandbox = privsep.Sandbox(1000, 1000)
		must(os.Chmod(tmp, 0o755))
		must(os.MkdirAll(filepath.Join(tmp, "mplconfig"), 0o755))
		for _, p := range []string{ws, filepath.Join(tmp, "mplconfig")} {
			must(filepath.WalkDir(p, func(p string, _ fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				return os.Lchown(p, 1000, 1000)
			}))
		}
	}
	md := ship.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- md.Run(ctx) }()
	select {
	case <-md.Ready():
	case err := <-done:
		fmt.Fprintln(os.Stderr, "ship did not start:", err)
		return 1
	}
	shared = &daemon{url: "http://bay:" + testToken + "@" + md.Addr(), addr: md.Addr(), workspace: ws, skills: sk}
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "ship shutdown:", err)
		return 1
	}
	return code
}

// testToken is the shared daemon's runtime token.
const testToken = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"

// testMatplotlibRC stands in for image/files/matplotlibrc (MATPLOTLIBRC).
const testMatplotlibRC = `backend: Agg
axes.unicode_minus: False
savefig.dpi: 50
figure.figsize: 2, 1.5
`

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func newDaemon(t *testing.T) *daemon {
	t.Helper()
	return shared
}

// call POSTs body (any JSON value, or a raw string) and decodes the answer.
func (d *daemon) call(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rdr io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rdr = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rdr = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, d.url+path, rdr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: status %d, body not a JSON object: %q", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

func (d *daemon) post(t *testing.T, path string, body any) (int, map[string]any) {
	t.Helper()
	return d.call(t, http.MethodPost, path, body)
}

// expect asserts an error answer's status and code.
func expect(t *testing.T, status int, body map[string]any, wantStatus int, wantCode string) {
	t.Helper()
	if status != wantStatus || body["code"] != wantCode || body["detail"] == "" {
		t.Fatalf("got %d %v, want %d code %q with a detail", status, body, wantStatus, wantCode)
	}
}

// poll retries cond until it holds or the deadline passes.
func poll(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPythonRequiresIPyKernel(t *testing.T) {
	// Fails (never skips) with a clear message when the CI setup lacks ipykernel.
	shiptest.Python(t)
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// With a runtime token, every endpoint but /health needs it (Bearer or Basic password), and
// nothing started in the sandbox inherits it.
func TestRuntimeToken(t *testing.T) {
	d := newDaemon(t)
	get := func(path string, auth func(*http.Request)) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.addr+path, nil)
		if auth != nil {
			auth(req)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get(shipapi.PathHealth, nil); c != http.StatusOK {
		t.Errorf("/health without a token: %d, want 200 (bay's readiness probe)", c)
	}
	for _, p := range []string{shipapi.PathMeta, shipapi.PathStat, shipapi.PathShellProcs, shipapi.PathKernelStatus} {
		if c := get(p, nil); c != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", p, c)
		}
		if c := get(p, func(r *http.Request) { r.Header.Set("Authorization", "Bearer wrong") }); c != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d, want 401", p, c)
		}
		if c := get(p, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+testToken) }); c != http.StatusOK {
			t.Errorf("%s with the Bearer token: %d, want 200", p, c)
		}
		if c := get(p, func(r *http.Request) { r.SetBasicAuth("anyone", testToken) }); c != http.StatusOK {
			t.Errorf("%s with the token as Basic password: %d, want 200", p, c)
		}
	}
	code, body := d.call(t, http.MethodPost, shipapi.PathShellExec, map[string]any{"command": "env | grep -c " + shipapi.EnvAuthToken + " || true"})
	if code != http.StatusOK || strings.TrimSpace(fmt.Sprint(body["stdout"])) != "0" {
		t.Errorf("a shell command sees the runtime token: %d %v", code, body)
	}
	code, body = d.call(t, http.MethodPost, shipapi.PathPythonExec, map[string]any{"code": "import os; print(os.environ.get('" + shipapi.EnvAuthToken + "'))"})
	if out, _ := body["output"].(map[string]any); code != http.StatusOK || strings.TrimSpace(fmt.Sprint(out["text"])) != "None" {
		t.Errorf("the kernel sees the runtime token: %d %v", code, body)
	}
}
