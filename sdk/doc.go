// Package sdk is the Go client of bay's public HTTP API v1 (the wire contract of
// api/bayapi): sandboxes, python and shell execution, the workspace filesystem (with streamed
// upload and download), execution history, cargos, profiles, admin GC, health, and the
// interactive terminal WebSocket. It depends on the standard library, api/bayapi,
// api/shipapi and github.com/coder/websocket only — nothing of bay's implementation.
//
// Result types are the SDK's own, with plain fields, and are stable: strings where the wire
// has a nullable string ("" is null), time.Time in UTC for the wire's offset-less timestamps
// (the zero time is null), time.Duration for the wire's milliseconds and seconds, and a
// value plus a flag where absence means something (Job.ExitCode with Job.Exited). Callers
// never need api/bayapi to read a result; each result type marshals to JSON as the wire
// object bay sent, so printing one prints bay's answer. Request types are plain as well
// (AnnotateRequest, GCRequest, ExecRequest, InvokeRequest, CandidateRequest, EvaluateRequest,
// PromoteRequest, SkillRunRequest).
//
// This replaced results that were api/bayapi wire structs (a breaking change for callers
// outside this repository): *bayapi.PythonExecResponse is now *PythonResult, ShellExecResponse
// ShellResult, BrowserExecResponse BrowserResult, ExecutionHistoryEntry HistoryEntry,
// CargoResponse Cargo, shipapi.FileInfo FileInfo, and so on (the bayapi name without its
// Response suffix, or XxxResult for the answer of an action); Sandbox and Job no longer embed
// SandboxResponse and JobResponse but carry the fields themselves. Callers replace
// `res.Error != nil` and `*res.Error` with `res.Error != ""` and `res.Error`,
// `ExecutionTimeMS` with `ExecutionTime.Milliseconds()`, `sb.ExpiresAt.Time` with
// `sb.ExpiresAt` (`== nil` with `.IsZero()`), `*job.ExitCode` with `job.ExitCode` guarded by
// `job.Exited`, and build requests from the SDK's request types instead of bayapi's. The
// constants of api/bayapi (error codes, statuses, exec types) are unchanged.
//
// Construct a Client with New or NewFromEnv. Every method takes a context; every non-2xx
// answer is an *Error carrying the wire code (use IsCode, IsNotFound, AsError). Safe
// requests are retried with backoff; see Client for the exact policy. The subpackage sdktest
// is an in-memory fake bay for testing code that uses this package.
//
//	c, _ := sdk.NewFromEnv()
//	sb, _ := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{TTL: time.Hour})
//	defer sb.Delete(context.WithoutCancel(ctx))
//	res, _ := sb.Python(ctx, "print(1+1)")
package sdk
