package httpapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// The document names, per operation, the error statuses and codes it answers with, and
// describes timestamps as they are on the wire (no offset, so not format date-time). Real
// error answers are held to it.
func TestOpenAPIErrorsAndTimestamps(t *testing.T) {
	h := newHarness(t)
	h.api.Mount(bayapi.PathMCP, http.NotFoundHandler(), true)
	var doc struct {
		Paths      map[string]map[string]struct{ Responses map[string]json.RawMessage } `json:"paths"`
		Components struct{ Schemas map[string]json.RawMessage }                         `json:"components"`
	}
	if err := json.Unmarshal(h.do("GET", "/openapi.json", "", nil).body, &doc); err != nil {
		t.Fatal(err)
	}
	codesOf := func(path, method, status string) []string {
		raw, ok := doc.Paths[path][method].Responses[status]
		if !ok {
			return nil
		}
		var r struct {
			Content map[string]struct {
				Schema struct {
					AllOf []struct {
						Properties struct {
							Error struct {
								Properties struct{ Code struct{ Enum []string } }
							}
						}
					}
				}
			}
		}
		_ = json.Unmarshal(raw, &r)
		for _, a := range r.Content["application/json"].Schema.AllOf {
			if e := a.Properties.Error.Properties.Code.Enum; len(e) > 0 {
				return e
			}
		}
		return []string{}
	}
	for _, c := range []struct{ path, method, status, code string }{
		{bayapi.PathSandboxes, "post", "401", bayapi.CodeUnauthorized},
		{bayapi.PathSandboxes, "post", "422", bayapi.CodeValidation},
		{bayapi.PathSandboxes, "post", "400", bayapi.CodeValidation},
		{bayapi.PathSandboxes, "post", "409", bayapi.CodeConflict},
		{bayapi.PathSandboxes, "post", "500", bayapi.CodeInternal},
		{bayapi.PathPythonExec, "post", "503", bayapi.CodeSessionNotReady},
		{bayapi.PathPythonExec, "post", "409", bayapi.CodeSandboxExpired},
		{bayapi.PathPythonExec, "post", "502", bayapi.CodeShipError},
		{bayapi.PathFiles, "get", "404", bayapi.CodeFileNotFound},
		{bayapi.PathFiles, "get", "400", bayapi.CodeInvalidPath},
		{bayapi.PathUpload, "post", "413", bayapi.CodePayloadTooLarge},
		{bayapi.PathExtendTTL, "post", "409", bayapi.CodeSandboxTTLInfinite},
		{bayapi.PathGCRun, "post", "423", bayapi.CodeGCRunning},
		{bayapi.PathReady, "get", "503", bayapi.CodeUnavailable},
	} {
		if codes := codesOf(c.path, c.method, c.status); !slices.Contains(codes, c.code) {
			t.Errorf("%s %s %s: codes %v, want %s", c.method, c.path, c.status, codes, c.code)
		}
	}
	if _, ok := doc.Paths[bayapi.PathHealth]["get"].Responses["401"]; ok {
		t.Error("/health needs no key, yet documents 401")
	}
	if _, ok := doc.Paths[bayapi.PathMCP]["post"]; !ok {
		t.Error("the mounted MCP server is not documented")
	}

	var sb struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	_ = json.Unmarshal(doc.Components.Schemas["SandboxResponse"], &sb)
	created := sb.Properties["created_at"]
	if created["format"] != nil || created["pattern"] == nil {
		t.Errorf("created_at schema %v: want a pattern and no format date-time", created)
	}

	// Real refusals carry a documented status and code.
	id := h.sandbox("alice")
	for _, c := range []struct {
		method, path, pathDoc, owner string
		body                         any
	}{
		{"POST", "/v1/sandboxes", bayapi.PathSandboxes, "", "{}"},
		{"POST", "/v1/sandboxes", bayapi.PathSandboxes, "alice", `{"ttl":"x"}`},
		{"POST", "/v1/sandboxes", bayapi.PathSandboxes, "alice", `{"profile":"nope"}`},
		{"GET", "/v1/sandboxes/sandbox-000000000000", bayapi.PathSandbox, "alice", nil},
		{"GET", "/v1/sandboxes/" + id + "/filesystem/files?path=../x", bayapi.PathFiles, "alice", nil},
		{"POST", "/v1/sandboxes/" + id + "/python/exec", bayapi.PathPythonExec, "alice", `{}`},
	} {
		r := h.do(c.method, c.path, c.owner, c.body)
		var env bayapi.ErrorEnvelope
		if err := json.Unmarshal(r.body, &env); err != nil || env.Error.Code == "" {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
		status := http.StatusText(r.status)
		if codes := codesOf(c.pathDoc, map[string]string{"GET": "get", "POST": "post"}[c.method], itoa(r.status)); !slices.Contains(codes, env.Error.Code) {
			t.Errorf("%s %s answered %d (%s) %s, which the document does not list (%v)", c.method, c.path, r.status, status, env.Error.Code, codes)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
