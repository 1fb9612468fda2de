// Package cli implements the shipyard command-line client over the public Go SDK (package
// sdk): sandbox lifecycle, python, shell and browser execution, workspace files with
// streamed transfers, history, profiles, an interactive terminal (term) and the MCP server over stdio
// (mcp). It links nothing of bay's implementation.
//
// Exit codes (stable, for scripts):
//
//	0    success
//	1    the python code raised (traceback on stderr), or an unexpected local error
//	N    shell, browser exec/batch: the remote command's exit status (0-255)
//	124  the python code or the shell or browser command ran past its timeout in the sandbox
//	     (bay reports timed_out or exit status -1; a browser batch ran out of time)
//	64   usage error (bad flags or arguments)
//	65   request rejected by bay: validation_error, invalid_path, is_a_directory,
//	     not_a_directory, capability_not_supported, payload_too_large, headers_too_large,
//	     any other HTTP 4xx (never retried)
//	66   not_found, file_not_found
//	67   conflict, sandbox_expired, sandbox_ttl_infinite, gc_running
//	69   bay unreachable, or unavailable: session_not_ready, unavailable, HTTP 503
//	70   bay or runtime failure: ship_error, internal_error, other HTTP 5xx
//	75   timeout: bay's 504 timeout, or the --timeout deadline of the CLI
//	77   unauthorized, forbidden
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/version"
	"github.com/shipyard-dev/shipyard/sdk"
)

// Exit codes; see the package documentation.
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitUsage       = 64
	ExitRejected    = 65
	ExitNotFound    = 66
	ExitConflict    = 67
	ExitUnavailable = 69
	ExitServer      = 70
	ExitTimeout     = 75
	ExitAuth        = 77
	// ExitShellTimeout is the exit code of python, shell and browser work that ran past its
	// timeout in the sandbox (a remote exit status of -1, a python cell bay reports timed out).
	ExitShellTimeout = 124
)

// Version is the CLI version: Shipyard's one version (internal/version), injected from git.
var Version = version.Version

// exitError carries an exit code; its message (if any) is printed to stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func exitCode(code int) error { return &exitError{code: code} }

func usageErr(format string, a ...any) error {
	return &exitError{code: ExitUsage, msg: fmt.Sprintf(format, a...)}
}

// app holds the global flags and streams of one invocation.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	endpoint string
	token    string
	output   string
	timeout  time.Duration
}

// Main runs the CLI with os.Args and the process streams and returns the exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// Run runs the CLI with args and returns the exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	return a.report(err)
}

func envFirst(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "shipyard",
		Short: "Shipyard client: sandboxes for AI agents",
		Long: `shipyard talks to a bay (Shipyard's control plane) over its public HTTP API.

Endpoint and token come from --endpoint/--token, else SHIPYARD_ENDPOINT/SHIPYARD_TOKEN,
else BAY_ENDPOINT/BAY_TOKEN (default endpoint http://127.0.0.1:8114, no token).

Exit codes: 0 ok; 1 python raised or local error; shell and browser: the remote exit
status; 124 python, shell or browser ran past its timeout in the sandbox; 64 usage; 65 rejected (validation); 66 not found;
67 conflict; 69 bay unavailable/unreachable; 70 bay/runtime failure; 75 timeout;
77 unauthorized.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageErr("%v", err) })
	pf := root.PersistentFlags()
	pf.StringVar(&a.endpoint, "endpoint", "", "bay endpoint URL (env SHIPYARD_ENDPOINT, BAY_ENDPOINT)")
	pf.StringVar(&a.token, "token", "", "API key (env SHIPYARD_TOKEN, BAY_TOKEN)")
	pf.StringVarP(&a.output, "output", "o", "text", "output format: text or json")
	pf.DurationVar(&a.timeout, "timeout", 0, "overall deadline of the command (e.g. 2m; 0 = none)")
	root.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		if a.output != "text" && a.output != "json" {
			return usageErr("--output must be text or json, not %q", a.output)
		}
		return nil
	}
	root.AddCommand(a.sandboxCmd(), a.pythonCmd(), a.shellCmd(), a.fsCmd(), a.historyCmd(), a.profilesCmd(),
		a.cargoCmd(), a.termCmd(), a.browserCmd(), a.mcpCmd(), a.healthCmd(), a.skillsCmd(), a.execsCmd(), a.jobCmd(),
		a.versionCmd(), a.skillCmd())
	a.addCompletions(root)
	return root
}

// client builds the SDK client from the global flags and the environment.
func (a *app) client() (*sdk.Client, error) {
	endpoint := a.endpoint
	if endpoint == "" {
		endpoint = envFirst(sdk.EnvEndpoint, "SHIPYARD_ENDPOINT_URL", sdk.EnvBayEndpoint)
	}
	if endpoint == "" {
		endpoint = sdk.DefaultEndpoint
	}
	token := a.token
	if token == "" {
		token = envFirst(sdk.EnvToken, "SHIPYARD_ACCESS_TOKEN", sdk.EnvBayToken)
	}
	c, err := sdk.New(endpoint, token, sdk.WithUserAgent("shipyard-cli/"+Version))
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return c, nil
}

// ctx applies --timeout.
func (a *app) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if a.timeout > 0 {
		return context.WithTimeout(ctx, a.timeout)
	}
	return context.WithCancel(ctx)
}

// withClient runs fn with the SDK client of the global flags and a context bounded by
// --timeout, cancelled when fn returns. It is the opening of every command that makes
// bay calls under the command's deadline; a client error (bad endpoint) is a usage error
// returned before fn runs.
func (a *app) withClient(cmd *cobra.Command, fn func(ctx context.Context, c *sdk.Client) error) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx(cmd)
	defer cancel()
	return fn(ctx, c)
}

func (a *app) json() bool { return a.output == "json" }

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// report prints err and maps it to an exit code.
func (a *app) report(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(a.stderr, "Error:", ee.msg)
		}
		return ee.code
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		if a.json() {
			enc := json.NewEncoder(a.stderr)
			enc.SetEscapeHTML(false)
			enc.Encode(bayapi.ErrorEnvelope{Error: bayapi.ErrorBody{Code: apiErr.Code, Message: apiErr.Message,
				RequestID: apiErr.RequestID, Details: apiErr.Details}})
		} else {
			fmt.Fprintf(a.stderr, "Error: [%s] %s\n", apiErr.Code, apiErr.Message)
			if len(apiErr.Details) > 0 {
				b, _ := json.Marshal(apiErr.Details)
				fmt.Fprintf(a.stderr, "  details: %s\n", b)
			}
			fmt.Fprintf(a.stderr, "  (HTTP %d", apiErr.Status)
			if apiErr.RequestID != "" {
				fmt.Fprintf(a.stderr, ", request_id %s", apiErr.RequestID)
			}
			fmt.Fprintln(a.stderr, ")")
			if apiErr.Code == bayapi.CodeUnauthorized {
				fmt.Fprintln(a.stderr, "  The API key comes from --token, else $SHIPYARD_TOKEN, else $BAY_TOKEN (bay's first start writes one to its credentials.json).")
			}
		}
		return codeForAPI(apiErr)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintln(a.stderr, "Error: timed out:", err)
		return ExitTimeout
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(a.stderr, "Error: interrupted")
		return 130
	}
	var netErr net.Error
	var opErr *net.OpError
	if errors.As(err, &opErr) || errors.As(err, &netErr) || strings.Contains(err.Error(), "connection refused") {
		fmt.Fprintln(a.stderr, "Error: cannot reach bay:", err)
		return ExitUnavailable
	}
	if strings.Contains(err.Error(), "unknown command") || strings.Contains(err.Error(), "arg(s)") ||
		strings.Contains(err.Error(), "requires at least") || strings.Contains(err.Error(), "accepts ") {
		fmt.Fprintln(a.stderr, "Error:", err)
		return ExitUsage
	}
	fmt.Fprintln(a.stderr, "Error:", err)
	return ExitFailure
}

func codeForAPI(e *sdk.Error) int {
	switch e.Code {
	case bayapi.CodeNotFound, bayapi.CodeFileNotFound:
		return ExitNotFound
	case bayapi.CodeUnauthorized, bayapi.CodeForbidden:
		return ExitAuth
	case bayapi.CodeConflict, bayapi.CodeSandboxExpired, bayapi.CodeSandboxTTLInfinite, bayapi.CodeGCRunning:
		return ExitConflict
	case bayapi.CodeValidation, bayapi.CodeInvalidPath, bayapi.CodeCapabilityNotSupported, bayapi.CodePayloadTooLarge,
		bayapi.CodeIsADirectory, bayapi.CodeNotADirectory, bayapi.CodeHeadersTooLarge:
		return ExitRejected
	case bayapi.CodeSessionNotReady, bayapi.CodeUnavailable:
		return ExitUnavailable
	case bayapi.CodeTimeout:
		return ExitTimeout
	case bayapi.CodeShipError, bayapi.CodeInternal:
		return ExitServer
	}
	switch {
	case e.Status == 401 || e.Status == 403:
		return ExitAuth
	case e.Status == 404:
		return ExitNotFound
	case e.Status == 409 || e.Status == 423:
		return ExitConflict
	case e.Status == 503 || e.Status == 429:
		return ExitUnavailable
	case e.Status == 504:
		return ExitTimeout
	case e.Status >= 500:
		return ExitServer
	case e.Status >= 400:
		return ExitRejected
	}
	return ExitFailure
}
