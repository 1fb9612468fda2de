// Package e2e runs the ten user scenarios of seed 004 against the whole system: the real `bay`
// binary with SQLite and the Docker driver, the sandbox image built offline (ship:latest), and
// HTTP calls exactly as a client makes them. There is no fake anywhere below the HTTP socket.
//
// The tests need a reachable Docker engine and the image `ship:latest` (`make image`); without
// them they fail, they never skip (set SHIPYARD_SKIP_E2E=1 to opt out explicitly on a machine
// without Docker).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/testenv"
	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
)

const apiKey = "sk-e2e-0123456789abcdef"

// testImage is ship:latest, or SHIPYARD_E2E_IMAGE (a content tag such as ship:full-<hash>, so
// a run is not at the mercy of another build retagging ship:latest meanwhile).
var testImage = cmpOr(os.Getenv("SHIPYARD_E2E_IMAGE"), "ship:latest")

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

var (
	repoRoot string
	bayBin   string
)

func TestMain(m *testing.M) {
	if os.Getenv("SHIPYARD_SKIP_E2E") == "1" {
		fmt.Println("e2e: skipped on request (SHIPYARD_SKIP_E2E=1)")
		os.Exit(0)
	}
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Dir(filepath.Dir(file))
	bin, removeBin, err := testenv.BuildBay(repoRoot)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	bayBin = bin
	restoreFirewall := testenv.KeepHostFirewallAsFound()
	code := pgtest.Main(m) // stops the PostgreSQL cluster if a test started one
	restoreFirewall()
	removeBin()
	os.Exit(code)
}

// docker returns an Engine API client; a missing engine fails the test.
func docker(t *testing.T) *client.Client {
	t.Helper()
	cli, err := testenv.EngineClient(context.Background(), testImage)
	if err != nil {
		t.Fatalf("the e2e tests need the Docker engine and their image: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// bayOptions tune one bay instance.
type bayOptions struct {
	// extraConfig is appended to the generated config.yaml (top-level YAML).
	extraConfig string
	// profiles replaces the default profiles block.
	profiles string
	// env is added to bay's environment.
	env []string
	// databaseURL replaces the bay's own SQLite file (several bays share a postgres:// one).
	databaseURL string
	// instanceID replaces the generated instance id.
	instanceID string
}

// Bay is one running bay process.
type Bay struct {
	t          *testing.T
	URL        string
	InstanceID string
	DBPath     string
	proc       *testenv.BayProcess // nil until the first launch succeeds
	logs       *testenv.LogBuffer  // kept across relaunches
	http       *http.Client
	mu         sync.Mutex
	created    []string
	dir        string
	cfg        string
	env        []string
}

const defaultProfiles = `profiles:
  - id: python-default
    image: "ship:latest"
    resources: {cpus: 1.0, memory: "1g"}
    capabilities: [filesystem, shell, python]
    idle_timeout: 1800
  - id: short-idle
    image: "ship:latest"
    resources: {cpus: 1.0, memory: "1g"}
    capabilities: [filesystem, shell, python]
    idle_timeout: 2
`

// startBay starts the bay binary with a fresh SQLite file and the Docker driver, waits for
// /health, and stops it (SIGTERM) at cleanup after deleting every sandbox the test created.
func startBay(t *testing.T, o bayOptions) *Bay {
	t.Helper()
	dir := t.TempDir()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	instance := fmt.Sprintf("e2e-%d-%d", os.Getpid(), port)
	if o.instanceID != "" {
		instance = o.instanceID
	}
	profiles := o.profiles
	if profiles == "" {
		profiles = strings.ReplaceAll(defaultProfiles, `"ship:latest"`, fmt.Sprintf("%q", testImage))
	}
	cfg := testenv.Config{Port: port, DataDir: dir, DatabaseURL: o.databaseURL, APIKey: apiKey, InstanceID: instance,
		GC:    "  orphan_container:\n    enabled: true\n    grace_seconds: 0\n",
		Extra: profiles + "\n" + o.extraConfig}
	b := &Bay{t: t, URL: cfg.URL(), InstanceID: instance,
		DBPath: filepath.Join(dir, "bay.db"), logs: &testenv.LogBuffer{},
		http: &http.Client{Timeout: 5 * time.Minute}, dir: dir, cfg: cfg.YAML(), env: o.env}
	t.Cleanup(b.stop)
	b.launch()
	return b
}

// launch starts the bay process on the Bay's config and waits for /health.
func (b *Bay) launch() {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := testenv.StartBay(ctx, testenv.BayOptions{Binary: bayBin, Dir: b.dir, Config: b.cfg, URL: b.URL, Log: b.logs, Env: b.env})
	if err != nil {
		b.t.Fatalf("%v\n%s", err, b.logText())
	}
	b.proc = p
}

// running reports whether the last launched bay process is still up.
func (b *Bay) running() bool {
	if b.proc == nil {
		return false
	}
	select {
	case <-b.proc.Exited():
		return false
	default:
		return true
	}
}

// kill ends the bay process with SIGKILL (no drain, no cleanup) and waits for it.
func (b *Bay) kill() {
	b.t.Helper()
	b.proc.Kill()
}

// terminate sends SIGTERM and waits up to 30 s for a graceful exit.
func (b *Bay) terminate() {
	b.t.Helper()
	b.proc.Terminate(30 * time.Second)
	if b.running() {
		b.t.Fatal("bay did not stop within 30 s of SIGTERM")
	}
}

func (b *Bay) stop() {
	b.mu.Lock()
	ids := append([]string(nil), b.created...)
	b.mu.Unlock()
	if !b.running() {
		// A test that killed bay relaunches it before it ends; if it did not, the sandboxes
		// cannot be deleted through the API and the leftover check at the end of make test
		// reports their containers and volumes.
		if len(ids) > 0 {
			b.t.Errorf("bay is not running at cleanup; %d sandboxes not deleted", len(ids))
		}
		ids = nil
	}
	for _, id := range ids {
		// Best effort: the test may have deleted it already (204 again) or GC did (404).
		resp := b.do("DELETE", "/v1/sandboxes/"+id, nil, nil)
		if resp.Status != 204 && resp.Status != 404 {
			b.t.Logf("cleanup delete %s: %d %s", id, resp.Status, resp.Body)
		}
	}
	if b.proc != nil {
		b.proc.Stop(20 * time.Second)
	}
	if b.t.Failed() {
		b.t.Logf("bay logs:\n%s", b.logText())
	}
}

// Response is a decoded HTTP response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   map[string]any
}

func (r Response) String() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// Str returns a top-level (or dotted path) string field.
func (r Response) Str(path string) string {
	v := r.Get(path)
	s, _ := v.(string)
	return s
}

// Get walks a dotted path through the JSON body.
func (r Response) Get(path string) any {
	var cur any = r.JSON
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

// do sends a request with the API key. body may be nil, a []byte, or any JSON-encodable value.
func (b *Bay) do(method, path string, body any, hdr map[string]string) Response {
	b.t.Helper()
	var rd io.Reader
	ctype := ""
	switch v := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(v)
		ctype = "application/json"
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			b.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
		ctype = "application/json"
	}
	req, err := http.NewRequest(method, b.URL+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return b.send(req)
}

func (b *Bay) send(req *http.Request) Response {
	b.t.Helper()
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatalf("read body: %v", err)
	}
	r := Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
	b.checkAgainstOpenAPI(req, resp.StatusCode, resp.Header, raw)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && len(raw) > 0 {
		_ = json.Unmarshal(raw, &r.JSON)
	}
	return r
}

// expect fails the test unless the response has the status.
func expect(t *testing.T, r Response, status int, what string) Response {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: want HTTP %d, got %s", what, status, r)
	}
	return r
}

// expectError checks the error envelope: status, code, and a request id.
func expectError(t *testing.T, r Response, status int, code, what string) Response {
	t.Helper()
	expect(t, r, status, what)
	if got := r.Str("error.code"); got != code {
		t.Fatalf("%s: want error code %q, got %s", what, code, r)
	}
	if r.Str("error.request_id") == "" || r.Str("error.message") == "" {
		t.Fatalf("%s: error envelope lacks message or request_id: %s", what, r)
	}
	return r
}

// create makes a sandbox and registers it for cleanup.
func (b *Bay) create(body map[string]any, hdr map[string]string) Response {
	b.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	r := expect(b.t, b.do("POST", "/v1/sandboxes", body, hdr), 201, "create sandbox")
	id := r.Str("id")
	if !strings.HasPrefix(id, "sandbox-") || len(id) != len("sandbox-")+12 {
		b.t.Fatalf("sandbox id %q is not sandbox-<12hex>", id)
	}
	b.mu.Lock()
	b.created = append(b.created, id)
	b.mu.Unlock()
	return r
}

func (b *Bay) python(id, code string) Response {
	b.t.Helper()
	return expect(b.t, b.do("POST", "/v1/sandboxes/"+id+"/python/exec", map[string]any{"code": code, "timeout": 120}, nil), 200, "python/exec "+code)
}

func (b *Bay) pythonOK(id, code string) string {
	b.t.Helper()
	r := b.python(id, code)
	if r.Get("success") != true {
		b.t.Fatalf("python %q failed: %s", code, r)
	}
	if !strings.HasPrefix(r.Str("execution_id"), "exec-") {
		b.t.Fatalf("python response lacks execution_id: %s", r)
	}
	return r.Str("output")
}

func (b *Bay) shell(id string, body map[string]any) Response {
	b.t.Helper()
	if _, ok := body["timeout"]; !ok {
		body["timeout"] = 120
	}
	return expect(b.t, b.do("POST", "/v1/sandboxes/"+id+"/shell/exec", body, nil), 200, fmt.Sprintf("shell/exec %v", body["command"]))
}

func (b *Bay) shellOK(id, command string) string {
	b.t.Helper()
	r := b.shell(id, map[string]any{"command": command})
	if r.Get("success") != true {
		b.t.Fatalf("shell %q failed: %s", command, r)
	}
	return r.Str("output")
}

func (b *Bay) writeFile(id, path, content string) {
	b.t.Helper()
	r := expect(b.t, b.do("PUT", "/v1/sandboxes/"+id+"/filesystem/files", map[string]any{"path": path, "content": content}, nil), 200, "write "+path)
	if r.Str("status") != "ok" {
		b.t.Fatalf("write %s: %s", path, r)
	}
}

func (b *Bay) readFile(id, path string) string {
	b.t.Helper()
	r := expect(b.t, b.do("GET", "/v1/sandboxes/"+id+"/filesystem/files?path="+url.QueryEscape(path), nil, nil), 200, "read "+path)
	return r.Str("content")
}

func (b *Bay) upload(id, path string, data []byte) Response {
	b.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if err := mw.WriteField("path", path); err != nil {
		b.t.Fatal(err)
	}
	fw, err := mw.CreateFormFile("file", filepath.Base(path))
	if err != nil {
		b.t.Fatal(err)
	}
	fw.Write(data)
	mw.Close()
	req, _ := http.NewRequest("POST", b.URL+"/v1/sandboxes/"+id+"/filesystem/upload", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+apiKey)
	return b.send(req)
}

func (b *Bay) download(id, path string) Response {
	b.t.Helper()
	return b.do("GET", "/v1/sandboxes/"+id+"/filesystem/download?path="+url.QueryEscape(path), nil, nil)
}

func (b *Bay) get(id string) Response {
	b.t.Helper()
	return b.do("GET", "/v1/sandboxes/"+id, nil, nil)
}

// sessionContainers lists the containers of a sandbox through the Engine API, each described
// as "name state session=<bay.session_id>" for failure messages.
func sessionContainers(t *testing.T, cli *client.Client, sandboxID string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "bay.sandbox_id="+sandboxID)})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	var ids []string
	for _, c := range res.Items {
		name := c.ID[:12]
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		ids = append(ids, fmt.Sprintf("%s %s session=%s", name, c.State, c.Labels["bay.session_id"]))
	}
	return ids
}

func volumeExists(t *testing.T, cli *client.Client, name string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	return err == nil
}

func contains(t *testing.T, s, sub, what string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%s: %q does not contain %q", what, s, sub)
	}
}

// waitLog waits until bay's log holds at least n lines containing sub.
func (b *Bay) waitLog(t *testing.T, sub string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := strings.Count(b.logText(), sub)
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("bay logged %q %d times within %v, want %d", sub, got, timeout, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logText returns what bay has logged so far.
func (b *Bay) logText() string { return b.logs.String() }

// execIn runs a command in a container (as the container's user) and returns its stdout.
func execIn(t *testing.T, cli *client.Client, container string, cmd ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	x, err := cli.ExecCreate(ctx, container, client.ExecCreateOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatalf("exec %q in %s: %v", cmd, container, err)
	}
	att, err := cli.ExecAttach(ctx, x.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec %q in %s: %v", cmd, container, err)
	}
	defer att.Close()
	var out, errb bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errb, att.Reader); err != nil {
		t.Fatalf("exec %q in %s: %v", cmd, container, err)
	}
	return out.String()
}
