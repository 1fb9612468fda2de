package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The limits of the ordinary sandbox calls against the real engine, through the bay binary:
// small values so that every limit is reached quickly.
const limitsConfig = `limits:
  timeout_sec_default: 2
  timeout_sec_max: 5
  stdout_max_bytes: 1k
  stderr_max_bytes: 512
  input_max_bytes: 64k
  total_input_max_bytes: 1m
  output_max_bytes: 128k
  total_output_max_bytes: 1m
`

// expectLimit checks a refusal: its status, code and request id, and a message naming the
// setting and its value.
func expectLimit(t *testing.T, r Response, status int, code, what string, names ...string) {
	t.Helper()
	expectError(t, r, status, code, what)
	for _, n := range names {
		if !strings.Contains(r.Str("error.message"), n) {
			t.Errorf("%s: message %q does not name %q", what, r.Str("error.message"), n)
		}
	}
}

func TestLimits(t *testing.T) {
	b := startBay(t, bayOptions{extraConfig: limitsConfig})
	id := b.create(nil, nil).Str("id")
	base := "/v1/sandboxes/" + id
	exec := func(kind string, body map[string]any) Response {
		return b.do("POST", base+"/"+kind+"/exec", body, nil)
	}
	// sh runs a command within the 5 s ceiling (the harness's helpers ask 120 s).
	sh := func(command string) string {
		t.Helper()
		r := expect(t, exec("shell", map[string]any{"command": command, "timeout": 5}), 200, command)
		if r.Get("success") != true {
			t.Fatalf("shell %q: %s", command, r)
		}
		return r.Str("output")
	}

	t.Run("timeout default", func(t *testing.T) {
		start := time.Now()
		r := expect(t, exec("shell", map[string]any{"command": "sleep 8; echo late"}), 200, "shell without a timeout")
		if r.Get("success") != false || r.Get("exit_code") != float64(-1) || strings.Contains(r.Str("output"), "late") {
			t.Fatalf("shell past the default timeout: %s", r)
		}
		if el := time.Since(start); el > 7*time.Second {
			t.Fatalf("shell without a timeout took %v, want about the 2 s default", el)
		}
		start = time.Now()
		r = expect(t, exec("python", map[string]any{"code": "import time\ntime.sleep(8)\nprint('late')"}), 200, "python without a timeout")
		if r.Get("success") != false || !strings.Contains(r.Str("error"), "timed out") {
			t.Fatalf("python past the default timeout: %s", r)
		}
		if el := time.Since(start); el > 7*time.Second {
			t.Fatalf("python without a timeout took %v, want about the 2 s default", el)
		}
	})

	t.Run("timeout ceiling", func(t *testing.T) {
		r := expect(t, exec("shell", map[string]any{"command": "sleep 3; echo done", "timeout": 5}), 200, "shell at the ceiling")
		if r.Get("success") != true || r.Str("output") != "done" {
			t.Fatalf("shell at the ceiling, past the default: %s", r)
		}
		for _, kind := range []string{"shell", "python"} {
			for _, timeout := range []any{6, 300, "9223372036854775807"} {
				body := map[string]any{"command": "true", "code": "1", "timeout": timeout}
				expectLimit(t, exec(kind, body), 422, "validation_error", fmt.Sprintf("%s timeout %v", kind, timeout), "limits.timeout_sec_max", "5")
			}
		}
		var doc map[string]any
		if err := json.Unmarshal(expect(t, b.do("GET", "/openapi.json", nil, nil), 200, "openapi").Body, &doc); err != nil {
			t.Fatal(err)
		}
		schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
		for _, name := range []string{"PythonExecRequest", "ShellExecRequest"} {
			tm := schemas[name].(map[string]any)["properties"].(map[string]any)["timeout"].(map[string]any)
			if tm["maximum"] != float64(5) || tm["minimum"] != float64(1) || tm["default"] != float64(2) {
				t.Errorf("%s.timeout in the OpenAPI document: %v", name, tm)
			}
		}
	})

	t.Run("truncation", func(t *testing.T) {
		r := expect(t, exec("shell", map[string]any{"command": "head -c 5000 /dev/zero | tr '\\0' x; head -c 3000 /dev/zero | tr '\\0' y >&2"}), 200, "shell output")
		if len(r.Str("output")) != 1024 || r.Get("stdout_truncated") != true || len(r.Str("error")) != 512 || r.Get("stderr_truncated") != true {
			t.Fatalf("shell output %d bytes (truncated %v), error %d bytes (truncated %v)",
				len(r.Str("output")), r.Get("stdout_truncated"), len(r.Str("error")), r.Get("stderr_truncated"))
		}
		h := expect(t, b.do("GET", base+"/history/"+r.Str("execution_id"), nil, nil), 200, "history")
		if len(h.Str("output")) != 1024 {
			t.Fatalf("history keeps %d bytes of output, want the 1024 returned", len(h.Str("output")))
		}
		r = expect(t, exec("shell", map[string]any{"command": "head -c 1024 /dev/zero | tr '\\0' x"}), 200, "shell output at the cap")
		if len(r.Str("output")) != 1024 || r.Get("stdout_truncated") != false {
			t.Fatalf("shell output at the cap: %d bytes, truncated %v", len(r.Str("output")), r.Get("stdout_truncated"))
		}
		r = expect(t, exec("python", map[string]any{"code": "print('é' * 3000)\nraise ValueError('z' * 3000)"}), 200, "python output")
		out := r.Str("output")
		if len(out) > 1024 || len(out) < 1022 || strings.Trim(out, "é") != "" || r.Get("output_truncated") != true ||
			len(r.Str("error")) > 512 || r.Get("error_truncated") != true {
			t.Fatalf("python output %d bytes (truncated %v), error %d bytes (truncated %v)",
				len(out), r.Get("output_truncated"), len(r.Str("error")), r.Get("error_truncated"))
		}
	})

	t.Run("write and upload too big", func(t *testing.T) {
		b.writeFile(id, "in/w.txt", "kept")
		big := strings.Repeat("w", 64<<10+1)
		expectLimit(t, b.do("PUT", base+"/filesystem/files", map[string]any{"path": "in/w.txt", "content": big}, nil),
			413, "payload_too_large", "write past the cap", "limits.input_max_bytes", "65536", "65537")
		b.writeFile(id, "in/at.txt", big[:64<<10])
		expectLimit(t, exec("python", map[string]any{"code": "#" + strings.Repeat("c", 1<<20)}), 413, "payload_too_large",
			"code past the body cap", "limits.total_input_max_bytes", "1048576")
		if got := b.readFile(id, "in/w.txt"); got != "kept" {
			t.Fatalf("the file after a refused write: %q", got)
		}
		expect(t, b.upload(id, "in/u.bin", []byte("kept")), 200, "upload")
		expectLimit(t, b.upload(id, "in/u.bin", []byte(big)), 413, "payload_too_large", "upload past the cap", "limits.input_max_bytes", "65536")
		expectLimit(t, b.upload(id, "in/u.bin", []byte(strings.Repeat("w", 2<<20))), 413, "payload_too_large", "upload past the body cap", "65536")
		expect(t, b.upload(id, "in/at.bin", []byte(big[:64<<10])), 200, "upload at the cap")
		if got := b.readFile(id, "in/u.bin"); got != "kept" {
			t.Fatalf("the file after refused uploads: %q", got)
		}
		// The runtime removes the temporary file of a refused upload as its request breaks.
		deadline := time.Now().Add(10 * time.Second)
		for {
			left := sh("ls -A in | grep -c '^\\.ship-upload' || true")
			if left == "0" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("temporary files of refused uploads left: %s", sh("ls -A in"))
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("read and download too big", func(t *testing.T) {
		sh("mkdir -p out && head -c 131072 /dev/zero | tr '\\0' r > out/at.txt && head -c 131073 /dev/zero | tr '\\0' r > out/over.txt")
		if got := b.readFile(id, "out/at.txt"); len(got) != 131072 {
			t.Fatalf("read at the cap: %d bytes", len(got))
		}
		expectLimit(t, b.do("GET", base+"/filesystem/files?path="+url.QueryEscape("out/over.txt"), nil, nil), 413, "payload_too_large",
			"read past the cap", "limits.output_max_bytes", "131072", "131073")
		if r := expect(t, b.download(id, "out/at.txt"), 200, "download at the cap"); len(r.Body) != 131072 {
			t.Fatalf("download at the cap: %d bytes", len(r.Body))
		}
		expectLimit(t, b.download(id, "out/over.txt"), 413, "payload_too_large", "download past the cap", "limits.output_max_bytes", "131073")
	})
}
