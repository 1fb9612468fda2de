// Package sdk is the Go client of bay's public HTTP API v1 (the wire contract of
// api/bayapi): sandboxes, python and shell execution, the workspace filesystem (with streamed
// upload and download), execution history, cargos, profiles, admin GC, health, and the
// interactive terminal WebSocket. It depends on the standard library, api/bayapi,
// api/shipapi and github.com/coder/websocket only — nothing of bay's implementation.
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
