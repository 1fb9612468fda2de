package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

var (
	sandboxIDProp = prop{name: "sandbox_id", typ: "string", desc: "The sandbox ID."}
	descProp      = prop{name: "description", typ: "string", desc: "Optional description for execution history annotation."}
	tagsProp      = prop{name: "tags", typ: "string", desc: "Optional comma-separated tags for execution history."}
	execTypeProp  = prop{name: "exec_type", typ: "string", desc: "Optional execution type filter: python / shell / browser / browser_batch."}
)

var (
	learnProp        = prop{name: "learn", typ: "boolean", desc: "Mark the execution as evidence for browser skill learning (its trace is kept)."}
	includeTraceProp = prop{name: "include_trace", typ: "boolean", desc: "Store a step trace and return its trace_ref."}
)

func timeoutProp() prop {
	return prop{name: "timeout", typ: "integer", desc: "Execution timeout in seconds (1-300). Defaults to 30.", min: f64(1), max: f64(bayapi.MaxExecTimeout), def: bayapi.DefaultExecTimeout}
}

func (s *server) tools() []toolDef {
	return append([]toolDef{
		{name: "create_sandbox", desc: "Create a new sandbox environment for executing code. Returns the sandbox ID which must be used for subsequent operations. " +
			"A sandbox is a Linux container: bash and a persistent Python kernel in /workspace (files there survive stop and resume), " +
			"run as the unprivileged user uid 1000 with no root, sudo or compilers. Its network follows its policy, shown in the result: " +
			"'open' reaches the internet but not private addresses, 'allowlist' only the listed hosts, 'none' nothing. " +
			"The standard image has Python 3.13 with numpy, pandas, matplotlib, scipy, scikit-learn, Pillow, OpenCV, requests, bs4, lxml, " +
			"openpyxl, python-docx, pypdf/PyMuPDF; Node.js 20 with npm; git, curl, jq, zip. pip/npm install (into ~/.local) work where the network allows. " +
			"list_profiles shows the other environments (e.g. browser-python adds a headless browser).",
			props: []prop{
				{name: "profile", typ: "string", desc: fmt.Sprintf("Runtime profile (e.g., 'python-default'). Defaults to '%s'.", s.opts.DefaultProfile)},
				{name: "ttl", typ: "integer", desc: fmt.Sprintf("Time-to-live in seconds. Defaults to %d (with reuse_key: the key's hard TTL). Use 0 for no expiration.", s.opts.DefaultTTL), min: f64(0)},
				{name: "reuse_key", typ: "string", desc: "Return your sandbox of this key (e.g. 'project:agent') if it is alive, creating it only when there is none; 1-128 of A-Z a-z 0-9 _ - : . (Shipyard extension.)"},
				{name: "reuse_idle_ttl", typ: "integer", desc: "With reuse_key: seconds; the key's sandbox idle longer is replaced (default: the server's).", min: f64(1)},
				{name: "reuse_hard_ttl", typ: "integer", desc: "With reuse_key: seconds; the key's sandbox older is replaced (default: the server's).", min: f64(1)},
			}, run: s.createSandbox},
		{name: "delete_sandbox", desc: "Delete a sandbox and clean up all resources.", destructive: true, idempotent: true,
			props: []prop{sandboxIDProp}, required: []string{"sandbox_id"}, run: onSandbox(s.deleteSandbox)},
		{name: "execute_python", desc: "Execute Python code in a sandbox's IPython kernel (in /workspace, as uid 1000). Variables persist across calls within the same sandbox session. " +
			"The value of the last expression and everything printed come back as text; matplotlib figures and other images come back as images. " +
			"A cell running past its timeout is interrupted (timed_out in the structured result); very long output is cut. " +
			"Network access follows the sandbox's policy.",
			props: []prop{sandboxIDProp, {name: "code", typ: "string", desc: "Python code to execute."}, timeoutProp(),
				{name: "include_code", typ: "boolean", desc: "Include executed code and execution metadata in response."}, descProp, tagsProp},
			required: []string{"sandbox_id", "code"}, run: onSandbox(s.executePython)},
		{name: "execute_shell", desc: "Execute a shell command with bash in a sandbox, in /workspace (or cwd) as the unprivileged user uid 1000 (no root, no sudo). " +
			"Returns stdout, stderr and the exit code; a command running past its timeout is killed (exit code -1, timed_out in the structured result), " +
			"very long output is cut. Background processes end with the call. Network access follows the sandbox's policy.",
			props: []prop{sandboxIDProp, {name: "command", typ: "string", desc: "Shell command to execute."},
				{name: "cwd", typ: "string", desc: "Working directory (relative to /workspace). Defaults to workspace root."}, timeoutProp(),
				{name: "include_code", typ: "boolean", desc: "Include executed command and execution metadata in response."}, descProp, tagsProp},
			required: []string{"sandbox_id", "command"}, run: onSandbox(s.executeShell)},
		{name: "execute_browser", desc: "Execute one browser automation command in a sandbox whose profile has the browser capability (e.g. browser-python). " +
			"Commands use agent-browser syntax WITHOUT the 'agent-browser' prefix, e.g. 'open https://example.com', 'snapshot -i', 'click @e1', " +
			"'fill @e2 \"text\"', 'get title', 'screenshot shot.png' (written to /workspace/shot.png). Re-run 'snapshot -i' after the page changes: element refs go stale.",
			props: []prop{sandboxIDProp, {name: "cmd", typ: "string", desc: "Browser command without the 'agent-browser' prefix."}, timeoutProp(),
				descProp, tagsProp, learnProp, includeTraceProp},
			required: []string{"sandbox_id", "cmd"}, run: onSandbox(s.executeBrowser)},
		{name: "execute_browser_batch", desc: "Execute a sequence of browser automation commands in order within one request. " +
			"Use it for fixed sequences that need no decision in between (open → fill → click → wait); when a step's result decides the next one " +
			"(snapshot → read → act), use execute_browser calls instead. Commands do not include the 'agent-browser' prefix.",
			props: []prop{sandboxIDProp,
				{name: "commands", typ: "array", items: "string", desc: "Browser commands to run in order, each without the 'agent-browser' prefix."},
				{name: "timeout", typ: "integer", desc: fmt.Sprintf("Time budget of the whole batch in seconds (1-%d). Defaults to %d.", sdk.MaxBrowserBatchTimeout, sdk.DefaultBrowserBatchTimeout),
					min: f64(1), max: f64(sdk.MaxBrowserBatchTimeout), def: sdk.DefaultBrowserBatchTimeout},
				{name: "stop_on_error", typ: "boolean", desc: "Stop at the first failing command. Defaults to true.", def: true},
				descProp, tagsProp, learnProp, includeTraceProp},
			required: []string{"sandbox_id", "commands"}, run: onSandbox(s.executeBrowserBatch)},
		{name: "read_file", desc: "Read a file from the sandbox workspace.", readOnly: true,
			props:    []prop{sandboxIDProp, {name: "path", typ: "string", desc: "File path relative to /workspace."}},
			required: []string{"sandbox_id", "path"}, run: onSandbox(s.readFile)},
		{name: "write_file", desc: "Write content to a file in the sandbox workspace. Creates parent directories automatically.", idempotent: true,
			props: []prop{sandboxIDProp, {name: "path", typ: "string", desc: "File path relative to /workspace."},
				{name: "content", typ: "string", desc: fmt.Sprintf("Content to write (at most %d bytes).", s.opts.MaxWriteFileBytes)}},
			required: []string{"sandbox_id", "path", "content"}, run: onSandbox(s.writeFile)},
		{name: "list_files", desc: "List files and directories in the sandbox workspace.", readOnly: true,
			props:    []prop{sandboxIDProp, {name: "path", typ: "string", desc: "Directory path relative to /workspace. Defaults to '.' (workspace root).", def: "."}},
			required: []string{"sandbox_id"}, run: onSandbox(s.listFiles)},
		{name: "delete_file", desc: "Delete a file or directory from the sandbox workspace.", destructive: true,
			props:    []prop{sandboxIDProp, {name: "path", typ: "string", desc: "Path to delete, relative to /workspace."}},
			required: []string{"sandbox_id", "path"}, run: onSandbox(s.deleteFile)},
		{name: "upload_file", desc: "Upload a local file (on the machine running this MCP server) to the sandbox workspace.", local: true,
			props: []prop{sandboxIDProp,
				{name: "local_path", typ: "string", desc: fmt.Sprintf("Path of the local file to upload (at most %d bytes).", s.opts.MaxTransferFileBytes)},
				{name: "sandbox_path", typ: "string", desc: "Destination path relative to /workspace. Defaults to the local file name."}},
			required: []string{"sandbox_id", "local_path"}, run: onSandbox(s.uploadFile)},
		{name: "download_file", desc: "Download a file from the sandbox workspace to the local filesystem (of the machine running this MCP server).", local: true,
			props: []prop{sandboxIDProp,
				{name: "sandbox_path", typ: "string", desc: "File path relative to /workspace."},
				{name: "local_path", typ: "string", desc: "Local destination path. Defaults to the file name in the current directory."}},
			required: []string{"sandbox_id", "sandbox_path"}, run: onSandbox(s.downloadFile)},
		{name: "get_execution_history", desc: "Get execution history for a sandbox with optional filters.", readOnly: true,
			props: []prop{sandboxIDProp, execTypeProp,
				{name: "success_only", typ: "boolean", desc: "Return only successful executions."},
				{name: "limit", typ: "integer", desc: "Max number of entries (1-500). Defaults to 50.", min: f64(1), max: f64(bayapi.MaxHistLimit), def: 50},
				{name: "tags", typ: "string", desc: "Optional comma-separated tags filter."},
				{name: "has_notes", typ: "boolean", desc: "Return only entries that have notes."},
				{name: "has_description", typ: "boolean", desc: "Return only entries that have description."}},
			required: []string{"sandbox_id"}, run: onSandbox(s.getExecutionHistory)},
		{name: "get_execution", desc: "Get one execution record by execution ID.", readOnly: true,
			props:    []prop{sandboxIDProp, {name: "execution_id", typ: "string", desc: "Execution record ID."}},
			required: []string{"sandbox_id", "execution_id"}, run: onSandbox(s.getExecution)},
		{name: "get_last_execution", desc: "Get the latest execution record in a sandbox.", readOnly: true,
			props: []prop{sandboxIDProp, execTypeProp}, required: []string{"sandbox_id"}, run: onSandbox(s.getLastExecution)},
		{name: "annotate_execution", desc: "Add or update description/tags/notes for one execution record.", idempotent: true,
			props: []prop{sandboxIDProp, {name: "execution_id", typ: "string", desc: "Execution record ID."},
				{name: "description", typ: "string", desc: "Description text."},
				{name: "tags", typ: "string", desc: "Comma-separated tags."},
				{name: "notes", typ: "string", desc: "Agent notes."}},
			required: []string{"sandbox_id", "execution_id"}, run: onSandbox(s.annotateExecution)},
		{name: "list_profiles", desc: "List available sandbox profiles with their capabilities.", readOnly: true, run: s.listProfiles},

		// Ours: not in the reference MCP server.
		{name: "get_sandbox", desc: "Get a sandbox's status, profile, capabilities, expiry and (when running) its containers. (Shipyard extension.)", readOnly: true,
			props: []prop{sandboxIDProp}, required: []string{"sandbox_id"}, run: onSandbox(s.getSandbox)},
		{name: "list_sandboxes", desc: "List your sandboxes. (Shipyard extension.)", readOnly: true,
			props: []prop{
				{name: "status", typ: "string", desc: "Optional status filter: idle / starting / ready / failed / expired."},
				{name: "limit", typ: "integer", desc: "Max number of sandboxes (1-200). Defaults to 50.", min: f64(1), max: f64(bayapi.MaxListLimit), def: 50},
				{name: "cursor", typ: "string", desc: "next_cursor of a previous call, to get the next page."}},
			run: s.listSandboxes},
		{name: "stop_sandbox", desc: "Stop a sandbox's runtime to free resources; the workspace is kept and the next execution restarts it. (Shipyard extension.)", idempotent: true,
			props: []prop{sandboxIDProp}, required: []string{"sandbox_id"}, run: onSandbox(s.stopSandbox)},
		{name: "extend_ttl", desc: "Extend a sandbox's time-to-live. (Shipyard extension.)",
			props:    []prop{sandboxIDProp, {name: "extend_by", typ: "integer", desc: "Seconds to add to the current expiry (>= 1).", min: f64(1)}},
			required: []string{"sandbox_id", "extend_by"}, run: onSandbox(s.extendTTL)},
		{name: "keepalive", desc: "Refresh a sandbox's idle timer without running anything. (Shipyard extension.)", idempotent: true,
			props: []prop{sandboxIDProp}, required: []string{"sandbox_id"}, run: onSandbox(s.keepalive)},
	}, s.skillTools()...)
}

// onSandbox adapts a tool that acts on one sandbox: it reads and checks sandbox_id first.
func onSandbox(run func(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error)) func(context.Context, *sdk.Client, args) (*mcpsdk.CallToolResult, error) {
	return func(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
		id, err := a.sandboxID()
		if err != nil {
			return nil, err
		}
		return run(ctx, c, id, a)
	}
}

func (s *server) createSandbox(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
	profile := s.opts.DefaultProfile
	if a.has("profile") {
		p, err := a.requireStr("profile")
		if err != nil {
			return nil, invalid("field 'profile' must be a non-empty string")
		}
		profile = p
	}
	ttl, err := a.integer("ttl", int64(s.opts.DefaultTTL), 0, -1)
	if err != nil {
		return nil, err
	}
	req := sdk.CreateSandboxRequest{Profile: profile, TTL: time.Duration(ttl) * time.Second}
	key, err := a.optStr("reuse_key")
	if err != nil {
		return nil, err
	}
	if key != "" {
		idle, err := a.integer("reuse_idle_ttl", 0, 1, -1)
		if err != nil {
			return nil, err
		}
		hard, err := a.integer("reuse_hard_ttl", 0, 1, -1)
		if err != nil {
			return nil, err
		}
		req.Reuse = &sdk.Reuse{Key: key, IdleTTL: time.Duration(idle) * time.Second, HardTTL: time.Duration(hard) * time.Second}
		if !a.has("ttl") {
			req.TTL = 0 // the key's hard TTL
		}
	}
	sb, err := c.CreateSandbox(ctx, req)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	if key != "" {
		fmt.Fprintf(&b, "Sandbox of reuse key %q (an existing one when it was alive).\n\n", key)
	} else {
		b.WriteString("Sandbox created successfully.\n\n")
	}
	fmt.Fprintf(&b, "**Sandbox ID:** `%s`\n**Profile:** %s\n**Status:** %s\n**Capabilities:** %s\n**TTL:** %d seconds\n",
		sb.ID, sb.Profile, sb.Status, strings.Join(sb.Capabilities, ", "), ttl)
	if sb.Network.Mode != "" {
		fmt.Fprintf(&b, "**Network:** %s\n", networkText(&sb.Network))
	}
	b.WriteString(containersText(sb.Containers))
	b.WriteString("\nUse this sandbox_id for subsequent operations.")
	return withStructured(textResult(s.truncate(b.String())), sb), nil
}

func containersText(cs []sdk.Container) string {
	if len(cs) == 0 {
		return ""
	}
	lines := []string{"**Containers:**"}
	for _, c := range cs {
		ver := "unknown"
		if c.Version != "" {
			ver = c.Version
		}
		health := "?"
		if c.Healthy != nil {
			health = map[bool]string{true: "✅", false: "❌"}[*c.Healthy]
		}
		lines = append(lines, fmt.Sprintf("  - %s (%s) v%s %s [%s]", c.Name, c.RuntimeType, ver, health, strings.Join(c.Capabilities, ", ")))
	}
	return strings.Join(lines, "\n") + "\n"
}

func (s *server) deleteSandbox(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	if err := c.DeleteSandbox(ctx, id); err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("Sandbox `%s` deleted successfully.", id)), nil
}

// execOptions reads the options every execution tool takes.
func (a args) execOptions() (sdk.ExecOptions, error) {
	var o sdk.ExecOptions
	t, err := a.integer("timeout", bayapi.DefaultExecTimeout, 1, bayapi.MaxExecTimeout)
	if err != nil {
		return o, err
	}
	o.Timeout = time.Duration(t) * time.Second
	if o.IncludeCode, err = a.boolean("include_code", false); err != nil {
		return o, err
	}
	if o.Description, err = a.optStr("description"); err != nil {
		return o, err
	}
	if o.Tags, err = a.optStr("tags"); err != nil {
		return o, err
	}
	return o, nil
}

// execFooter is the execution_id and execution_time_ms lines under an execution's output,
// followed by the executed code (labelled label) when it was asked for and returned.
func (s *server) execFooter(execID string, took time.Duration, include bool, label string, code string) string {
	footer := ""
	if execID != "" {
		footer += "\n\nexecution_id: " + execID
	}
	footer += fmt.Sprintf("\nexecution_time_ms: %d", took.Milliseconds())
	if include && code != "" {
		footer += "\n\n" + label + ":\n" + s.truncate(code)
	}
	return footer
}

func (s *server) executePython(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	opts, err := a.execOptions()
	if err != nil {
		return nil, err
	}
	code, err := a.requireStr("code")
	if err != nil {
		return nil, err
	}
	res, err := c.ExecPython(ctx, id, sdk.PythonRequest{Code: code, ExecOptions: opts})
	if err != nil {
		return nil, err
	}
	var text string
	if res.Success {
		out := res.Output
		if out == "" {
			out = "(no output)"
		}
		text = fmt.Sprintf("**Execution successful**\n\n```\n%s\n```%s", s.truncate(out),
			s.execFooter(res.ExecutionID, res.ExecutionTime, opts.IncludeCode, "code", res.Code))
	} else {
		errText := res.Error
		if errText == "" {
			errText = "Unknown error"
		}
		if res.Output != "" {
			errText = res.Output + "\n" + errText
		}
		suffix := ""
		if res.ExecutionID != "" {
			suffix = "\n\nexecution_id: " + res.ExecutionID
		}
		text = fmt.Sprintf("**Execution failed**\n\n```\n%s\n```%s", s.truncate(errText), suffix)
	}
	result := withStructured(textResult(text), pythonStructured(res))
	for i, img := range res.Data.Images {
		for mime, b64 := range img {
			data, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				result.Content = append(result.Content, &mcpsdk.TextContent{Text: fmt.Sprintf("(image %d: undecodable %s data)", i, mime)})
				continue
			}
			result.Content = append(result.Content, &mcpsdk.ImageContent{Data: data, MIMEType: mime})
		}
	}
	return result, nil
}

func (s *server) executeShell(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	opts, err := a.execOptions()
	if err != nil {
		return nil, err
	}
	command, err := a.requireStr("command")
	if err != nil {
		return nil, err
	}
	cwd, err := a.path("cwd", false, "")
	if err != nil {
		return nil, err
	}
	res, err := c.ExecShell(ctx, id, sdk.ShellRequest{Command: command, Cwd: cwd, ExecOptions: opts})
	if err != nil {
		return nil, err
	}
	out := res.Output
	if res.Error != "" {
		if out != "" {
			out += "\n"
		}
		out += res.Error
	}
	if out == "" {
		out = "(no output)"
	}
	status := "successful"
	if !res.Success {
		status = "failed"
	}
	return withStructured(textResult(fmt.Sprintf("**Command %s** (exit code: %d)\n\n```\n%s\n```%s", status, res.ExitCode, s.truncate(out),
		s.execFooter(res.ExecutionID, res.ExecutionTime, opts.IncludeCode, "command", res.Command))), res), nil
}

func (s *server) readFile(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	p, err := a.path("path", true, "")
	if err != nil {
		return nil, err
	}
	content, err := c.ReadFile(ctx, id, p)
	if err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("**File: %s**\n\n```\n%s\n```", p, s.truncate(content))), nil
}

func (s *server) writeFile(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	p, err := a.path("path", true, "")
	if err != nil {
		return nil, err
	}
	content, ok, err := a.str("content")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, invalid("missing required field: content")
	}
	if n := int64(len(content)); n > s.opts.MaxWriteFileBytes {
		return nil, invalid("write_file content too large: %d bytes exceeds limit of %d bytes", n, s.opts.MaxWriteFileBytes)
	}
	if err := c.WriteFile(ctx, id, p, content); err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("File `%s` written successfully (%d bytes).", p, len(content))), nil
}

func (s *server) listFiles(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	p, err := a.path("path", false, ".")
	if err != nil {
		return nil, err
	}
	entries, err := c.ListFiles(ctx, id, p)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return textResult(fmt.Sprintf("Directory `%s` is empty.", p)), nil
	}
	lines := []string{fmt.Sprintf("**Directory: %s**\n", p)}
	for _, e := range entries {
		if e.IsDir {
			lines = append(lines, "📁 "+e.Name+"/")
		} else {
			lines = append(lines, fmt.Sprintf("📄 %s (%d bytes)", e.Name, e.Size))
		}
	}
	return textResult(s.truncate(strings.Join(lines, "\n"))), nil
}

func (s *server) deleteFile(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	p, err := a.path("path", true, "")
	if err != nil {
		return nil, err
	}
	if err := c.DeleteFile(ctx, id, p); err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("Deleted `%s` successfully.", p)), nil
}

func localPath(k, p string) (string, error) {
	if strings.TrimSpace(p) == "" || strings.ContainsRune(p, 0) {
		return "", invalid("field '%s' must be a non-empty path", k)
	}
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, p[2:])
		}
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", invalid("field '%s': %v", k, err)
	}
	return abs, nil
}

func (s *server) uploadFile(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	lp, err := a.requireStr("local_path")
	if err != nil {
		return nil, err
	}
	local, err := localPath("local_path", lp)
	if err != nil {
		return nil, err
	}
	target, err := a.path("sandbox_path", false, "")
	if err != nil {
		return nil, err
	}
	if target == "" {
		target = filepath.Base(local)
	}
	f, err := os.Open(local)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, invalid("local file not found: %s", local)
		}
		return nil, invalid("cannot open local file %s: %v", local, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, invalid("local path is not a file: %s", local)
	}
	if st.Size() > s.opts.MaxTransferFileBytes {
		return nil, invalid("file too large: %d bytes exceeds limit of %d bytes", st.Size(), s.opts.MaxTransferFileBytes)
	}
	res, err := c.Upload(ctx, id, target, f, st.Size())
	if err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("File uploaded successfully.\n\n**Local:** `%s`\n**Sandbox:** `%s`\n**Size:** %d bytes", local, res.Path, res.Size)), nil
}

// errTooLarge aborts a download that exceeds MaxTransferFileBytes.
var errTooLarge = errors.New("too large")

type capWriter struct {
	w     io.Writer
	n     int64
	limit int64
}

func (c *capWriter) Write(p []byte) (int, error) {
	if c.n+int64(len(p)) > c.limit {
		return 0, errTooLarge
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (s *server) downloadFile(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	src, err := a.path("sandbox_path", true, "")
	if err != nil {
		return nil, err
	}
	lp, err := a.optStr("local_path")
	if err != nil {
		return nil, err
	}
	var local string
	if lp != "" {
		if local, err = localPath("local_path", lp); err != nil {
			return nil, err
		}
	} else {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		local = filepath.Join(wd, filepath.Base(src))
	}
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Dir(local), err)
	}
	// Write to a temporary file next to the target and rename it on success, so that a
	// failed or oversized download leaves nothing behind.
	tmp, err := os.CreateTemp(filepath.Dir(local), "."+filepath.Base(local)+".part-*")
	if err != nil {
		return nil, fmt.Errorf("create temporary file: %w", err)
	}
	defer os.Remove(tmp.Name())
	n, err := c.Download(ctx, id, src, &capWriter{w: tmp, limit: s.opts.MaxTransferFileBytes})
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if errors.Is(err, errTooLarge) {
		return nil, invalid("downloaded file too large: exceeds limit of %d bytes", s.opts.MaxTransferFileBytes)
	}
	if err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), local); err != nil {
		return nil, fmt.Errorf("move download into place: %w", err)
	}
	return textResult(fmt.Sprintf("File downloaded successfully.\n\n**Sandbox:** `%s`\n**Local:** `%s`\n**Size:** %d bytes", src, local, n)), nil
}

func (a args) execType() (string, error) {
	t, err := a.optStr("exec_type")
	if err != nil {
		return "", err
	}
	switch t {
	case "", bayapi.ExecPython, bayapi.ExecShell, bayapi.ExecBrowser, bayapi.ExecBrowserBatch:
		return t, nil
	}
	return "", invalid("field 'exec_type' must be one of python, shell, browser, browser_batch")
}

func entryLine(e sdk.HistoryEntry) string {
	line := fmt.Sprintf("- %s | %s | success=%t | %dms", e.ID, e.ExecType, e.Success, e.ExecutionTime.Milliseconds())
	if e.Tags != "" {
		line += " | tags=" + e.Tags
	}
	if e.Description != "" {
		line += " | desc=" + e.Description
	}
	if e.Notes != "" {
		line += " | notes=" + e.Notes
	}
	return line
}

func (s *server) getExecutionHistory(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	var req sdk.HistoryRequest
	var err error
	if req.ExecType, err = a.execType(); err != nil {
		return nil, err
	}
	if req.SuccessOnly, err = a.boolean("success_only", false); err != nil {
		return nil, err
	}
	limit, err := a.integer("limit", 50, 1, bayapi.MaxHistLimit)
	if err != nil {
		return nil, err
	}
	req.Limit = int(limit)
	if req.Tags, err = a.optStr("tags"); err != nil {
		return nil, err
	}
	if req.HasNotes, err = a.optBool("has_notes"); err != nil {
		return nil, err
	}
	if req.HasDescription, err = a.optBool("has_description"); err != nil {
		return nil, err
	}
	list, err := c.ListHistory(ctx, id, req)
	if err != nil {
		return nil, err
	}
	if len(list.Entries) == 0 {
		return textResult("No execution history found."), nil
	}
	lines := []string{fmt.Sprintf("Total: %d", list.Total)}
	for _, e := range list.Entries {
		lines = append(lines, entryLine(e))
	}
	return textResult(s.truncate(strings.Join(lines, "\n"))), nil
}

func (s *server) entryText(e *sdk.HistoryEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Execution %s**\n\n", e.ID)
	fmt.Fprintf(&b, "- type: %s\n- success: %t\n- execution_time_ms: %d\n- created_at: %s\n", e.ExecType, e.Success, e.ExecutionTime.Milliseconds(), bayapi.FormatTime(e.CreatedAt))
	if e.Description != "" {
		fmt.Fprintf(&b, "- description: %s\n", e.Description)
	}
	if e.Tags != "" {
		fmt.Fprintf(&b, "- tags: %s\n", e.Tags)
	}
	if e.Notes != "" {
		fmt.Fprintf(&b, "- notes: %s\n", e.Notes)
	}
	fmt.Fprintf(&b, "\ncode:\n```\n%s\n```\n", e.Code)
	if e.Output != "" {
		fmt.Fprintf(&b, "\noutput:\n```\n%s\n```\n", e.Output)
	}
	if e.Error != "" {
		fmt.Fprintf(&b, "\nerror:\n```\n%s\n```\n", e.Error)
	}
	return s.truncate(strings.TrimRight(b.String(), "\n"))
}

func (s *server) getExecution(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	execID, err := a.id("execution_id")
	if err != nil {
		return nil, err
	}
	e, err := c.GetExecution(ctx, id, execID)
	if err != nil {
		return nil, err
	}
	return textResult(s.entryText(e)), nil
}

func (s *server) getLastExecution(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	t, err := a.execType()
	if err != nil {
		return nil, err
	}
	e, err := c.LastExecution(ctx, id, t)
	if err != nil {
		return nil, err
	}
	return textResult(s.entryText(e)), nil
}

func (s *server) annotateExecution(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	execID, err := a.id("execution_id")
	if err != nil {
		return nil, err
	}
	var req sdk.AnnotateRequest
	for k, dst := range map[string]**string{"description": &req.Description, "tags": &req.Tags, "notes": &req.Notes} {
		v, ok, err := a.str(k)
		if err != nil {
			return nil, err
		}
		if ok {
			*dst = &v
		}
	}
	if req.Description == nil && req.Tags == nil && req.Notes == nil {
		return nil, invalid("at least one of description, tags, notes must be given")
	}
	e, err := c.AnnotateExecution(ctx, id, execID, req)
	if err != nil {
		return nil, err
	}
	return textResult("Execution annotated.\n\n" + s.entryText(e)), nil
}

func (s *server) listProfiles(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
	profiles, err := c.ListProfiles(ctx, true)
	if err != nil {
		return nil, err
	}
	if len(profiles.Items) == 0 {
		return textResult("No profiles available."), nil
	}
	lines := []string{fmt.Sprintf("**Available Profiles** (%d)\n", len(profiles.Items))}
	for _, p := range profiles.Items {
		caps := "none"
		if len(p.Capabilities) > 0 {
			caps = strings.Join(p.Capabilities, ", ")
		}
		desc := ""
		if p.Description != "" {
			desc = " — " + p.Description
		}
		lines = append(lines, fmt.Sprintf("- **%s**%s: capabilities=[%s], idle_timeout=%ds", p.ID, desc, caps, int(p.IdleTimeout.Seconds())))
		for _, ct := range p.Containers {
			cc := "none"
			if len(ct.Capabilities) > 0 {
				cc = strings.Join(ct.Capabilities, ", ")
			}
			lines = append(lines, fmt.Sprintf("    └ %s (%s): [%s]", ct.Name, ct.RuntimeType, cc))
		}
	}
	return textResult(s.truncate(strings.Join(lines, "\n"))), nil
}

// timeOr is t in the wire's format, or none for the zero time.
func timeOr(t time.Time, none string) string {
	if t.IsZero() {
		return none
	}
	return bayapi.FormatTime(t)
}

func (s *server) sandboxText(sb *sdk.Sandbox) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Sandbox ID:** `%s`\n**Status:** %s\n**Profile:** %s\n**Cargo:** %s\n**Capabilities:** %s\n**Created:** %s\n**Expires:** %s\n**Idle expires:** %s\n",
		sb.ID, sb.Status, sb.Profile, sb.CargoID, strings.Join(sb.Capabilities, ", "), bayapi.FormatTime(sb.CreatedAt),
		timeOr(sb.ExpiresAt, "never"), timeOr(sb.IdleExpiresAt, "-"))
	b.WriteString(containersText(sb.Containers))
	return strings.TrimRight(b.String(), "\n")
}

func (s *server) getSandbox(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	sb, err := c.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	return textResult(s.sandboxText(sb)), nil
}

func (s *server) listSandboxes(ctx context.Context, c *sdk.Client, a args) (*mcpsdk.CallToolResult, error) {
	var req sdk.ListSandboxesRequest
	var err error
	if req.Status, err = a.optStr("status"); err != nil {
		return nil, err
	}
	switch req.Status {
	case "", bayapi.StatusIdle, bayapi.StatusStarting, bayapi.StatusReady, bayapi.StatusFailed, bayapi.StatusExpired:
	default:
		return nil, invalid("field 'status' must be one of idle, starting, ready, failed, expired")
	}
	limit, err := a.integer("limit", bayapi.DefaultListLimit, 1, bayapi.MaxListLimit)
	if err != nil {
		return nil, err
	}
	req.Limit = int(limit)
	if req.Cursor, err = a.optStr("cursor"); err != nil {
		return nil, err
	}
	list, err := c.ListSandboxes(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return textResult("No sandboxes found."), nil
	}
	lines := []string{fmt.Sprintf("**Sandboxes** (%d)\n", len(list.Items))}
	for _, sb := range list.Items {
		lines = append(lines, fmt.Sprintf("- `%s` | %s | profile=%s | expires=%s", sb.ID, sb.Status, sb.Profile, timeOr(sb.ExpiresAt, "never")))
	}
	if list.NextCursor != "" {
		lines = append(lines, "\nnext_cursor: "+list.NextCursor)
	}
	return textResult(s.truncate(strings.Join(lines, "\n"))), nil
}

func (s *server) stopSandbox(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	if err := c.StopSandbox(ctx, id); err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("Sandbox `%s` stopped. Its workspace is kept; the next execution starts it again.", id)), nil
}

func (s *server) extendTTL(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	if !a.has("extend_by") {
		return nil, invalid("missing required field: extend_by")
	}
	by, err := a.integer("extend_by", 0, 1, -1)
	if err != nil {
		return nil, err
	}
	sb, err := c.ExtendTTL(ctx, id, time.Duration(by)*time.Second)
	if err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("TTL of `%s` extended by %d seconds.\n\n**Expires:** %s", id, by, timeOr(sb.ExpiresAt, "never"))), nil
}

func (s *server) keepalive(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	if err := c.Keepalive(ctx, id); err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("Sandbox `%s` kept alive.", id)), nil
}

// browserOptions reads the options both browser tools take.
func (a args) browserOptions() (desc, tags string, learn, trace bool, err error) {
	if desc, err = a.optStr("description"); err != nil {
		return
	}
	if tags, err = a.optStr("tags"); err != nil {
		return
	}
	if learn, err = a.boolean("learn", false); err != nil {
		return
	}
	trace, err = a.boolean("include_trace", false)
	return
}

func (s *server) executeBrowser(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	cmd, err := a.requireStr("cmd")
	if err != nil {
		return nil, err
	}
	t, err := a.integer("timeout", bayapi.DefaultExecTimeout, 1, bayapi.MaxExecTimeout)
	if err != nil {
		return nil, err
	}
	req := sdk.BrowserRequest{Cmd: cmd, Timeout: time.Duration(t) * time.Second}
	if req.Description, req.Tags, req.Learn, req.IncludeTrace, err = a.browserOptions(); err != nil {
		return nil, err
	}
	res, err := c.ExecBrowser(ctx, id, req)
	if err != nil {
		return nil, err
	}
	out := res.Output
	if out == "" {
		out = "(no output)"
	}
	status := "successful"
	if !res.Success {
		status = "failed"
	}
	text := fmt.Sprintf("**Browser command %s** (exit code: %d)\n\n```\n%s\n```%s", status, res.ExitCode, s.truncate(out),
		s.execFooter(res.ExecutionID, res.ExecutionTime, false, "", ""))
	if res.TraceRef != "" {
		text += "\ntrace_ref: " + res.TraceRef
	}
	if !res.Success && res.Error != "" {
		text += "\n\nstderr:\n" + s.truncate(res.Error)
	}
	return textResult(text), nil
}

// stepTextLimit bounds the stdout and stderr shown for each step of a batch.
const stepTextLimit = 500

func (s *server) executeBrowserBatch(ctx context.Context, c *sdk.Client, id string, a args) (*mcpsdk.CallToolResult, error) {
	commands, err := a.strList("commands")
	if err != nil {
		return nil, err
	}
	t, err := a.integer("timeout", sdk.DefaultBrowserBatchTimeout, 1, sdk.MaxBrowserBatchTimeout)
	if err != nil {
		return nil, err
	}
	stop, err := a.boolean("stop_on_error", true)
	if err != nil {
		return nil, err
	}
	req := sdk.BrowserBatchRequest{Commands: commands, Timeout: time.Duration(t) * time.Second, ContinueOnError: !stop}
	if req.Description, req.Tags, req.Learn, req.IncludeTrace, err = a.browserOptions(); err != nil {
		return nil, err
	}
	res, err := c.ExecBrowserBatch(ctx, id, req)
	if err != nil {
		return nil, err
	}
	state := "completed"
	if !res.Success {
		state = "failed"
	}
	lines := []string{fmt.Sprintf("**Batch execution %s** (%d/%d steps, %dms)\n", state, res.CompletedSteps, res.TotalSteps, res.Duration.Milliseconds())}
	if res.ExecutionID != "" {
		lines = append(lines, "execution_id: "+res.ExecutionID)
	}
	lines = append(lines, fmt.Sprintf("execution_time_ms: %d", res.ExecutionTime.Milliseconds()))
	if res.TraceRef != "" {
		lines = append(lines, "trace_ref: "+res.TraceRef)
	}
	for _, st := range res.Results {
		icon := "✅"
		if st.ExitCode != 0 {
			icon = "❌"
		}
		lines = append(lines, fmt.Sprintf("%s Step %d: `%s` (exit=%d, %dms)", icon, st.StepIndex, st.Cmd, st.ExitCode, st.Duration.Milliseconds()))
		if o := strings.TrimSpace(st.Stdout); o != "" {
			lines = append(lines, "   stdout: "+truncate(o, stepTextLimit))
		}
		if e := strings.TrimSpace(st.Stderr); e != "" {
			lines = append(lines, "   stderr: "+truncate(e, stepTextLimit))
		}
	}
	return textResult(s.truncate(strings.Join(lines, "\n"))), nil
}

// withStructured adds v as the result's structured content (MCP structuredContent), the
// machine-readable twin of its markdown text.
func withStructured(r *mcpsdk.CallToolResult, v any) *mcpsdk.CallToolResult {
	r.StructuredContent = v
	return r
}

// pythonStructured is a python call's structured content: bay's response without the images'
// data, which come back as image content already.
func pythonStructured(res *sdk.PythonResult) map[string]any {
	images := 0
	for _, img := range res.Data.Images {
		images += len(img)
	}
	out := map[string]any{
		"success": res.Success, "output": res.Output, "timed_out": res.TimedOut, "images": images,
		"execution_id": res.ExecutionID, "execution_time_ms": res.ExecutionTime.Milliseconds(),
		"kernel_restarted": res.KernelRestarted, "output_truncated": res.OutputTruncated,
	}
	if res.Error != "" {
		out["error"] = res.Error
	}
	return out
}

// networkText describes a sandbox's network policy for an agent.
func networkText(p *sdk.NetworkPolicy) string {
	switch p.Mode {
	case "open":
		return "open (the internet, not private addresses)"
	case "none":
		return "none (no network)"
	case "allowlist":
		return "allowlist: " + strings.Join(p.Allow, ", ")
	}
	return p.Mode
}
