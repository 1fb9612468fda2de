package shipclient_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient"
	"github.com/shipyard-dev/shipyard/internal/ship/shiptest"
)

var shipBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shipclient-test")
	if err != nil {
		panic(err)
	}
	shipBinary = filepath.Join(dir, "ship")
	out, err := exec.Command("go", "build", "-o", shipBinary, "github.com/shipyard-dev/shipyard/cmd/ship").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build ship: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startShip runs the real ship binary on a free loopback port and returns its endpoint and
// workspace.
func startShip(t *testing.T) (string, string) { return startShipToken(t, "") }

// startShipToken is startShip with ship requiring the runtime token ("" = none).
func startShipToken(t *testing.T, token string) (string, string) {
	t.Helper()
	py := shiptest.Python(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ws := t.TempDir()
	cmd := exec.Command(shipBinary, "--listen", addr, "--workspace", ws, "--python", py, "--skills-dir", t.TempDir(), "--log-level", "warn")
	if token != "" {
		cmd.Env = append(os.Environ(), shipapi.EnvAuthToken+"="+token)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	endpoint := "http://" + addr
	c := shipclient.New(nil, nil)
	deadline := time.Now().Add(30 * time.Second)
	for c.Health(context.Background(), endpoint) != nil {
		if time.Now().After(deadline) {
			t.Fatal("ship did not become healthy")
		}
		time.Sleep(20 * time.Millisecond) // polling a real process, not timing logic
	}
	return endpoint, ws
}

// code is the error's code, "" for nil (bay.ErrorCode(nil) is internal_error).
func code(err error) string {
	if err == nil {
		return ""
	}
	return bay.ErrorCode(err)
}

func TestAgainstRealShip(t *testing.T) {
	ep, ws := startShip(t)
	ctx := context.Background()
	c := shipclient.New(nil, nil)

	m, err := c.Meta(ctx, ep)
	if err != nil || m.Runtime.Name != "ship" || m.Capabilities["python"].Endpoints == nil {
		t.Fatalf("meta: %+v %v", m, err)
	}
	py, err := c.ExecPython(ctx, ep, shipapi.ExecPythonRequest{Code: "x = 41\nprint(x + 1)", Timeout: 30})
	if err != nil || !py.Success || strings.TrimSpace(py.Output.Text) != "42" {
		t.Fatalf("python: %+v %v", py, err)
	}
	to := 10
	sh, err := c.ExecShell(ctx, ep, shipapi.ExecShellRequest{Command: "echo hi; echo err >&2", Timeout: &to})
	if err != nil || strings.TrimSpace(sh.Stdout) != "hi" || sh.ReturnCode != 0 {
		t.Fatalf("shell: %+v %v", sh, err)
	}
	if _, err := c.WriteFile(ctx, ep, "d/a.txt", "hello"); err != nil {
		t.Fatal(err)
	}
	rf, err := c.ReadFile(ctx, ep, "d/a.txt")
	if err != nil || rf.Content != "hello" {
		t.Fatalf("read: %+v %v", rf, err)
	}
	ls, err := c.ListDir(ctx, ep, "d", false)
	if err != nil || len(ls.Files) != 1 || ls.Files[0].Name != "a.txt" {
		t.Fatalf("list: %+v %v", ls, err)
	}
	if _, err := c.ReadFile(ctx, ep, "nope.txt"); code(err) != bay.CodeFileNotFound {
		t.Fatalf("missing read: %v", err)
	}
	if err := c.DeleteFile(ctx, ep, "nope.txt"); code(err) != bay.CodeFileNotFound {
		t.Fatalf("missing delete: %v", err)
	}
	if _, _, err := c.Download(ctx, ep, "nope.txt"); code(err) != bay.CodeFileNotFound {
		t.Fatalf("missing download: %v", err)
	}
	// A symlink escaping the workspace: ship refuses (403) -> invalid_path.
	if err := os.Symlink("/etc", filepath.Join(ws, "esc")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadFile(ctx, ep, "esc/hostname"); code(err) != bay.CodeInvalidPath {
		t.Fatalf("escape: %v", err)
	}
	// The client's mistakes are 4xx with ship's detail, never ship_error: a directory where a
	// file is expected (the workspace root included), a path longer than the system allows, a
	// body that ends early.
	_, err = c.ReadFile(ctx, ep, "d")
	var be *bay.Error
	if !errors.As(err, &be) || be.Code != bayapi.CodeIsADirectory || !strings.Contains(be.Message, "directory") || be.Details["ship_code"] == nil {
		t.Fatalf("directory read: %v", err)
	}
	for name, call := range map[string]func() error{
		"read root":    func() error { _, err := c.ReadFile(ctx, ep, "."); return err },
		"download dir": func() error { _, _, err := c.Download(ctx, ep, "d"); return err },
		"write dir":    func() error { _, err := c.WriteFile(ctx, ep, "d", "x"); return err },
		"upload dir":   func() error { _, err := c.Upload(ctx, ep, "d", strings.NewReader("x")); return err },
		"long upload": func() error {
			_, err := c.Upload(ctx, ep, strings.Repeat("p/", 2100)+"f", strings.NewReader("x"))
			return err
		},
		"truncated body": func() error {
			_, err := c.Upload(ctx, ep, "t.bin", io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(io.ErrUnexpectedEOF)))
			return err
		},
	} {
		err := call()
		if st := bayapi.StatusOf(code(err)); st < 400 || st >= 500 {
			t.Errorf("%s: %v (status %d), want a 4xx", name, err, st)
		}
	}
	// Streamed upload and download of 8 MiB.
	data := make([]byte, 8<<20)
	rand.Read(data)
	up, err := c.Upload(ctx, ep, "big/blob.bin", bytes.NewReader(data))
	if err != nil || up.Size != int64(len(data)) {
		t.Fatalf("upload: %+v %v", up, err)
	}
	rc, n, err := c.Download(ctx, ep, "big/blob.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) || (n != -1 && n != int64(len(data))) {
		t.Fatalf("download: %d bytes (len %d)", len(got), n)
	}
	if err := c.DeleteFile(ctx, ep, "big"); err != nil {
		t.Fatal(err)
	}
}

func TestUploadSourceErrorIsReturnedAsIs(t *testing.T) {
	ep, _ := startShip(t)
	c := shipclient.New(nil, nil)
	tooBig := bay.Errorf(bay.CodePayloadTooLarge, "too large")
	src := io.MultiReader(strings.NewReader("partial"), errReader{tooBig})
	if _, err := c.Upload(context.Background(), ep, "x.bin", src); !errors.Is(err, tooBig) {
		t.Fatalf("err = %v", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestErrorClassification(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case shipapi.PathPythonExec:
			w.WriteHeader(500)
			w.Write([]byte(`{"detail":"Execution error: kernel exploded","code":"internal_error"}`))
		case shipapi.PathShellExec:
			<-block
		case shipapi.PathFSRead:
			w.WriteHeader(503)
			w.Write([]byte(`{"detail":"kernel starting","code":"kernel_starting"}`))
		default:
			w.WriteHeader(502)
			w.Write([]byte(`not json`))
		}
	}))
	defer srv.Close()
	defer close(block)
	c := shipclient.New(nil, nil)
	ctx := context.Background()
	_, err := c.ExecPython(ctx, srv.URL, shipapi.ExecPythonRequest{Code: "1", Timeout: 1})
	var be *bay.Error
	if !errors.As(err, &be) || be.Code != bay.CodeShipError || be.Message != "Ship request failed: 500: Execution error: kernel exploded" {
		t.Fatalf("500: %v", err)
	}
	if _, err := c.Meta(ctx, srv.URL); code(err) != bay.CodeShipError {
		t.Fatalf("non-json: %v", err)
	}
	if _, err := c.ReadFile(ctx, srv.URL, "a"); code(err) != bay.CodeSessionNotReady {
		t.Fatalf("kernel starting: %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.ExecShell(tctx, srv.URL, shipapi.ExecShellRequest{Command: "x"}); code(err) != bay.CodeTimeout {
		t.Fatalf("timeout: %v", err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close()
	err = c.Health(ctx, dead)
	if code(err) != bay.CodeShipError || !errors.Is(err, shipclient.ErrUnreachable) {
		t.Fatalf("refused: %v", err)
	}
}

func TestTerminalURL(t *testing.T) {
	if u := shipclient.TerminalURL("http://10.0.0.2:8123", 100, 30); u != "ws://10.0.0.2:8123/term/ws?cols=100&rows=30" {
		t.Fatal(u)
	}
	if u := shipclient.TerminalURL("https://h", 1, 2); !strings.HasPrefix(u, "wss://h/") {
		t.Fatal(u)
	}
}

// Every ship 4xx the client caused becomes a bay 4xx (ship's code where bay has it,
// validation_error otherwise); bay's and ship's own problems stay 502.
func TestShipStatusClassification(t *testing.T) {
	var status int
	var shipCode string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"detail":"ship says %d","code":%q}`, status, shipCode)
	}))
	defer srv.Close()
	c := shipclient.New(nil, nil)
	cases := []struct {
		status           int
		shipCode         string
		want, wantNoPath string
	}{
		{400, shipapi.CodeIsDirectory, bayapi.CodeIsADirectory, bayapi.CodeIsADirectory},
		{400, shipapi.CodeNotDirectory, bayapi.CodeNotADirectory, bayapi.CodeNotADirectory},
		{400, shipapi.CodeBadRequest, bayapi.CodeValidation, bayapi.CodeValidation},
		{400, shipapi.CodeInvalidUTF8, bayapi.CodeValidation, bayapi.CodeValidation},
		{400, "invalid_path", bayapi.CodeInvalidPath, bayapi.CodeInvalidPath},
		{400, "name_too_long", bayapi.CodeValidation, bayapi.CodeValidation},
		{400, "", bayapi.CodeValidation, bayapi.CodeValidation},
		{400, "unauthorized", bayapi.CodeValidation, bayapi.CodeValidation},
		{404, shipapi.CodeNotFound, bayapi.CodeFileNotFound, bayapi.CodeShipError},
		{403, shipapi.CodeAccessDenied, bayapi.CodeInvalidPath, bayapi.CodeInvalidPath},
		{409, "conflict", bayapi.CodeConflict, bayapi.CodeConflict},
		{413, "", bayapi.CodePayloadTooLarge, bayapi.CodePayloadTooLarge},
		{413, shipapi.CodeTooLarge, bayapi.CodePayloadTooLarge, bayapi.CodePayloadTooLarge},
		{414, "", bayapi.CodeValidation, bayapi.CodeValidation},
		{422, "validation_error", bayapi.CodeValidation, bayapi.CodeValidation},
		{401, shipapi.CodeUnauthorized, bayapi.CodeShipError, bayapi.CodeShipError},
		{405, "", bayapi.CodeShipError, bayapi.CodeShipError},
		{408, "", bayapi.CodeShipError, bayapi.CodeShipError},
		{429, "", bayapi.CodeShipError, bayapi.CodeShipError},
		{500, shipapi.CodeInternal, bayapi.CodeShipError, bayapi.CodeShipError},
		{502, "", bayapi.CodeShipError, bayapi.CodeShipError},
	}
	for _, tc := range cases {
		status, shipCode = tc.status, tc.shipCode
		_, err := c.ReadFile(t.Context(), srv.URL, "a.txt")
		var be *bay.Error
		if !errors.As(err, &be) || be.Code != tc.want {
			t.Errorf("%d %q about a path: %v, want %s", tc.status, tc.shipCode, err, tc.want)
			continue
		}
		if be.Code != bayapi.CodeFileNotFound && be.Code != bayapi.CodeInvalidPath && be.Details["ship_status"] != tc.status {
			t.Errorf("%d %q: details %v", tc.status, tc.shipCode, be.Details)
		}
		_, err = c.ExecShell(t.Context(), srv.URL, shipapi.ExecShellRequest{Command: "true"})
		if got := code(err); got != tc.wantNoPath {
			t.Errorf("%d %q on exec: %v, want %s", tc.status, tc.shipCode, err, tc.wantNoPath)
		}
	}
}
