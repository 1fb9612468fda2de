package e2e

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPOverBayHTTP drives bay's /mcp (streamable HTTP) with the official MCP client: the
// same API key as the REST API, the reference tool names, text and image results, tool errors
// with the wire code.
func TestMCPOverBayHTTP(t *testing.T) {
	t.Parallel()
	docker(t)
	b := startBay(t, bayOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	connect := func(token string) *mcpsdk.ClientSession {
		c := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "e2e", Version: "1"}, nil)
		s, err := c.Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: b.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{token}}}, nil)
		if err != nil {
			t.Fatalf("mcp connect: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := connect(apiKey)
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	for _, want := range []string{"create_sandbox", "delete_sandbox", "execute_python", "execute_shell", "read_file", "write_file", "list_files", "delete_file", "get_execution_history", "get_execution", "get_last_execution", "annotate_execution", "list_profiles"} {
		if !names[want] {
			t.Fatalf("tool %s missing from tools/list", want)
		}
	}
	call := func(s *mcpsdk.ClientSession, name string, args map[string]any) (string, *mcpsdk.CallToolResult) {
		t.Helper()
		res, err := s.CallTool(ctx, &mcpsdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var texts []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcpsdk.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		return strings.Join(texts, "\n"), res
	}
	text, res := call(s, "create_sandbox", map[string]any{"ttl": 600})
	id := regexp.MustCompile(`sandbox-[0-9a-f]{12}`).FindString(text)
	if res.IsError || id == "" {
		t.Fatalf("create_sandbox: %s", text)
	}
	b.mu.Lock()
	b.created = append(b.created, id)
	b.mu.Unlock()

	text, res = call(s, "execute_python", map[string]any{"sandbox_id": id, "code": "import matplotlib.pyplot as plt\nplt.plot([1,2,3])\nplt.show()\nprint(6*7)"})
	if res.IsError || !strings.Contains(text, "42") {
		t.Fatalf("execute_python: %s", text)
	}
	var sawImage bool
	for _, c := range res.Content {
		if ic, ok := c.(*mcpsdk.ImageContent); ok && ic.MIMEType == "image/png" && len(ic.Data) > 100 {
			sawImage = true
		}
	}
	if !sawImage {
		t.Fatal("a matplotlib figure must come back as MCP image content")
	}
	if text, res = call(s, "execute_shell", map[string]any{"sandbox_id": id, "command": "whoami"}); res.IsError || !strings.Contains(text, "shipyard") {
		t.Fatalf("execute_shell: %s", text)
	}
	if text, res = call(s, "read_file", map[string]any{"sandbox_id": id, "path": "missing.txt"}); !res.IsError || !strings.Contains(text, "file_not_found") {
		t.Fatalf("read_file of a missing file must be a tool error with the wire code: %s", text)
	}
	if text, res = call(s, "delete_sandbox", map[string]any{"sandbox_id": id}); res.IsError {
		t.Fatalf("delete_sandbox: %s", text)
	}

	// A wrong key gets no further than the REST API would: /mcp sits behind the same auth.
	c := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "e2e", Version: "1"}, nil)
	_, err = c.Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: b.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{"sk-wrong"}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("a wrong key must be refused at initialize, got %v", err)
	}
}
