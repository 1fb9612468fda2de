package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay/httpapi"
)

// What net/http refuses before any handler runs (headers too large, a NUL or a bare line
// break in a header, no Host, an unknown transfer coding, a bad protocol version) leaves in
// bay's one envelope with a request id; ordinary requests on the same listener are untouched.
// Spoken over raw TCP, as an attacker would.
func TestRefusalsBeforeRoutingAreEnveloped(t *testing.T) {
	h := newHarness(t)
	srv := httptest.NewUnstartedServer(h.api.Handler())
	srv.Config.MaxHeaderBytes = httpapi.MaxHeaderBytes
	srv.Listener = httpapi.WrapListener(srv.Listener, nil)
	srv.Start()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()

	raw := func(t *testing.T, req string) *http.Response {
		t.Helper()
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		go func() { _, _ = io.WriteString(c, req) }()
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("read response: %v", err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}
	cases := []struct {
		name, req string
		status    int
		code      string
	}{
		{"headers too large", "GET /health HTTP/1.1\r\nHost: bay\r\nX-Big: " + strings.Repeat("a", httpapi.MaxHeaderBytes+8192) + "\r\n\r\n", 431, bayapi.CodeHeadersTooLarge},
		{"many headers", "GET /health HTTP/1.1\r\nHost: bay\r\n" + strings.Repeat("X-H: "+strings.Repeat("b", 100)+"\r\n", 1000) + "\r\n", 431, bayapi.CodeHeadersTooLarge},
		{"nul in a header", "GET /health HTTP/1.1\r\nHost: bay\r\nX-A: a\x00b\r\n\r\n", 400, bayapi.CodeValidation},
		{"nul in a header name", "GET /health HTTP/1.1\r\nHost: bay\r\nX-\x00A: b\r\n\r\n", 400, bayapi.CodeValidation},
		{"no host", "GET /health HTTP/1.1\r\n\r\n", 400, bayapi.CodeValidation},
		{"bad request line", "GARBAGE\r\n\r\n", 400, bayapi.CodeValidation},
		{"unknown transfer coding", "POST /v1/sandboxes HTTP/1.1\r\nHost: bay\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 400, bayapi.CodeValidation},
		{"bad version", "GET /health HTTP/9.9\r\nHost: bay\r\n\r\n", 400, bayapi.CodeValidation},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := raw(t, c.req)
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != c.status || res.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %q: %s", res.StatusCode, res.Header.Get("Content-Type"), body)
			}
			var env bayapi.ErrorEnvelope
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatalf("not an envelope: %q", body)
			}
			if env.Error.Code != c.code || env.Error.Message == "" || env.Error.RequestID == "" || res.Header.Get(bayapi.HeaderRequestID) != env.Error.RequestID {
				t.Fatalf("envelope %+v, header %q", env.Error, res.Header.Get(bayapi.HeaderRequestID))
			}
		})
	}
	// Ordinary requests, two on one connection, pass through as they were.
	res := raw(t, "GET /health HTTP/1.1\r\nHost: bay\r\n\r\n")
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.Contains(string(body), `"status":"ok"`) {
		t.Fatalf("health: %d %s", res.StatusCode, body)
	}
	resp, err := http.Get(srv.URL + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("unrouted: %d", resp.StatusCode)
	}
}
