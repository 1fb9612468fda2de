// Package mcp is Shipyard's MCP server: the tools of the Python Shipyard Neo MCP server, with
// the same names, arguments and markdown results, implemented
// over the public Go SDK (package sdk) with the official Go MCP SDK. It links nothing of
// bay's implementation.
//
// Tools (reference names and arguments): create_sandbox, delete_sandbox, execute_python,
// execute_shell, read_file, write_file, list_files, delete_file, upload_file, download_file,
// get_execution_history, get_execution, get_last_execution, annotate_execution,
// execute_browser, execute_browser_batch, list_profiles. Ours, not in the reference:
// get_sandbox, list_sandboxes, stop_sandbox, extend_ttl, keepalive. Bay's skill library is
// served as resources (skills.go): every knowledge skill is skill://<name>/SKILL.md in
// resources/list, and skill://<name>/<path> reads any file of a skill. Every invocable skill
// is the tool skill.<id> (skilltools.go): its input schema is the manifest's interface.inputs,
// a call invokes it (waiting) in the project SHIPYARD_SKILL_PROJECT_ID (default "mcp") and
// returns its outputs as text and structured content; the list follows the library by polling
// it every SHIPYARD_SKILLS_POLL_SECONDS (10) while sessions exist and on tools/list, and a
// change sends notifications/tools/list_changed. The reference's skill lifecycle tools:
// create_skill_payload, get_skill_payload, create_skill_candidate, evaluate_skill_candidate,
// promote_skill_candidate, list_skill_candidates, list_skill_releases, delete_skill_release,
// delete_skill_candidate, rollback_skill_release. learn and include_trace of the browser tools
// are passed on to bay, which keeps the trace.
//
// Results are markdown TextContent like the reference's; images produced by python are
// returned as ImageContent (image/png). create_sandbox, execute_python and execute_shell also
// return structured content (bay's response; python's without the image data). Texts longer than Options.MaxToolTextChars are cut
// with the marker "…[truncated N chars; original=M]". Failures are tool errors
// (IsError: true) whose text starts with "**Validation Error:**" (argument checks: sandbox_id
// must match ^[A-Za-z0-9_-]{1,128}$, workspace paths must be non-empty, relative and free of
// ".." components, timeouts 1..300 (1..600 for a browser batch), commands a non-empty
// array of non-blank strings, ...), "**API Error:** [<code>] <message>" (an error
// answer of bay, followed by "details: <json>"), "**Timeout Error:**" or "**Error:**".
//
// Two ways to serve it:
//
//   - NewServer(client, opts) returns an *mcp.Server bound to one SDK client; `shipyard mcp`
//     runs it over stdio (mcp.StdioTransport).
//   - NewHTTPHandler(newClient) returns the streamable-HTTP handler bay mounts at /mcp. The
//     SDK client of every tool call is built by newClient from that call's HTTP request
//     headers (the Authorization header in particular), so MCP over HTTP is subject to the
//     same API-key authentication as the REST API: a call without a valid key yields the tool
//     error "**API Error:** [unauthorized] ...". LoopbackClients(addr) is that newClient for a
//     handler mounted inside bay (it forwards the caller's Bearer token and X-Owner to bay's
//     own listen address). Over HTTP the server runs inside bay, so the
//     two tools that touch the local filesystem (upload_file, download_file) are not offered.
//
// Configuration (OptionsFromEnv, same variables as the reference): SHIPYARD_DEFAULT_PROFILE
// (python-default), SHIPYARD_DEFAULT_TTL (3600; 0 = no expiry; invalid or negative → 3600),
// SHIPYARD_MAX_TOOL_TEXT_CHARS (12000), SHIPYARD_MAX_WRITE_FILE_BYTES (5 MiB),
// SHIPYARD_MAX_TRANSFER_FILE_BYTES (50 MiB), SHIPYARD_SDK_CALL_TIMEOUT (600 s per tool call);
// ours: SHIPYARD_ALLOWED_TOOLS, a comma-separated allow-list of tool names or globs
// ("execute_*,skill.*"; seed 002's allowed_tools) applied on stdio and HTTP alike.
package mcp
