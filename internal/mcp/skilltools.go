package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

// Invocable skills as tools: every invocable skill of bay's library is the tool
// skill.<id> (skill.shell.run), whose input schema is the manifest's interface.inputs;
// calling it invokes the skill (POST /v1/skills/{id}/invoke, waiting, in the project
// Options.SkillProject) and returns the outputs as text and as structured content.
//
// The tool list follows the library by polling it: every Options.SkillsPollInterval while the
// server has sessions, and before answering tools/list (at most once a second) or a call of a
// skill tool not yet known. A skill added, replaced (a new version) or removed adds, replaces or
// removes its tool, which sends notifications/tools/list_changed to every session. Over stdio
// the poll uses the server's client; over HTTP, the credentials of the latest request (listing
// the library is open to every owner). The allow-list (SHIPYARD_ALLOWED_TOOLS) applies to
// skill tools like any other.

// SkillToolPrefix starts the name of an invocable skill's tool.
const SkillToolPrefix = "skill."

// Defaults of the skill tools.
const (
	DefaultSkillProject       = "mcp"
	DefaultSkillsPollInterval = 10 * time.Second
	minListSync               = time.Second
)

// skillTools are the skill tools registered on one MCP server.
type skillTools struct {
	srv *mcpsdk.Server

	syncMu   sync.Mutex        // one sync at a time
	versions map[string]string // tool name -> the skill version it invokes
	synced   time.Time

	mu      sync.Mutex
	polling bool
	extra   *mcpsdk.RequestExtra // the latest request's transport extras (HTTP credentials)
}

// addSkillTools makes srv's tool list follow the library.
func (s *server) addSkillTools(srv *mcpsdk.Server) {
	st := &skillTools{srv: srv, versions: map[string]string{}}
	srv.AddReceivingMiddleware(func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			extra := req.GetExtra()
			st.mu.Lock()
			if extra != nil {
				st.extra = extra
			}
			st.mu.Unlock()
			switch method {
			case "tools/list":
				s.syncSkillTools(ctx, st, extra, minListSync)
			case "tools/call":
				if p, ok := req.GetParams().(*mcpsdk.CallToolParamsRaw); ok && strings.HasPrefix(p.Name, SkillToolPrefix) {
					st.syncMu.Lock()
					_, known := st.versions[p.Name]
					st.syncMu.Unlock()
					if !known {
						s.syncSkillTools(ctx, st, extra, 0)
					}
				}
			}
			s.pollSkills(st)
			return next(ctx, method, req)
		}
	})
}

// syncSkillTools lists the library and adds, replaces and removes skill tools to match it,
// unless the last sync is younger than minAge. A failure is logged; the tools stay as they are.
func (s *server) syncSkillTools(ctx context.Context, st *skillTools, extra *mcpsdk.RequestExtra, minAge time.Duration) {
	st.syncMu.Lock()
	defer st.syncMu.Unlock()
	if minAge > 0 && time.Since(st.synced) < minAge {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, min(s.opts.CallTimeout, 30*time.Second))
	defer cancel()
	list, err := func() (*sdk.SkillList, error) {
		c, err := s.client(ctx, extra)
		if err != nil {
			return nil, err
		}
		return c.ListSkills(ctx)
	}()
	if err != nil {
		s.opts.Logger.Warn("list the skill library for its tools", "component", "mcp", "err", err)
		return
	}
	want := map[string]sdk.SkillSummary{}
	for _, sk := range list.Items {
		name := SkillToolPrefix + sk.Name
		if sk.Kind != bayapi.SkillKindInvocable || sk.Manifest == nil || sk.Manifest.Inputs["type"] != "object" ||
			len(name) > 128 || !s.opts.toolAllowed(name) {
			continue
		}
		want[name] = sk
	}
	var gone []string
	for name := range st.versions {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
			delete(st.versions, name)
		}
	}
	if len(gone) > 0 {
		st.srv.RemoveTools(gone...)
	}
	for name, sk := range want {
		if st.versions[name] == sk.Version {
			continue
		}
		t := toolDef{name: name, run: s.invokeSkill(sk.Name)}
		st.srv.AddTool(skillTool(name, sk), s.handler(t))
		st.versions[name] = sk.Version
	}
	st.synced = time.Now()
}

// pollSkills starts the poll of the library unless it runs; it ends once the server has no
// session left (the next request starts it again).
func (s *server) pollSkills(st *skillTools) {
	interval := s.opts.SkillsPollInterval
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.polling || interval <= 0 {
		return
	}
	st.polling = true
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for range t.C {
			st.mu.Lock()
			live := false
			for range st.srv.Sessions() {
				live = true
				break
			}
			extra := st.extra
			if !live {
				st.polling, st.extra = false, nil
			}
			st.mu.Unlock()
			if !live {
				return
			}
			s.syncSkillTools(context.Background(), st, extra, 0)
		}
	}()
}

// skillTool is the MCP tool of an invocable skill.
func skillTool(name string, sk sdk.SkillSummary) *mcpsdk.Tool {
	desc := sk.Description
	if sk.Manifest.Description != "" && sk.Manifest.Description != desc {
		desc += "\n\n" + sk.Manifest.Description
	}
	desc += fmt.Sprintf("\n\nRuns as an audited exec of skill %s (version %.12s) in a fresh container without network; returns its outputs.", sk.Name, sk.Version)
	destructive := false
	return &mcpsdk.Tool{
		Name: name, Title: sk.Manifest.Name, Description: desc, InputSchema: sk.Manifest.Inputs,
		Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: &destructive, OpenWorldHint: &destructive},
	}
}

// invokeSkill calls the skill with the tool's arguments as its inputs and waits for it.
func (s *server) invokeSkill(skill string) func(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
	return func(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
		inputs := a.m
		if inputs == nil {
			inputs = map[string]any{}
		}
		raw, err := json.Marshal(inputs)
		if err != nil {
			return nil, invalid("arguments: %v", err)
		}
		res, err := c.InvokeSkill(ctx, skill, sdk.InvokeRequest{ProjectID: s.opts.SkillProject, Inputs: raw})
		if err != nil {
			return nil, err
		}
		return &mcpsdk.CallToolResult{
			Content:           []mcpsdk.Content{&mcpsdk.TextContent{Text: s.truncate(invocationText(SkillToolPrefix+skill, res))}},
			StructuredContent: structured(res.Outputs),
			IsError:           res.Exec.Status != "succeeded",
		}, nil
	}
}

// structured is the outputs as structured content (nil when there are none, so that the
// field is left out).
func structured(outputs map[string]any) any {
	if outputs == nil {
		return nil
	}
	return outputs
}

// invocationText is the markdown of an invocation: the exec's outcome, the outputs as JSON,
// and how they fail interface.outputs.
func invocationText(tool string, res *sdk.InvokeResult) string {
	var b strings.Builder
	e := res.Exec
	fmt.Fprintf(&b, "**%s** exec `%s`: %s", tool, e.ExecID, e.Status)
	if e.Exited {
		fmt.Fprintf(&b, " (exit code %d)", e.ExitCode)
	}
	if e.ErrorReason != "" {
		fmt.Fprintf(&b, ": %s", e.ErrorReason)
	}
	fmt.Fprintf(&b, ", %d ms\n", e.Duration.Milliseconds())
	if res.Outputs != nil {
		out, _ := json.MarshalIndent(res.Outputs, "", "  ")
		fmt.Fprintf(&b, "\n**Outputs** (from %s):\n```json\n%s\n```\n", res.OutputsSource, out)
	}
	if len(res.OutputsErrors) > 0 {
		b.WriteString("\n**The outputs do not match the skill's interface.outputs:**\n")
		for _, v := range res.OutputsErrors {
			fmt.Fprintf(&b, "- `%s`: %s\n", v.Pointer, v.Message)
		}
	}
	return b.String()
}
