package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shipyard-dev/shipyard/sdk"
)

// ServerName is the MCP implementation name.
const ServerName = "shipyard"

const instructions = `Shipyard gives you isolated sandboxes with a persistent /workspace.
Call create_sandbox first and reuse its sandbox_id; Python state persists across execute_python calls.
Paths are relative to /workspace. Delete the sandbox when you are done.`

// clientFunc returns the SDK client of one request (a tool call or a resource read), given
// its transport extras (the HTTP headers over HTTP; nil over stdio).
type clientFunc func(ctx context.Context, extra *mcpsdk.RequestExtra) (*sdk.Client, error)

type server struct {
	opts   Options
	client clientFunc
}

// NewServer returns an MCP server whose tools call bay through client. Serve it with
// Server.Run(ctx, &mcp.StdioTransport{}) or any other MCP transport. Start opts from
// DefaultOptions or OptionsFromEnv (a zero Options means DefaultTTL 0, i.e. no expiry).
func NewServer(client *sdk.Client, opts Options) *mcpsdk.Server {
	s := &server{opts: opts.withDefaults(), client: func(context.Context, *mcpsdk.RequestExtra) (*sdk.Client, error) {
		return client, nil
	}}
	return s.build(true)
}

// NewHTTPHandler returns the streamable-HTTP MCP handler for bay's /mcp. newClient builds
// the SDK client of each tool call from that call's HTTP request (whose headers, notably
// Authorization, are the caller's); returning nil fails the call with an error. Tools that
// read or write the local filesystem (upload_file, download_file) are not offered. Options
// come from OptionsFromEnv unless given.
func NewHTTPHandler(newClient func(r *http.Request) *sdk.Client, opts ...Options) http.Handler {
	o := OptionsFromEnv()
	if len(opts) > 0 {
		o = opts[0]
	}
	s := &server{opts: o.withDefaults(), client: func(ctx context.Context, extra *mcpsdk.RequestExtra) (*sdk.Client, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/mcp", nil)
		if err != nil {
			return nil, err
		}
		if extra != nil && extra.Header != nil {
			r.Header = extra.Header.Clone()
		}
		c := newClient(r)
		if c == nil {
			return nil, errors.New("no bay client for this request")
		}
		return c, nil
	}}
	srv := s.build(false)
	return mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, &mcpsdk.StreamableHTTPOptions{
		Logger: s.opts.Logger,
		// Sessions a client abandoned without DELETE are closed after an hour of silence.
		SessionTimeout: time.Hour,
	})
}

func (s *server) build(local bool) *mcpsdk.Server {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: ServerName, Title: "Shipyard sandboxes", Version: s.opts.Version},
		&mcpsdk.ServerOptions{Instructions: instructions, Logger: s.opts.Logger})
	for _, t := range append(s.tools(), s.jobTools()...) {
		if (t.local && !local) || !s.opts.toolAllowed(t.name) {
			continue
		}
		srv.AddTool(t.tool(), s.handler(t))
	}
	s.addSkillResources(srv)
	s.addSkillTools(srv)
	return srv
}

// ---- tool definitions ----

type prop struct {
	name, typ, desc string
	min, max        *float64
	def             any
	items           string // element type of an array
}

type toolDef struct {
	name, desc  string
	props       []prop
	required    []string
	readOnly    bool
	destructive bool
	idempotent  bool
	local       bool // reads or writes the MCP server's own filesystem
	run         func(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error)
}

func f64(v float64) *float64 { return &v }

func (t toolDef) tool() *mcpsdk.Tool {
	props := map[string]any{}
	for _, p := range t.props {
		m := map[string]any{"type": p.typ, "description": p.desc}
		if p.min != nil {
			m["minimum"] = *p.min
		}
		if p.max != nil {
			m["maximum"] = *p.max
		}
		if p.def != nil {
			m["default"] = p.def
		}
		if p.items != "" {
			m["items"] = map[string]any{"type": p.items}
		}
		props[p.name] = m
	}
	req := t.required
	if req == nil {
		req = []string{}
	}
	schema := map[string]any{"type": "object", "properties": props, "required": req}
	destructive := t.destructive
	return &mcpsdk.Tool{
		Name:        t.name,
		Description: t.desc,
		InputSchema: schema,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: t.readOnly, DestructiveHint: &destructive, IdempotentHint: t.idempotent},
	}
}

// ---- results and errors ----

// validationError is an argument check failure.
type validationError struct{ msg string }

func (e *validationError) Error() string { return e.msg }

func invalid(format string, a ...any) error { return &validationError{fmt.Sprintf(format, a...)} }

func (s *server) handler(t toolDef) mcpsdk.ToolHandler {
	return func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
		defer cancel()
		a := args{}
		if req.Params != nil && len(req.Params.Arguments) > 0 && string(req.Params.Arguments) != "null" {
			if err := json.Unmarshal(req.Params.Arguments, &a.m); err != nil {
				return s.errorResult(t.name, invalid("arguments must be a JSON object")), nil
			}
		}
		c, err := s.client(ctx, req.Extra)
		if err != nil {
			return s.errorResult(t.name, err), nil
		}
		res, err := t.run(ctx, c, a)
		if err != nil {
			return s.errorResult(t.name, err), nil
		}
		return res, nil
	}
}

func (s *server) errorResult(tool string, err error) *mcpsdk.CallToolResult {
	var text string
	var ve *validationError
	var apiErr *sdk.Error
	switch {
	case errors.As(err, &ve):
		text = "**Validation Error:** " + ve.msg
	case errors.As(err, &apiErr):
		text = fmt.Sprintf("**API Error:** [%s] %s", apiErr.Code, apiErr.Message)
		if len(apiErr.Details) > 0 {
			b, _ := json.Marshal(apiErr.Details)
			d := string(b)
			if len(d) > 1000 {
				d = d[:1000] + "…"
			}
			text += "\ndetails: " + d
		}
		if apiErr.RequestID != "" {
			text += "\nrequest_id: " + apiErr.RequestID
		}
	case errors.Is(err, context.DeadlineExceeded):
		text = fmt.Sprintf("**Timeout Error:** %s did not finish within %s", tool, s.opts.CallTimeout)
	default:
		text = "**Error:** " + err.Error()
	}
	s.opts.Logger.Warn("tool failed", "component", "mcp", "tool", tool, "err", err)
	return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: s.truncate(text)}}}
}

func textResult(text string) *mcpsdk.CallToolResult {
	return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: text}}}
}

// truncate cuts text to MaxToolTextChars characters and appends the reference's marker.
func (s *server) truncate(text string) string { return truncate(text, s.opts.MaxToolTextChars) }

func truncate(text string, limit int) string {
	n := utf8.RuneCountInString(text)
	if n <= limit {
		return text
	}
	cut := 0
	for i := range text {
		if cut == limit {
			return text[:i] + fmt.Sprintf("\n…[truncated %d chars; original=%d]", n-limit, n)
		}
		cut++
	}
	return text
}

// ---- argument parsing ----

type args struct{ m map[string]any }

func (a args) has(k string) bool {
	v, ok := a.m[k]
	return ok && v != nil
}

func (a args) str(k string) (string, bool, error) {
	v, ok := a.m[k]
	if !ok || v == nil {
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", false, invalid("field '%s' must be a string", k)
	}
	return s, true, nil
}

func (a args) requireStr(k string) (string, error) {
	s, ok, err := a.str(k)
	if err != nil {
		return "", err
	}
	if !ok || strings.TrimSpace(s) == "" {
		return "", invalid("missing required field: %s", k)
	}
	return s, nil
}

// strList reads a required non-empty array of non-blank strings.
func (a args) strList(k string) ([]string, error) {
	v, ok := a.m[k]
	if !ok || v == nil {
		return nil, invalid("missing required field: %s", k)
	}
	items, isList := v.([]any)
	if !isList || len(items) == 0 {
		return nil, invalid("field '%s' must be a non-empty array of strings", k)
	}
	out := make([]string, len(items))
	for i, it := range items {
		str, isStr := it.(string)
		if !isStr || strings.TrimSpace(str) == "" {
			return nil, invalid("field '%s' must be a non-empty array of strings", k)
		}
		out[i] = str
	}
	return out, nil
}

// optStr returns "" when absent.
func (a args) optStr(k string) (string, error) {
	s, _, err := a.str(k)
	return s, err
}

// integer reads an integer argument (a JSON integer, an integral float or a numeric string)
// within [lo, hi] (hi < lo means unbounded above).
func (a args) integer(k string, def, lo, hi int64) (int64, error) {
	v, ok := a.m[k]
	if !ok || v == nil {
		return def, nil
	}
	var n int64
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, invalid("field '%s' must be an integer", k)
		}
		n = int64(x)
	case string:
		p, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, invalid("field '%s' must be an integer", k)
		}
		n = p
	default:
		return 0, invalid("field '%s' must be an integer", k)
	}
	if n < lo {
		return 0, invalid("field '%s' must be >= %d", k, lo)
	}
	if hi >= lo && n > hi {
		return 0, invalid("field '%s' must be <= %d", k, hi)
	}
	return n, nil
}

func (a args) boolean(k string, def bool) (bool, error) {
	v, ok := a.m[k]
	if !ok || v == nil {
		return def, nil
	}
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "true", "1", "yes":
			return true, nil
		case "false", "0", "no":
			return false, nil
		}
	}
	return false, invalid("field '%s' must be a boolean", k)
}

func (a args) optBool(k string) (*bool, error) {
	if !a.has(k) {
		return nil, nil
	}
	b, err := a.boolean(k, false)
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// The length bounds are checked apart from the patterns: a bounded repetition ({0,127})
// compiles into a copy of its class per repetition, kept in memory all of the process's life.
var sandboxIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`) // and at most 128 bytes

func (a args) sandboxID() (string, error) { return a.id("sandbox_id") }

func (a args) id(k string) (string, error) {
	v, err := a.requireStr(k)
	if err != nil {
		return "", err
	}
	if len(v) > 128 || !sandboxIDRE.MatchString(v) {
		return "", invalid("field '%s' must match ^[A-Za-z0-9_-]{1,128}$", k)
	}
	return v, nil
}

// workspacePath checks a path relative to /workspace: non-empty, not absolute, no NUL and no
// ".." component (stricter than bay, like the reference MCP server).
func workspacePath(k, p string) (string, error) {
	switch {
	case strings.TrimSpace(p) == "":
		return "", invalid("field '%s' must not be empty", k)
	case strings.ContainsRune(p, 0):
		return "", invalid("field '%s' contains invalid characters", k)
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, "\\"):
		return "", invalid("field '%s' must be a relative path (relative to /workspace)", k)
	}
	for _, c := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if c == ".." {
			return "", invalid("field '%s' must not contain '..' components", k)
		}
	}
	return p, nil
}

func (a args) path(k string, required bool, def string) (string, error) {
	p, ok, err := a.str(k)
	if err != nil {
		return "", err
	}
	if !ok {
		if required {
			return "", invalid("missing required field: %s", k)
		}
		return def, nil
	}
	return workspacePath(k, p)
}
