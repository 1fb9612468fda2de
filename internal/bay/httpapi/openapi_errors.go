package httpapi

import (
	"slices"
	"sort"
	"strings"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// errorCodes lists, per HTTP status, the error codes an operation can answer with, derived
// from what the route is: every operation may fail internally; an authenticated one can be
// refused; a path with ids can name what the caller does not have; a body or query can fail
// the schema (422) or a semantic check (400); sandbox operations meet expired sandboxes, and
// the runtime calls meet a starting or failing runtime.
func errorCodes(rt route) map[int][]string {
	out := map[int][]string{500: {bayapi.CodeInternal}}
	add := func(status int, codes ...string) {
		for _, c := range codes {
			if !slices.Contains(out[status], c) {
				out[status] = append(out[status], c)
			}
		}
	}
	if rt.auth {
		add(401, bayapi.CodeUnauthorized)
	}
	if rt.doc.request != nil || rt.doc.multipart || len(rt.doc.query) > 0 || rt.doc.optionalReq {
		add(422, bayapi.CodeValidation)
	}
	if rt.doc.request != nil || rt.doc.multipart {
		add(400, bayapi.CodeValidation)
	}
	if rt.doc.idempotent {
		add(400, bayapi.CodeValidation) // a malformed Idempotency-Key
		add(409, bayapi.CodeConflict)   // the key reused with another request
	}
	if len(pathParams(rt.pattern)) > 0 {
		add(404, bayapi.CodeNotFound)
	}
	switch rt.doc.tag {
	case "capabilities", "filesystem":
		add(400, bayapi.CodeCapabilityNotSupported, bayapi.CodeValidation) // e.g. a malformed trace ref
		add(409, bayapi.CodeSandboxExpired)
		add(502, bayapi.CodeShipError)
		add(503, bayapi.CodeSessionNotReady, bayapi.CodeUnavailable)
		add(504, bayapi.CodeTimeout)
	case "sandboxes":
		if strings.HasPrefix(rt.pattern, bayapi.PathSandbox) && rt.method == "POST" {
			add(409, bayapi.CodeSandboxExpired)
		}
	case "jobs":
		// Jobs run through the sandbox's runtime like the capability calls; a key reused for
		// another start conflicts.
		add(400, bayapi.CodeValidation, bayapi.CodeCapabilityNotSupported, bayapi.CodeInvalidPath)
		add(409, bayapi.CodeConflict, bayapi.CodeSandboxExpired)
		add(502, bayapi.CodeShipError)
		add(503, bayapi.CodeSessionNotReady, bayapi.CodeUnavailable)
		add(504, bayapi.CodeTimeout)
	case "execs":
		// Policies can only tighten; inputs are paths; the queue can be full; the engine can
		// be away.
		add(400, bayapi.CodeValidation, bayapi.CodePolicyViolation, bayapi.CodeCapabilityNotSupported, bayapi.CodeInvalidPath)
		add(404, bayapi.CodeFileNotFound) // an artifact the exec did not leave
		add(409, bayapi.CodeConflict)
		add(413, bayapi.CodePayloadTooLarge)
		add(429, bayapi.CodeQuotaExceeded)
		add(503, bayapi.CodeUnavailable)
		add(504, bayapi.CodeTimeout)
	case "skills":
		// The library's admin routes need an admin key; uploads and payloads are bounded.
		add(400, bayapi.CodeValidation)
		add(403, bayapi.CodeForbidden)
		add(409, bayapi.CodeConflict)
		add(413, bayapi.CodePayloadTooLarge)
		add(503, bayapi.CodeUnavailable)
	}
	if rt.doc.tag == "filesystem" || rt.doc.tag == "capabilities" {
		// Paths, and the cwd of a command, are checked like files.
		add(400, bayapi.CodeInvalidPath, bayapi.CodeIsADirectory, bayapi.CodeNotADirectory)
		add(404, bayapi.CodeFileNotFound)
	}
	if rt.doc.tag == "filesystem" || rt.doc.tag == "capabilities" {
		// Code, commands and files written, uploaded, read or downloaded are bounded (the
		// limits settings).
		add(413, bayapi.CodePayloadTooLarge)
	}
	switch rt.doc.id {
	case "createSandbox":
		add(404, bayapi.CodeNotFound)    // cargo_id names no cargo of the caller
		add(409, bayapi.CodeConflict)    // cargo_id names a managed cargo
		add(503, bayapi.CodeUnavailable) // the profile's image is being built by bay
	case "extendTTL":
		add(409, bayapi.CodeSandboxExpired, bayapi.CodeSandboxTTLInfinite)
	case "uploadFile":
		add(413, bayapi.CodePayloadTooLarge)
	case "deleteCargo":
		add(409, bayapi.CodeConflict)
	case "setNetwork", "networkEvents":
		add(400, bayapi.CodeValidation)
		add(409, bayapi.CodeSandboxExpired)
		add(503, bayapi.CodeUnavailable)
	case "gcRun":
		add(423, bayapi.CodeGCRunning)
		add(503, bayapi.CodeUnavailable)
	case "gcStatus", "sandboxMetrics":
		add(503, bayapi.CodeUnavailable)
	case "ready":
		add(503, bayapi.CodeUnavailable)
	case "downloadExecArtifact", "getSkillFile":
		add(400, bayapi.CodeInvalidPath)
		add(404, bayapi.CodeFileNotFound)
		add(413, bayapi.CodePayloadTooLarge)
	case "createAPIKey", "listAPIKeys", "revokeAPIKey", "listOwners", "warmPoolStatus":
		// Admin keys only; a configured or the last admin key cannot be revoked, and the
		// number of stored keys is bounded.
		add(403, bayapi.CodeForbidden)
		add(503, bayapi.CodeUnavailable)
		if rt.doc.id == "createAPIKey" || rt.doc.id == "revokeAPIKey" {
			add(409, bayapi.CodeConflict)
		}
	case "uploadSkill", "validateSkill", "deleteSkill":
		add(403, bayapi.CodeForbidden)
		add(413, bayapi.CodePayloadTooLarge)
		add(409, bayapi.CodeConflict)
	case "createExec", "invokeSkill":
		add(400, bayapi.CodePolicyViolation, bayapi.CodeCapabilityNotSupported, bayapi.CodeInvalidPath)
		add(413, bayapi.CodePayloadTooLarge)
		add(429, bayapi.CodeQuotaExceeded)
		add(503, bayapi.CodeUnavailable)
	}
	for _, codes := range out {
		sort.Strings(codes)
	}
	return out
}

// errorResponse is the OpenAPI response of one error status: the one envelope, with the
// codes it can carry as an enum of error.code.
func errorResponse(status int, codes []string, envelope map[string]any) map[string]any {
	desc := "Error envelope; error.code is " + strings.Join(codes, ", ")
	if status == 422 {
		desc += " (schema validation: the envelope plus FastAPI's detail list)"
	}
	return map[string]any{"description": desc, "content": map[string]any{"application/json": map[string]any{
		"schema": map[string]any{"allOf": []any{envelope, map[string]any{
			"type": "object", "required": []string{"error"},
			"properties": map[string]any{"error": map[string]any{"type": "object", "required": []string{"code", "message", "request_id"},
				"properties": map[string]any{"code": map[string]any{"type": "string", "enum": codes}}}},
		}}},
	}}}
}

// mcpPath describes the MCP server when it is mounted (at bayapi.PathMCP)
// (streamable HTTP: JSON-RPC 2.0 messages POSTed, answered as JSON or an event stream; GET
// opens the server's event stream, DELETE ends the session), authenticated like the API.
func mcpPath(pattern string) map[string]any {
	op := func(method, summary string) map[string]any {
		return map[string]any{
			"operationId": "mcp" + method, "summary": summary, "tags": []string{"mcp"},
			"description": "Model Context Protocol server (streamable HTTP transport) at " + pattern + ": the sandbox tools over bay's own API with the caller's key.",
			"security":    []any{map[string]any{"bearer": []string{}}},
			"responses": map[string]any{
				"200": map[string]any{"description": "JSON-RPC response (application/json) or an event stream (text/event-stream)"},
				"401": map[string]any{"description": "Error envelope; error.code is unauthorized (with WWW-Authenticate: Bearer)"},
			},
		}
	}
	return map[string]any{
		"post":   op("Post", "Send JSON-RPC messages (initialize, tools/list, tools/call, ...)"),
		"get":    op("Get", "Open the server-to-client event stream of a session"),
		"delete": op("Delete", "End a session"),
	}
}
