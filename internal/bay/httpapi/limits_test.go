package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox/sandboxtest"
)

// limitsHarness serves a sandbox under small limits: timeouts 5 s by default, at most 20 s;
// 8 bytes of stdout and of stderr; 16 bytes in one file written or uploaded, 1024 in a
// request body; 32 bytes in one file read or downloaded, 40 in a python answer.
func limitsHarness(t *testing.T) (*harness, string) {
	t.Helper()
	l := bay.CallLimits{DefaultTimeout: 5, MaxTimeout: 20, IOCaps: bay.IOCaps{MaxStdoutBytes: 8, MaxStderrBytes: 8,
		MaxInputBytes: 16, MaxInputsBytesTotal: 1024, MaxOutputBytes: 32, MaxOutputsBytesTotal: 40}}
	h := newHarnessOpts(t, nil, sandboxtest.Options{Capability: capability.Config{Limits: l}})
	return h, "/v1/sandboxes/" + h.sandbox("alice")
}

// limitMessage checks a refusal's envelope: its code, and a message naming the setting and
// the value.
func limitMessage(t *testing.T, r resp, status int, code string, subs ...string) {
	t.Helper()
	if r.status != status || r.errCode(t) != code {
		t.Fatalf("status %d, want %d %s: %s", r.status, status, code, r.body)
	}
	var env bayapi.ErrorEnvelope
	_ = json.Unmarshal(r.body, &env)
	for _, s := range subs {
		if !strings.Contains(env.Error.Message, s) {
			t.Errorf("message %q does not name %q", env.Error.Message, s)
		}
	}
}

// TestExecTimeoutLimits: the configured default reaches the runtime, the configured ceiling
// bounds what a request may ask (at it: accepted; past it, however far: 422 naming it).
func TestExecTimeoutLimits(t *testing.T) {
	h, sb := limitsHarness(t)
	var asked []int
	h.ship.Shell = func(req shipapi.ExecShellRequest) (int, any) {
		asked = append(asked, *req.Timeout)
		return 200, shipapi.ExecShellResponse{Success: true}
	}
	var pyAsked []int
	h.ship.Python = func(req shipapi.ExecPythonRequest) (int, any) {
		pyAsked = append(pyAsked, req.Timeout)
		return 200, shipapi.ExecPythonResponse{Success: true}
	}
	for _, c := range []struct {
		name, path, body string
		status           int
		typ              string
	}{
		{"shell default", "/shell/exec", `{"command":"true"}`, 200, ""},
		{"shell at the ceiling", "/shell/exec", `{"command":"true","timeout":20}`, 200, ""},
		{"shell one", "/shell/exec", `{"command":"true","timeout":1}`, 200, ""},
		{"shell past the ceiling", "/shell/exec", `{"command":"true","timeout":21}`, 422, "less_than_equal"},
		{"shell contract max past the ceiling", "/shell/exec", `{"command":"true","timeout":300}`, 422, "less_than_equal"},
		{"shell int64 max", "/shell/exec", `{"command":"true","timeout":9223372036854775807}`, 422, "less_than_equal"},
		{"shell past int64", "/shell/exec", `{"command":"true","timeout":92233720368547758070}`, 422, "int_parsing"},
		{"shell zero", "/shell/exec", `{"command":"true","timeout":0}`, 422, "greater_than_equal"},
		{"python default", "/python/exec", `{"code":"1"}`, 200, ""},
		{"python at the ceiling", "/python/exec", `{"code":"1","timeout":"20"}`, 200, ""},
		{"python past the ceiling", "/python/exec", `{"code":"1","timeout":21}`, 422, "less_than_equal"},
		{"python negative", "/python/exec", `{"code":"1","timeout":-9223372036854775808}`, 422, "greater_than_equal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.do("POST", sb+c.path, "alice", c.body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if c.typ == "" {
				return
			}
			if typ, loc := detail(t, r); typ != c.typ || loc != `["body","timeout"]` {
				t.Fatalf("issue %s %s, want %s", typ, loc, c.typ)
			}
			if c.typ == "less_than_equal" {
				limitMessage(t, r, 422, bayapi.CodeValidation, "limits.timeout_sec_max", "20")
			}
		})
	}
	if want := []int{5, 20, 1}; !equalInts(asked, want) {
		t.Errorf("shell timeouts sent %v, want %v", asked, want)
	}
	if want := []int{5, 20}; !equalInts(pyAsked, want) {
		t.Errorf("python timeouts sent %v, want %v", pyAsked, want)
	}
	// The body carrying code or a command is bounded by total_input_max_bytes (1024).
	for _, path := range []string{"/python/exec", "/shell/exec"} {
		big := `{"code":"` + strings.Repeat("x", 1024) + `","command":"x"}`
		limitMessage(t, h.do("POST", sb+path, "alice", big), 413, bayapi.CodePayloadTooLarge, "limits.total_input_max_bytes", "1024")
	}
	// The OpenAPI document states the configured bounds.
	var doc map[string]any
	h.expect(h.do("GET", "/openapi.json", "", nil), 200, "")
	_ = json.Unmarshal(h.do("GET", "/openapi.json", "", nil).body, &doc)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for _, name := range []string{"PythonExecRequest", "ShellExecRequest"} {
		tm := schemas[name].(map[string]any)["properties"].(map[string]any)["timeout"].(map[string]any)
		if tm["maximum"] != float64(20) || tm["minimum"] != float64(1) || tm["default"] != float64(5) {
			t.Errorf("%s.timeout in the OpenAPI document: %v", name, tm)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestOutputCaps: stdout and stderr are cut at their caps (never inside a character) with the
// flags set, and the history keeps the cut output; python images past the answer's total are
// dropped.
func TestOutputCaps(t *testing.T) {
	h, sb := limitsHarness(t)
	var stdout, stderr string
	h.ship.Shell = func(shipapi.ExecShellRequest) (int, any) {
		return 200, shipapi.ExecShellResponse{Success: true, Stdout: stdout, Stderr: stderr}
	}
	for _, c := range []struct {
		name, stdout, stderr, output, error string
		outCut, errCut                      bool
	}{
		{"under", "1234567", "abc", "1234567", "abc", false, false},
		{"at the caps", "12345678", "abcdefgh", "12345678", "abcdefgh", false, false},
		{"one over", "123456789", "abcdefghi", "12345678", "abcdefgh", true, true},
		{"a character across the cap", "1234567é", "", "1234567", "", true, false},
		{"far over", strings.Repeat("x", 1<<20), strings.Repeat("y", 1<<20), "xxxxxxxx", "yyyyyyyy", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr = c.stdout, c.stderr
			r := h.do("POST", sb+"/shell/exec", "alice", `{"command":"x"}`)
			h.expect(r, 200, "")
			var got bayapi.ShellExecResponse
			_ = json.Unmarshal(r.body, &got)
			gotErr := ""
			if got.Error != nil {
				gotErr = *got.Error
			}
			if got.Output != c.output || gotErr != c.error || got.StdoutTruncated != c.outCut || got.StderrTruncated != c.errCut {
				t.Fatalf("output %q error %q truncated %v/%v, want %q %q %v/%v", got.Output, gotErr, got.StdoutTruncated, got.StderrTruncated,
					c.output, c.error, c.outCut, c.errCut)
			}
			rec := h.do("GET", sb+"/history/"+got.ExecutionID, "alice", nil)
			if out, _ := rec.json(t)["output"].(string); out != c.output {
				t.Fatalf("history output %q, want %q", out, c.output)
			}
		})
	}

	img := func(n int) map[string]string { return map[string]string{"image/png": strings.Repeat("A", n)} }
	h.ship.Python = func(shipapi.ExecPythonRequest) (int, any) {
		e := "Traceback: boom"
		// text 8 + error 8 after the cuts; images of 10, 10 and 10: the third passes 40.
		return 200, shipapi.ExecPythonResponse{Success: false, Error: &e,
			Output: shipapi.PythonOutput{Text: "0123456789", Images: []map[string]string{img(10), img(10), img(10)}}}
	}
	r := h.do("POST", sb+"/python/exec", "alice", `{"code":"x"}`)
	h.expect(r, 200, "")
	var py bayapi.PythonExecResponse
	_ = json.Unmarshal(r.body, &py)
	if py.Output != "01234567" || !py.OutputTruncated || py.Error == nil || *py.Error != "Tracebac" || !py.ErrorTruncated ||
		len(py.Data.Output.Images) != 2 || !py.ImagesTruncated {
		t.Fatalf("python answer: %s", r.body)
	}
	rec := h.do("GET", sb+"/history/"+py.ExecutionID, "alice", nil).json(t)
	if rec["output"] != "01234567" || rec["error"] != "Tracebac" {
		t.Fatalf("python history keeps %v / %v, want the cut output and error", rec["output"], rec["error"])
	}
}

// TestFileSizeLimits: a write, an upload, a read and a download each at their cap pass and
// one byte over is 413 naming the setting and the size; a refused write or upload leaves the
// file as it was.
func TestFileSizeLimits(t *testing.T) {
	h, sb := limitsHarness(t)
	fs := sb + "/filesystem"
	write := func(content string) resp {
		b, _ := json.Marshal(map[string]string{"path": "w.txt", "content": content})
		return h.do("PUT", fs+"/files", "alice", b)
	}
	h.expect(write(strings.Repeat("a", 16)), 200, "")
	limitMessage(t, write(strings.Repeat("b", 17)), 413, bayapi.CodePayloadTooLarge, "limits.input_max_bytes", "16", "17 bytes")
	limitMessage(t, write(strings.Repeat("é", 9)), 413, bayapi.CodePayloadTooLarge, "18 bytes") // bytes, not characters
	// A body past total_input_max_bytes (1024; JSON escaping counts) is refused before it is decoded.
	limitMessage(t, write(strings.Repeat("\x01", 200)), 413, bayapi.CodePayloadTooLarge, "limits.total_input_max_bytes", "1024")
	if b, _ := h.ship.File("w.txt"); string(b) != strings.Repeat("a", 16) {
		t.Fatalf("the file after refused writes: %q", b)
	}

	upload := func(name string, size int) resp {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		mw.WriteField("path", name)
		fw, _ := mw.CreateFormFile("file", "data.bin")
		fw.Write(bytes.Repeat([]byte("u"), size))
		mw.Close()
		return h.do("POST", fs+"/upload", "alice", buf.Bytes(), "Content-Type", mw.FormDataContentType())
	}
	h.expect(upload("u.bin", 16), 200, "")
	limitMessage(t, upload("u.bin", 17), 413, bayapi.CodePayloadTooLarge, "upload", "limits.input_max_bytes", "16")
	limitMessage(t, upload("u.bin", 4096), 413, bayapi.CodePayloadTooLarge, "limits.total_input_max_bytes", "1024")
	// A body without a length is counted as it streams: past 1024 bytes (here in a field bay
	// skips) it is refused too.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("junk", strings.Repeat("j", 4096))
	mw.WriteField("path", "u.bin")
	fw, _ := mw.CreateFormFile("file", "data.bin")
	fw.Write([]byte("c"))
	mw.Close()
	req, _ := http.NewRequest("POST", h.srv.URL+fs+"/upload", io.MultiReader(&buf)) // no length: chunked
	req.Header.Set("Authorization", "Bearer alice-key")
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	limitMessage(t, resp{status: res.StatusCode, header: res.Header, body: raw}, 413, bayapi.CodePayloadTooLarge, "limits.total_input_max_bytes", "1024")
	if b, _ := h.ship.File("u.bin"); len(b) != 16 {
		t.Fatalf("the upload after refused ones: %d bytes", len(b))
	}

	h.ship.SetFile("r32.txt", bytes.Repeat([]byte("r"), 32))
	h.ship.SetFile("r33.txt", bytes.Repeat([]byte("r"), 33))
	h.expect(h.do("GET", fs+"/files?path=r32.txt", "alice", nil), 200, "")
	limitMessage(t, h.do("GET", fs+"/files?path=r33.txt", "alice", nil), 413, bayapi.CodePayloadTooLarge,
		"file r33.txt is 33 bytes", "limits.output_max_bytes", "32")
	if r := h.do("GET", fs+"/download?path=r32.txt", "alice", nil); r.status != 200 || len(r.body) != 32 {
		t.Fatalf("download at the cap: %d %d bytes", r.status, len(r.body))
	}
	limitMessage(t, h.do("GET", fs+"/download?path=r33.txt", "alice", nil), 413, bayapi.CodePayloadTooLarge,
		"file r33.txt is 33 bytes", "limits.output_max_bytes")

	// A download whose size the runtime does not announce (a chunked answer) is cut at the
	// cap and the connection reset: the client never receives it as whole.
	h.ship.SetFile("big.bin", bytes.Repeat([]byte("z"), 64<<10))
	req, _ = http.NewRequest("GET", h.srv.URL+fs+"/download?path=big.bin", nil)
	req.Header.Set("Authorization", "Bearer alice-key")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		return // reset before the headers: nothing taken for a file
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err == nil || len(body) > 32 {
		t.Fatalf("unannounced download past the cap: %d bytes, err %v (want a broken answer of at most 32 bytes)", len(body), err)
	}
}
