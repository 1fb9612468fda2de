package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/testenv"
)

// Every number, duration and text in a body or query is bounded: out of range is a 422 with
// the location (extend_by <= 0 keeps the contract's 400), in range is accepted.
func TestBoundsOfEveryNumber(t *testing.T) {
	h := newHarness(t)
	id := h.sandbox("alice")
	sb := "/v1/sandboxes/" + id
	exec := h.do("POST", sb+"/shell/exec", "alice", `{"command":"true"}`)
	h.expect(exec, 200, "")
	hist := h.do("GET", sb+"/history/last", "alice", nil)
	h.expect(hist, 200, "")
	execID, _ := hist.json(t)["id"].(string)
	ttlBody := func(v string) string { return `{"ttl":` + v + `}` }
	long := func(n int) string { return `"` + strings.Repeat("x", n) + `"` }
	maxTTL := fmt.Sprint(bayapi.MaxTTL)
	cases := []struct {
		name, method, path, body string
		status                   int
		typ, loc                 string
	}{
		{"ttl overflow", "POST", "/v1/sandboxes", ttlBody("9223372037"), 422, "less_than_equal", `["body","ttl"]`},
		{"ttl wraps", "POST", "/v1/sandboxes", ttlBody("1e11"), 422, "less_than_equal", `["body","ttl"]`},
		{"ttl max int64", "POST", "/v1/sandboxes", ttlBody("9223372036854775807"), 422, "less_than_equal", `["body","ttl"]`},
		{"ttl beyond int64", "POST", "/v1/sandboxes", ttlBody("92233720368547758070"), 422, "int_parsing", `["body","ttl"]`},
		{"ttl huge float", "POST", "/v1/sandboxes", ttlBody("1e300"), 422, "int_parsing", `["body","ttl"]`},
		{"ttl string overflow", "POST", "/v1/sandboxes", ttlBody(`"99999999999999999999"`), 422, "int_parsing", `["body","ttl"]`},
		{"ttl one over", "POST", "/v1/sandboxes", ttlBody(fmt.Sprint(bayapi.MaxTTL + 1)), 422, "less_than_equal", `["body","ttl"]`},
		{"ttl max", "POST", "/v1/sandboxes", ttlBody(maxTTL), 201, "", ""},
		{"ttl negative is no expiry", "POST", "/v1/sandboxes", ttlBody("-9223372036854775808"), 201, "", ""},
		{"profile too long", "POST", "/v1/sandboxes", `{"profile":` + long(300) + `}`, 422, "string_too_long", `["body","profile"]`},
		{"cargo id too long", "POST", "/v1/sandboxes", `{"cargo_id":` + long(300) + `}`, 422, "string_too_long", `["body","cargo_id"]`},

		{"extend max int64", "POST", sb + "/extend_ttl", `{"extend_by":9223372036854775807}`, 422, "less_than_equal", `["body","extend_by"]`},
		{"extend wraps", "POST", sb + "/extend_ttl", `{"extend_by":1e11}`, 422, "less_than_equal", `["body","extend_by"]`},
		{"extend zero", "POST", sb + "/extend_ttl", `{"extend_by":0}`, 400, "", ""},
		{"extend negative", "POST", sb + "/extend_ttl", `{"extend_by":-9223372036854775808}`, 400, "", ""},

		{"python timeout 0", "POST", sb + "/python/exec", `{"code":"1","timeout":0}`, 422, "greater_than_equal", `["body","timeout"]`},
		{"python timeout huge", "POST", sb + "/python/exec", `{"code":"1","timeout":9223372036854775807}`, 422, "less_than_equal", `["body","timeout"]`},
		{"shell timeout over", "POST", sb + "/shell/exec", `{"command":"true","timeout":301}`, 422, "less_than_equal", `["body","timeout"]`},
		{"shell timeout negative", "POST", sb + "/shell/exec", `{"command":"true","timeout":-1}`, 422, "greater_than_equal", `["body","timeout"]`},
		{"shell description", "POST", sb + "/shell/exec", `{"command":"true","description":` + long(bayapi.MaxDescriptionLen+1) + `}`, 422, "string_too_long", `["body","description"]`},
		{"python tags", "POST", sb + "/python/exec", `{"code":"1","tags":` + long(bayapi.MaxTagsLen+1) + `}`, 422, "string_too_long", `["body","tags"]`},

		{"cargo size 0", "POST", "/v1/cargos", `{"size_limit_mb":0}`, 422, "greater_than_equal", `["body","size_limit_mb"]`},
		{"cargo size huge", "POST", "/v1/cargos", `{"size_limit_mb":9223372036854775807}`, 422, "less_than_equal", `["body","size_limit_mb"]`},

		{"list limit 0", "GET", "/v1/sandboxes?limit=0", "", 422, "greater_than_equal", `["query","limit"]`},
		{"list limit over", "GET", "/v1/sandboxes?limit=201", "", 422, "less_than_equal", `["query","limit"]`},
		{"list limit overflow", "GET", "/v1/sandboxes?limit=18446744073709551616", "", 422, "int_parsing", `["query","limit"]`},
		{"list cursor long", "GET", "/v1/sandboxes?cursor=" + strings.Repeat("c", 300), "", 422, "string_too_long", `["query","cursor"]`},
		{"cargo limit over", "GET", "/v1/cargos?limit=1000", "", 422, "less_than_equal", `["query","limit"]`},
		{"cargo cursor long", "GET", "/v1/cargos?cursor=" + strings.Repeat("c", 300), "", 422, "string_too_long", `["query","cursor"]`},
		{"history limit over", "GET", sb + "/history?limit=501", "", 422, "less_than_equal", `["query","limit"]`},
		{"history offset negative", "GET", sb + "/history?offset=-1", "", 422, "greater_than_equal", `["query","offset"]`},
		{"history offset over", "GET", sb + "/history?offset=2147483648", "", 422, "less_than_equal", `["query","offset"]`},
		{"history tags long", "GET", sb + "/history?tags=" + strings.Repeat("t", 2000), "", 422, "string_too_long", `["query","tags"]`},
		{"history in range", "GET", sb + "/history?limit=500&offset=2147483647", "", 200, "", ""},
		{"annotate notes", "PATCH", sb + "/history/" + execID, `{"notes":` + long(bayapi.MaxNotesLen+1) + `}`, 422, "string_too_long", `["body","notes"]`},
		{"annotate description", "PATCH", sb + "/history/" + execID, `{"description":` + long(bayapi.MaxDescriptionLen+1) + `}`, 422, "string_too_long", `["body","description"]`},
		{"annotate in range", "PATCH", sb + "/history/" + execID, `{"notes":` + long(bayapi.MaxNotesLen) + `}`, 200, "", ""},
		{"terminal cols", "GET", sb + "/terminal?cols=1001", "", 422, "less_than_equal", `["query","cols"]`},
		{"terminal rows", "GET", sb + "/terminal?rows=0", "", 422, "greater_than_equal", `["query","rows"]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body any
			if c.body != "" {
				body = c.body
			}
			r := h.do(c.method, c.path, "alice", body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %.300s", r.status, c.status, r.body)
			}
			if c.status >= 400 && r.errCode(t) != bayapi.CodeValidation {
				t.Fatalf("code %s: %.300s", r.errCode(t), r.body)
			}
			if c.typ != "" {
				if typ, loc := detail(t, r); typ != c.typ || loc != c.loc {
					t.Fatalf("issue %s %s, want %s %s", typ, loc, c.typ, c.loc)
				}
			}
		})
	}
	// The sandbox whose extend was refused is unchanged and still usable.
	h.expect(h.do("POST", sb+"/extend_ttl", "alice", `{"extend_by":60}`), 409, "sandbox_ttl_infinite")
}

// The client's mistakes about paths are 4xx, never ship_error: paths and names longer than the
// file system allows (checked by bay), what ship refuses as the client's fault (any 4xx, its
// code kept where bay has it), and an upload body that ends early.
func TestClientMistakesAreNot502(t *testing.T) {
	h := newHarness(t)
	id := h.sandbox("alice")
	p := "/v1/sandboxes/" + id + "/filesystem"
	longPath := strings.Repeat("a/", 2100) + "f" // 4201 characters
	longName := strings.Repeat("n", 256)
	h.expect(h.do("GET", p+"/files?path="+longPath, "alice", nil), 400, "invalid_path")
	h.expect(h.do("GET", p+"/download?path="+longName, "alice", nil), 400, "invalid_path")
	h.expect(h.do("PUT", p+"/files", "alice", `{"path":"`+longName+`","content":"x"}`), 400, "invalid_path")
	upload := func(path string, body []byte, contentType string) resp {
		return h.do("POST", p+"/upload?path="+path, "alice", body, "Content-Type", contentType)
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "f.bin")
	fw.Write([]byte("data"))
	mw.Close()
	h.expect(upload(longPath, buf.Bytes(), mw.FormDataContentType()), 400, "invalid_path")
	form, ct := mustForm(t, [2]string{"path", longPath}, [2]string{"file", "x"})
	h.expect(h.do("POST", p+"/upload", "alice", form, "Content-Type", ct), 400, "invalid_path")
	// A multipart body cut inside the file part (no closing boundary).
	cut := buf.Bytes()[:bytes.Index(buf.Bytes(), []byte("data"))+2]
	r := upload("t.bin", cut, mw.FormDataContentType())
	if r.status != 400 && r.status != 422 {
		t.Fatalf("truncated upload: %d %s", r.status, r.body)
	}

	// Ship's 4xx answers, as the runtime gives them.
	var mu sync.Mutex
	var status int
	var code string
	h.ship.Fault = func(*http.Request) (int, string, string, bool) {
		mu.Lock()
		defer mu.Unlock()
		return status, code, "ship says no", status != 0
	}
	for _, c := range []struct {
		status             int
		shipCode, bayCode  string
		wantStatus         int
		method, path, body string
	}{
		{400, shipapi.CodeIsDirectory, bayapi.CodeIsADirectory, 400, "GET", p + "/files?path=.", ""},
		{400, shipapi.CodeIsDirectory, bayapi.CodeIsADirectory, 400, "GET", p + "/download?path=d", ""},
		{400, shipapi.CodeIsDirectory, bayapi.CodeIsADirectory, 400, "PUT", p + "/files", `{"path":"d","content":"x"}`},
		{400, shipapi.CodeNotDirectory, bayapi.CodeNotADirectory, 400, "GET", p + "/directories?path=f.txt", ""},
		{400, shipapi.CodeInvalidUTF8, bayapi.CodeValidation, 400, "GET", p + "/files?path=bin", ""},
		{400, "name_too_long", bayapi.CodeValidation, 400, "GET", p + "/files?path=x", ""},
		{400, "invalid_path", bayapi.CodeInvalidPath, 400, "GET", p + "/files?path=x", ""},
		{413, shipapi.CodeTooLarge, bayapi.CodePayloadTooLarge, 413, "PUT", p + "/files", `{"path":"big","content":"x"}`},
		{400, shipapi.CodeBadRequest, bayapi.CodeValidation, 400, "POST", "/v1/sandboxes/" + id + "/shell/exec", `{"command":"x"}`},
		{401, shipapi.CodeUnauthorized, bayapi.CodeShipError, 502, "GET", p + "/files?path=x", ""},
		{500, shipapi.CodeInternal, bayapi.CodeShipError, 502, "GET", p + "/files?path=x", ""},
	} {
		mu.Lock()
		status, code = c.status, c.shipCode
		mu.Unlock()
		var body any
		if c.body != "" {
			body = c.body
		}
		r := h.do(c.method, c.path, "alice", body)
		if r.status != c.wantStatus || r.errCode(t) != c.bayCode {
			t.Errorf("ship %d %s on %s %s: %d %s", c.status, c.shipCode, c.method, c.path, r.status, r.body)
		}
	}
}

// mustForm encodes a multipart form: a part named "file" is a file part, others are fields.
func mustForm(t *testing.T, parts ...[2]string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, pt := range parts {
		if pt[0] == "file" {
			fw, err := mw.CreateFormFile("file", "data.bin")
			if err == nil {
				_, err = fw.Write([]byte(pt[1]))
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := mw.WriteField(pt[0], pt[1]); err != nil {
			t.Fatal(err)
		}
	}
	mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// A client that cancels its own request is not an error of bay: logged at info with its
// request id and status 499.
func TestClientCancelIsNotAnError(t *testing.T) {
	var logs testenv.LogBuffer
	h := newHarnessWith(t, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	id := h.sandbox("alice")
	started := make(chan struct{}, 1)
	h.ship.Block = func(r *http.Request) {
		started <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+"/v1/sandboxes/"+id+"/shell/exec", strings.NewReader(`{"command":"sleep 60"}`))
	req.Header.Set("Authorization", "Bearer alice-key")
	req.Header.Set("X-Request-Id", "cancelled-1")
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "request cancelled by the client") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	out := logs.String()
	if !strings.Contains(out, `level=INFO msg="request cancelled by the client" component=httpapi request_id=cancelled-1`) || !strings.Contains(out, "status=499") {
		t.Fatalf("no info line with the request id and 499:\n%s", out)
	}
	if strings.Contains(out, "level=ERROR") {
		t.Fatalf("a client's cancel logged as an error:\n%s", out)
	}
}

// Ship's truncation flags of a shell call reach bay's answer (old fields unchanged), and the
// OpenAPI document describes them and the bounds the handlers enforce.
func TestTruncationFlagsAndDocumentedBounds(t *testing.T) {
	h := newHarness(t)
	id := h.sandbox("alice")
	h.ship.Shell = func(req shipapi.ExecShellRequest) (int, any) {
		return 200, shipapi.ExecShellResponse{Success: true, Stdout: "head\n", Stderr: "err\n", StdoutTruncated: req.Command == "both", StderrTruncated: true}
	}
	for cmd, wantOut := range map[string]bool{"both": true, "one": false} {
		r := h.do("POST", "/v1/sandboxes/"+id+"/shell/exec", "alice", `{"command":"`+cmd+`"}`)
		h.expect(r, 200, "")
		m := r.json(t)
		if m["stdout_truncated"] != wantOut || m["stderr_truncated"] != true || m["output"] != "head" || m["error"] != "err" || m["exit_code"] != float64(0) {
			t.Errorf("%s: %s", cmd, r.body)
		}
	}

	r := h.do("GET", "/openapi.json", "", nil)
	h.expect(r, 200, "")
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]map[string]any `json:"properties"`
				Required   []string                  `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	shell := doc.Components.Schemas["ShellExecResponse"]
	for _, f := range []string{"stdout_truncated", "stderr_truncated"} {
		p := shell.Properties[f]
		if p["type"] != "boolean" || p["description"] == nil || !slices.Contains(shell.Required, f) {
			t.Errorf("ShellExecResponse.%s = %v (required %v)", f, p, shell.Required)
		}
	}
	for _, c := range []struct {
		schema, field, key string
		want               int
	}{
		{"CreateSandboxRequest", "ttl", "maximum", bayapi.MaxTTL},
		{"CreateSandboxRequest", "profile", "maxLength", bayapi.MaxProfileLen},
		{"CreateSandboxRequest", "cargo_id", "maxLength", bayapi.MaxIDLen},
		{"ExtendTTLRequest", "extend_by", "maximum", bayapi.MaxTTL},
		{"ExtendTTLRequest", "extend_by", "minimum", 1},
		{"PythonExecRequest", "timeout", "maximum", bayapi.MaxExecTimeout},
		{"ShellExecRequest", "timeout", "maximum", bayapi.MaxExecTimeout},
		{"ShellExecRequest", "cwd", "maxLength", bayapi.MaxPathLen},
		{"ShellExecRequest", "description", "maxLength", bayapi.MaxDescriptionLen},
		{"PythonExecRequest", "tags", "maxLength", bayapi.MaxTagsLen},
		{"AnnotateExecutionRequest", "notes", "maxLength", bayapi.MaxNotesLen},
		{"AnnotateExecutionRequest", "description", "maxLength", bayapi.MaxDescriptionLen},
		{"CreateCargoRequest", "size_limit_mb", "maximum", 65536},
	} {
		if got := doc.Components.Schemas[c.schema].Properties[c.field][c.key]; got != float64(c.want) {
			t.Errorf("%s.%s %s = %v, want %d", c.schema, c.field, c.key, got, c.want)
		}
	}
}
