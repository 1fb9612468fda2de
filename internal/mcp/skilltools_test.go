package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/mcp"
	"github.com/shipyard-dev/shipyard/sdk"
)

// skillBay answers GET /v1/skills from a mutable list and POST /v1/skills/{name}/invoke with a
// canned invocation, keeping the inputs it was given.
type skillBay struct {
	mu     sync.Mutex
	skills []bayapi.SkillSummary
	inputs []string
}

func invocable(name, version string) bayapi.SkillSummary {
	return bayapi.SkillSummary{Name: name, Version: version, Kind: bayapi.SkillKindInvocable, Description: "skill " + name,
		Manifest: &bayapi.ManifestSummary{ID: name, Name: name, Inputs: map[string]any{"type": "object", "required": []any{"x"},
			"properties": map[string]any{"x": map[string]any{"type": "integer"}}}}}
}

func (b *skillBay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "GET" && r.URL.Path == bayapi.PathSkills:
		json.NewEncoder(w).Encode(bayapi.SkillList{Items: slices.Clone(b.skills)})
	case r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/invoke"):
		var req bayapi.InvokeSkillRequest
		json.NewDecoder(r.Body).Decode(&req)
		b.inputs = append(b.inputs, req.ProjectID+" "+string(req.Inputs))
		code, valid := 3, false
		json.NewEncoder(w).Encode(bayapi.InvokeSkillResponse{
			Exec:    bayapi.ExecResponse{ExecID: "sbx-exec-1", Status: "failed", ExitCode: &code, ErrorReason: "exit code 3"},
			Outputs: map[string]any{"y": "z"}, OutputsSource: "exec", OutputsValid: &valid,
			OutputsErrors: []bayapi.SchemaViolation{{Pointer: "/y", Message: "got string, want integer"}},
		})
	default:
		http.NotFound(w, r)
	}
}

// TestSkillTools: invocable skills the allow-list admits are tools skill.<id> with
// interface.inputs as their schema (knowledge skills are not); a call sends the arguments as
// inputs in the configured project and answers the outputs as text and structured content;
// the poll of the library adds and removes tools and notifies the session.
func TestSkillTools(t *testing.T) {
	bay := &skillBay{skills: []bayapi.SkillSummary{invocable("a.one", "v1"), invocable("b.two", "v1"),
		{Name: "notes", Kind: bayapi.SkillKindKnowledge, Version: "v1"}}}
	srv := httptest.NewServer(bay)
	defer srv.Close()
	c, _ := sdk.New(srv.URL, "")
	opts := mcp.DefaultOptions()
	opts.AllowedTools = []string{"skill.a.*", "list_profiles"}
	opts.SkillProject = "proj-9"
	opts.SkillsPollInterval = 50 * time.Millisecond
	srvT, cliT := mcpsdk.NewInMemoryTransports()
	ss, err := mcp.NewServer(c, opts).Connect(ctxT(t), srvT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	changed := make(chan struct{}, 8)
	cl := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, &mcpsdk.ClientOptions{
		ToolListChangedHandler: func(_ context.Context, _ *mcpsdk.ToolListChangedRequest) { changed <- struct{}{} },
	})
	s, err := cl.Connect(ctxT(t), cliT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	names := func() string {
		list, err := s.ListTools(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, tl := range list.Tools {
			n = append(n, tl.Name)
			if tl.Name == "skill.a.one" {
				if b, _ := json.Marshal(tl.InputSchema); !strings.Contains(string(b), `"required":["x"]`) {
					t.Errorf("input schema: %s", b)
				}
			}
		}
		slices.Sort(n)
		return strings.Join(n, ",")
	}
	if got := names(); got != "list_profiles,skill.a.one" {
		t.Fatalf("tools: %s", got)
	}
	res, err := s.CallTool(ctxT(t), &mcpsdk.CallToolParams{Name: "skill.a.one", Arguments: map[string]any{"x": 2}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcpsdk.TextContent).Text
	if out, _ := res.StructuredContent.(map[string]any); !res.IsError || out["y"] != "z" ||
		!strings.Contains(text, "failed (exit code 3)") || !strings.Contains(text, "`/y`: got string") {
		t.Fatalf("call: %s %+v", text, res)
	}
	time.Sleep(200 * time.Millisecond) // the notifications of the first sync arrive, then are dropped
	for len(changed) > 0 {
		<-changed
	}
	bay.mu.Lock()
	got := slices.Clone(bay.inputs)
	bay.skills = []bayapi.SkillSummary{invocable("a.two", "v1")}
	bay.mu.Unlock()
	if len(got) != 1 || got[0] != `proj-9 {"x":2}` {
		t.Fatalf("inputs sent: %v", got)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed after the library changed")
	}
	if got := names(); got != "list_profiles,skill.a.two" {
		t.Fatalf("tools after the change: %s", got)
	}
}
