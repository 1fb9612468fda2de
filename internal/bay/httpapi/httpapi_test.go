package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/httpapi"
	"github.com/shipyard-dev/shipyard/internal/bay/idempotency"
	"github.com/shipyard-dev/shipyard/internal/bay/jobs"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox/sandboxtest"
	"github.com/shipyard-dev/shipyard/internal/bay/shipclient/shipstub"
)

// tokens is a test Authenticator: "Bearer <owner>-key" -> owner.
type tokens struct{}

func (tokens) Authenticate(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if !strings.HasPrefix(h, "Bearer ") || !strings.HasSuffix(h, "-key") {
		return "", bay.Errorf(bay.CodeUnauthorized, "Authentication required")
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "Bearer "), "-key"), nil
}

type harness struct {
	t    *testing.T
	srv  *httptest.Server
	api  *httpapi.Server
	drv  *fake.Driver
	ship *shipstub.Stub
	// newJobs returns another jobs service over the harness's store and runtime, as a second
	// bay sharing the database would have (jobs harnesses only).
	newJobs func(ship jobs.Ship, cfg jobs.Config) *jobs.Service
	jobs    *jobs.Service // the API's (jobs harnesses only)
	store   bay.Store     // the database (jobs harnesses only)
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, nil)
}

// newHarnessWith is newHarness with the server's logger.
func newHarnessWith(t *testing.T, log *slog.Logger) *harness {
	t.Helper()
	return newHarnessOpts(t, log, sandboxtest.Options{})
}

// newHarnessOpts is newHarness with the server's logger and the services' options.
func newHarnessOpts(t *testing.T, log *slog.Logger, o sandboxtest.Options) *harness {
	t.Helper()
	e := sandboxtest.New(t, o)
	api := httpapi.New(httpapi.Options{
		Service: e.Svc, Capabilities: e.Caps, History: e.Hist, Auth: tokens{}, Version: "test", MaxUploadBytes: 1 << 20, Log: log,
		Idempotency: idempotency.New(e.Store, nil, idempotency.Config{Enabled: true}, nil),
	})
	api.Mount("GET /panic", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), false)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &harness{t: t, srv: srv, api: api, drv: e.Drv, ship: e.Ship}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

// errCode returns error.code and checks the envelope has a request id.
func (r resp) errCode(t *testing.T) string {
	t.Helper()
	m := r.json(t)
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("no envelope: %s", r.body)
	}
	if e["request_id"] == "" || e["request_id"] == nil {
		t.Fatalf("no request id: %s", r.body)
	}
	return e["code"].(string)
}

func (h *harness) do(method, path, owner string, body any, hdr ...string) resp {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, h.srv.URL+path, rd)
	if owner != "" {
		req.Header.Set("Authorization", "Bearer "+owner+"-key")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

func (h *harness) expect(r resp, status int, code string) {
	h.t.Helper()
	if r.status != status {
		h.t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if code != "" {
		if got := r.errCode(h.t); got != code {
			h.t.Fatalf("code %s, want %s: %s", got, code, r.body)
		}
	}
}

func (h *harness) sandbox(owner string) string {
	r := h.do("POST", "/v1/sandboxes", owner, "{}")
	h.expect(r, 201, "")
	return r.json(h.t)["id"].(string)
}

// detail returns the first 422 issue's type and loc.
func detail(t *testing.T, r resp) (string, string) {
	t.Helper()
	var env bayapi.ErrorEnvelope
	if err := json.Unmarshal(r.body, &env); err != nil || len(env.Detail) == 0 {
		t.Fatalf("no detail: %s", r.body)
	}
	loc, _ := json.Marshal(env.Detail[0].Loc)
	return env.Detail[0].Type, string(loc)
}

func TestEnvelopeForRoutingErrors(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/nope", "", nil, "X-Request-Id", "req-42")
	h.expect(r, 404, "not_found")
	if r.header.Get("X-Request-Id") != "req-42" || !strings.Contains(string(r.body), `"request_id":"req-42"`) {
		t.Fatalf("request id not echoed: %v %s", r.header, r.body)
	}
	r = h.do("PATCH", "/v1/sandboxes", "alice", nil)
	h.expect(r, 405, "method_not_allowed")
	if a := r.header.Get("Allow"); !strings.Contains(a, "GET") || !strings.Contains(a, "POST") {
		t.Fatalf("Allow = %q", a)
	}
	r = h.do("GET", "/v1/sandboxes/", "alice", nil)
	if r.status != 307 || r.header.Get("Location") != "/v1/sandboxes" {
		t.Fatalf("trailing slash: %d %v", r.status, r.header)
	}
	h.expect(h.do("GET", "/panic", "", nil), 500, "internal_error")
	if r := h.do("GET", "/health", "", nil); r.status != 200 || r.header.Get("X-Request-Id") == "" {
		t.Fatalf("health: %d %v", r.status, r.header)
	}
	h.expect(h.do("GET", "/v1/sandboxes", "", nil), 401, "unauthorized")
	h.expect(h.do("GET", "/v1/profiles", "", nil), 200, "")
	h.expect(h.do("GET", "/v1/admin/gc/status", "alice", nil), 403, "forbidden") // an admin's, and alice is none
}

func TestCreateValidation(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		body, typ, loc string
	}{
		{"", "missing", `["body"]`},
		{"{", "json_invalid", `["body",1]`},
		{"[1]", "model_attributes_type", `["body"]`},
		{`{"ttl":"abc"}`, "int_parsing", `["body","ttl"]`},
		{`{"ttl":1.5}`, "int_parsing", `["body","ttl"]`},
		{`{"profile":5}`, "string_type", `["body","profile"]`},
	}
	for _, c := range cases {
		r := h.do("POST", "/v1/sandboxes", "alice", c.body)
		h.expect(r, 422, "validation_error")
		if typ, loc := detail(t, r); typ != c.typ || loc != c.loc {
			t.Errorf("%q: %s %s", c.body, typ, loc)
		}
	}
	h.expect(h.do("POST", "/v1/sandboxes", "alice", `{"profile":"nope"}`), 400, "validation_error")
	h.expect(h.do("POST", "/v1/sandboxes", "alice", `{"cargo_id":"ws-000000000000"}`), 404, "not_found")
	r := h.do("POST", "/v1/sandboxes", "alice", `{"ttl":"60","extra":1}`)
	h.expect(r, 201, "")
	m := r.json(t)
	if m["status"] != "idle" || m["expires_at"] == nil || m["containers"] != nil {
		t.Fatalf("create: %s", r.body)
	}
	for _, k := range []string{"id", "status", "profile", "cargo_id", "capabilities", "created_at", "expires_at", "idle_expires_at", "containers"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("missing field %s: %s", k, r.body)
		}
	}
	if strings.HasSuffix(m["created_at"].(string), "Z") {
		t.Fatalf("timestamps must be offset-less: %s", m["created_at"])
	}
}

func TestIdempotencyOverHTTP(t *testing.T) {
	h := newHarness(t)
	first := h.do("POST", "/v1/sandboxes", "alice", `{}`, "Idempotency-Key", "k-1")
	h.expect(first, 201, "")
	again := h.do("POST", "/v1/sandboxes", "alice", `{"profile":"python-default"}`, "Idempotency-Key", "k-1")
	if again.status != 201 || !bytes.Equal(again.body, first.body) || again.header.Get(httpapi.HeaderReplayed) != "true" {
		t.Fatalf("replay: %d %s vs %s", again.status, again.body, first.body)
	}
	r := h.do("POST", "/v1/sandboxes", "alice", `{"ttl":5}`, "Idempotency-Key", "k-1")
	h.expect(r, 409, "conflict")
	if !strings.Contains(string(r.body), `"hint"`) {
		t.Fatalf("no hint: %s", r.body)
	}
	h.expect(h.do("POST", "/v1/sandboxes", "alice", `{}`, "Idempotency-Key", "bad key"), 400, "validation_error")
	// Same key on another endpoint is another scope.
	h.expect(h.do("POST", "/v1/cargos", "alice", `{}`, "Idempotency-Key", "k-1"), 201, "")
	// Another owner's same key is independent.
	if r := h.do("POST", "/v1/sandboxes", "bob", `{}`, "Idempotency-Key", "k-1"); r.status != 201 || bytes.Equal(r.body, first.body) {
		t.Fatalf("bob: %s", r.body)
	}
	// Concurrent duplicates: one sandbox, identical bodies.
	var wg sync.WaitGroup
	bodies := make([]string, 8)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bodies[i] = string(h.do("POST", "/v1/sandboxes", "carol", `{}`, "Idempotency-Key", "race").body)
		}()
	}
	wg.Wait()
	for _, b := range bodies {
		if b != bodies[0] {
			t.Fatalf("different bodies: %s / %s", b, bodies[0])
		}
	}
	list := h.do("GET", "/v1/sandboxes", "carol", nil).json(t)
	if n := len(list["items"].([]any)); n != 1 {
		t.Fatalf("carol has %d sandboxes", n)
	}
	// extend_ttl with a key.
	id := h.do("POST", "/v1/sandboxes", "alice", `{"ttl":100}`).json(t)["id"].(string)
	e1 := h.do("POST", "/v1/sandboxes/"+id+"/extend_ttl", "alice", `{"extend_by":10}`, "Idempotency-Key", "x")
	e2 := h.do("POST", "/v1/sandboxes/"+id+"/extend_ttl", "alice", `{"extend_by":"10"}`, "Idempotency-Key", "x")
	if e1.status != 200 || !bytes.Equal(e1.body, e2.body) {
		t.Fatalf("extend replay: %s %s", e1.body, e2.body)
	}
}

func TestSandboxEndpoints(t *testing.T) {
	h := newHarness(t)
	id := h.sandbox("alice")
	h.expect(h.do("GET", "/v1/sandboxes/"+id, "bob", nil), 404, "not_found")
	h.expect(h.do("GET", "/v1/sandboxes/"+id, "alice", nil), 200, "")
	h.expect(h.do("GET", "/v1/sandboxes?limit=0", "alice", nil), 422, "validation_error")
	h.expect(h.do("GET", "/v1/sandboxes?limit=x", "alice", nil), 422, "validation_error")
	h.expect(h.do("GET", "/v1/sandboxes?status=bogus", "alice", nil), 422, "validation_error")
	h.expect(h.do("GET", "/v1/sandboxes?status=idle", "alice", nil), 200, "")
	h.expect(h.do("POST", "/v1/sandboxes/"+id+"/extend_ttl", "alice", `{}`), 422, "validation_error")
	h.expect(h.do("POST", "/v1/sandboxes/"+id+"/extend_ttl", "alice", `{"extend_by":0}`), 400, "validation_error")
	h.expect(h.do("POST", "/v1/sandboxes/"+id+"/extend_ttl", "alice", `{"extend_by":5}`), 409, "sandbox_ttl_infinite")
	h.expect(h.do("POST", "/v1/sandboxes/"+id+"/keepalive", "alice", nil), 200, "")
	h.expect(h.do("POST", "/v1/sandboxes/"+id+"/stop", "alice", nil), 200, "")
	h.expect(h.do("POST", "/v1/sandboxes/"+id+"/stop", "bob", nil), 404, "not_found")
	h.expect(h.do("DELETE", "/v1/sandboxes/"+id, "bob", nil), 404, "not_found")
	h.expect(h.do("DELETE", "/v1/sandboxes/"+id, "alice", nil), 204, "")
	h.expect(h.do("DELETE", "/v1/sandboxes/"+id, "alice", nil), 204, "")
	h.expect(h.do("GET", "/v1/sandboxes/"+id, "alice", nil), 404, "not_found")
	h.expect(h.do("DELETE", "/v1/sandboxes/sandbox-000000000000", "alice", nil), 404, "not_found")
}

func TestExecEndpoints(t *testing.T) {
	h := newHarness(t)
	id := h.sandbox("alice")
	p := "/v1/sandboxes/" + id
	for _, c := range []struct{ body, typ string }{
		{`{}`, "missing"},
		{`{"code":"1","timeout":0}`, "greater_than_equal"},
		{`{"code":"1","timeout":301}`, "less_than_equal"},
		{`{"code":"1","timeout":"x"}`, "int_parsing"},
		{`{"code":1}`, "string_type"},
		{`{"code":"1","include_code":null}`, "bool_type"},
	} {
		r := h.do("POST", p+"/python/exec", "alice", c.body)
		h.expect(r, 422, "validation_error")
		if typ, _ := detail(t, r); typ != c.typ {
			t.Errorf("%s: %s", c.body, typ)
		}
	}
	h.expect(h.do("POST", "/v1/sandboxes/sandbox-000000000000/python/exec", "alice", `{"code":"1"}`), 404, "not_found")
	h.expect(h.do("POST", p+"/python/exec", "bob", `{"code":"1"}`), 404, "not_found")
	r := h.do("POST", p+"/python/exec", "alice", `{"code":"print(1)","include_code":true}`)
	h.expect(r, 200, "")
	m := r.json(t)
	if m["execution_id"] == "" || m["output"] != "print(1)" || m["code"] != "print(1)" {
		t.Fatalf("python: %s", r.body)
	}
	for body, reason := range map[string]string{`{"command":"ls","cwd":"/etc"}`: "absolute_path", `{"command":"ls","cwd":"../x"}`: "path_traversal", `{"command":"ls","cwd":""}`: "empty_path"} {
		r := h.do("POST", p+"/shell/exec", "alice", body)
		h.expect(r, 400, "invalid_path")
		if !strings.Contains(string(r.body), `"reason":"`+reason+`"`) || !strings.Contains(string(r.body), `"field":"cwd"`) {
			t.Fatalf("%s: %s", body, r.body)
		}
	}
	r = h.do("POST", p+"/shell/exec", "alice", `{"command":"ls","cwd":"src/../"}`)
	h.expect(r, 200, "")
	if m := r.json(t); m["output"] != "ls @." || m["exit_code"] != float64(0) {
		t.Fatalf("shell: %s", r.body)
	}
	// History.
	hist := h.do("GET", p+"/history?exec_type=python", "alice", nil)
	h.expect(hist, 200, "")
	if hist.json(t)["total"] != float64(1) {
		t.Fatalf("history: %s", hist.body)
	}
	h.expect(h.do("GET", p+"/history?exec_type=ruby", "alice", nil), 422, "validation_error")
	h.expect(h.do("GET", p+"/history?limit=501", "alice", nil), 422, "validation_error")
	last := h.do("GET", p+"/history/last", "alice", nil)
	h.expect(last, 200, "")
	eid := last.json(t)["id"].(string)
	h.expect(h.do("GET", p+"/history/"+eid, "alice", nil), 200, "")
	h.expect(h.do("GET", p+"/history/exec-000000000000", "alice", nil), 404, "not_found")
	r = h.do("PATCH", p+"/history/"+eid, "alice", `{"tags":"b, a ,a","notes":"ok"}`)
	h.expect(r, 200, "")
	if r.json(t)["tags"] != "a,b" {
		t.Fatalf("annotate: %s", r.body)
	}
	h.expect(h.do("PATCH", p+"/history/"+eid, "alice", ``), 422, "validation_error")
	h.expect(h.do("GET", p+"/history", "bob", nil), 404, "not_found")
	// The ship was called only after validation passed; one container.
	if n := h.drv.CallCount(fake.MethodCreateInstance); n != 1 {
		t.Fatalf("%d containers", n)
	}
}

func TestFilesystemEndpoints(t *testing.T) {
	h := newHarness(t)
	id := h.sandbox("alice")
	p := "/v1/sandboxes/" + id + "/filesystem"
	h.expect(h.do("GET", p+"/files", "alice", nil), 422, "validation_error")
	h.expect(h.do("GET", p+"/files?path=", "alice", nil), 400, "invalid_path")
	h.expect(h.do("GET", p+"/files?path=/etc/passwd", "alice", nil), 400, "invalid_path")
	h.expect(h.do("GET", p+"/files?path=../x", "alice", nil), 400, "invalid_path")
	h.expect(h.do("GET", p+"/files?path=missing.txt", "alice", nil), 404, "file_not_found")
	h.expect(h.do("GET", p+"/files?path=escape/link", "alice", nil), 400, "invalid_path")
	h.expect(h.do("PUT", p+"/files", "alice", `{"path":"a/b.txt"}`), 422, "validation_error")
	h.expect(h.do("PUT", p+"/files", "alice", `{"path":"/a","content":"x"}`), 400, "invalid_path")
	h.expect(h.do("PUT", p+"/files", "alice", `{"path":"./a/b.txt","content":"hello"}`), 200, "")
	r := h.do("GET", p+"/files?path=a/b.txt", "alice", nil)
	if r.status != 200 || r.json(t)["content"] != "hello" {
		t.Fatalf("read: %s", r.body)
	}
	h.expect(h.do("GET", p+"/directories", "alice", nil), 200, "")
	h.expect(h.do("DELETE", p+"/files?path=.", "alice", nil), 400, "invalid_path")
	h.expect(h.do("DELETE", p+"/files?path=a/..", "alice", nil), 400, "invalid_path")
	h.expect(h.do("DELETE", p+"/files?path=nope", "alice", nil), 404, "file_not_found")
	h.expect(h.do("DELETE", p+"/files?path=a/b.txt", "alice", nil), 200, "")

	// Upload: path field first.
	upload := func(query string, parts ...[2]string) resp {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for _, pt := range parts {
			if pt[0] == "file" {
				fw, _ := mw.CreateFormFile("file", "data.bin")
				fw.Write([]byte(pt[1]))
			} else {
				mw.WriteField(pt[0], pt[1])
			}
		}
		mw.Close()
		return h.do("POST", p+"/upload"+query, "alice", buf.Bytes(), "Content-Type", mw.FormDataContentType())
	}
	r = upload("", [2]string{"path", "d/in.csv"}, [2]string{"file", "1,2,3"})
	h.expect(r, 200, "")
	if m := r.json(t); m["path"] != "d/in.csv" || m["size"] != float64(5) || m["status"] != "ok" {
		t.Fatalf("upload: %s", r.body)
	}
	if b, _ := h.ship.File("d/in.csv"); string(b) != "1,2,3" {
		t.Fatalf("stored %q", b)
	}
	h.expect(upload("?path=q.bin", [2]string{"file", "xy"}), 200, "")
	h.expect(upload("", [2]string{"file", "xy"}, [2]string{"path", "late.bin"}), 422, "validation_error")
	h.expect(upload("", [2]string{"path", "../x"}, [2]string{"file", "xy"}), 400, "invalid_path")
	h.expect(upload("", [2]string{"path", "big"}, [2]string{"file", strings.Repeat("x", 1<<20+1)}), 413, "payload_too_large")
	h.expect(h.do("POST", p+"/upload", "alice", `{}`), 422, "validation_error")

	// Download.
	h.ship.SetFile("dir/ré sumé\".txt", []byte("binary\x00data"))
	r = h.do("GET", p+"/download?path=dir/r%C3%A9%20sum%C3%A9%22.txt", "alice", nil)
	if r.status != 200 || string(r.body) != "binary\x00data" || r.header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("download: %d %q %v", r.status, r.body, r.header)
	}
	if cd := r.header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") || !strings.Contains(cd, "filename*=utf-8''r%C3%A9%20sum%C3%A9%22.txt") {
		t.Fatalf("content-disposition %q", cd)
	}
	h.expect(h.do("GET", p+"/download?path=missing", "alice", nil), 404, "file_not_found")
}

func TestCargoAndProfileEndpoints(t *testing.T) {
	h := newHarness(t)
	h.expect(h.do("POST", "/v1/cargos", "alice", `{"size_limit_mb":0}`), 422, "validation_error")
	h.expect(h.do("POST", "/v1/cargos", "alice", `{"size_limit_mb":65537}`), 422, "validation_error")
	h.expect(h.do("POST", "/v1/cargos", "alice", ``), 422, "validation_error")
	r := h.do("POST", "/v1/cargos", "alice", `{"size_limit_mb":512}`)
	h.expect(r, 201, "")
	cid := r.json(t)["id"].(string)
	if r.json(t)["managed"] != false || r.json(t)["size_limit_mb"] != float64(512) {
		t.Fatalf("cargo: %s", r.body)
	}
	h.expect(h.do("GET", "/v1/cargos/"+cid, "bob", nil), 404, "not_found")
	h.sandbox("alice")
	list := h.do("GET", "/v1/cargos", "alice", nil).json(t)
	if n := len(list["items"].([]any)); n != 1 {
		t.Fatalf("external cargos: %d", n)
	}
	list = h.do("GET", "/v1/cargos?managed=true", "alice", nil).json(t)
	if n := len(list["items"].([]any)); n != 1 {
		t.Fatalf("managed cargos: %d", n)
	}
	sid := h.do("POST", "/v1/sandboxes", "alice", `{"cargo_id":"`+cid+`"}`).json(t)["id"].(string)
	r = h.do("DELETE", "/v1/cargos/"+cid, "alice", nil)
	h.expect(r, 409, "conflict")
	if !strings.Contains(string(r.body), sid) {
		t.Fatalf("active ids: %s", r.body)
	}
	h.expect(h.do("DELETE", "/v1/sandboxes/"+sid, "alice", nil), 204, "")
	h.expect(h.do("DELETE", "/v1/cargos/"+cid, "alice", nil), 204, "")
	r = h.do("GET", "/v1/profiles?detail=true", "", nil)
	h.expect(r, 200, "")
	if !strings.Contains(string(r.body), `"containers":[{"name":"primary"`) {
		t.Fatalf("profiles: %s", r.body)
	}
	if r := h.do("GET", "/v1/profiles", "", nil); !strings.Contains(string(r.body), `"containers":null`) {
		t.Fatalf("profiles: %s", r.body)
	}
}

// TestOpenAPIDocumentsEveryRoute keeps /openapi.json true: every registered route is an
// operation of the document and every operation is a registered route; every API path
// constant of api/bayapi is routed.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/openapi.json", "", nil)
	h.expect(r, 200, "")
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("doc: %v %s", err, doc.OpenAPI)
	}
	documented := map[string]bool{}
	for p, ops := range doc.Paths {
		for m := range ops {
			documented[strings.ToUpper(m)+" "+p] = true
		}
	}
	registered := map[string]bool{}
	for _, rt := range h.api.Routes() {
		rt = strings.ReplaceAll(rt, "...}", "}") // OpenAPI has no rest-of-path parameter
		registered[rt] = true
		if !documented[rt] {
			t.Errorf("route %s is not documented", rt)
		}
		method, path, _ := strings.Cut(rt, " ")
		probe := strings.NewReplacer("{sandbox_id}", "sandbox-000000000000", "{execution_id}", "exec-000000000000", "{cargo_id}", "ws-000000000000").Replace(path)
		if res := h.do(method, probe, "alice", nil); res.status == 404 && strings.Contains(string(res.body), "Not found: ") {
			t.Errorf("route %s is documented but not served", rt)
		}
	}
	for op := range documented {
		if !registered[op] {
			t.Errorf("operation %s is documented but not registered", op)
		}
	}
	for _, p := range []string{bayapi.PathHealth, bayapi.PathSandboxes, bayapi.PathSandbox, bayapi.PathExtendTTL, bayapi.PathKeepalive, bayapi.PathStop,
		bayapi.PathPythonExec, bayapi.PathShellExec, bayapi.PathFiles, bayapi.PathDirectories, bayapi.PathUpload, bayapi.PathDownload, bayapi.PathTerminal,
		bayapi.PathHistory, bayapi.PathHistoryLast, bayapi.PathHistoryEntry, bayapi.PathCargos, bayapi.PathCargo, bayapi.PathProfiles,
		bayapi.PathGCRun, bayapi.PathGCStatus, bayapi.PathOpenAPI} {
		if doc.Paths[p] == nil {
			t.Errorf("bayapi path %s is not in the document", p)
		}
	}
}

func TestTerminalProxy(t *testing.T) {
	h := newHarness(t)
	id := h.sandbox("alice")
	url := "ws" + strings.TrimPrefix(h.srv.URL, "http") + "/v1/sandboxes/" + id + "/terminal?cols=100&rows=30"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Errors come back before the upgrade, in the envelope.
	_, res, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer bob-key"}}})
	if err == nil || res == nil || res.StatusCode != 404 {
		t.Fatalf("other owner: %v %v", err, res)
	}
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer alice-key"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"ls\r", `{"type":"resize","cols":120,"rows":40}`} {
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		typ, b, err := c.Read(ctx)
		if err != nil || typ != websocket.MessageText || string(b) != "100x30: "+msg {
			t.Fatalf("echo: %v %q %v", typ, b, err)
		}
	}
	if err := c.Write(ctx, websocket.MessageBinary, []byte{0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if typ, b, err := c.Read(ctx); err != nil || typ != websocket.MessageBinary || len(b) != len("100x30: ")+3 {
		t.Fatalf("binary: %v %q %v", typ, b, err)
	}
	c.Close(websocket.StatusNormalClosure, "bye")

	// Closing our side closes ship's side.
	deadline := time.Now().Add(10 * time.Second)
	for h.ship.TermClosed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("upstream terminal not closed")
		}
		time.Sleep(5 * time.Millisecond) // waiting for another goroutine's effect, not timing logic
	}
	// The shell's exit closes the client's side with ship's code and reason (its status).
	c, _, err = websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer alice-key"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, websocket.MessageBinary, []byte("exit 3")); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Read(ctx)
	if ce := (websocket.CloseError{}); !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != "exit 3" {
		t.Fatalf("the shell's exit reached the client as %v, want a normal closure \"exit 3\"", err)
	}
}
