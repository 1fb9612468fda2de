package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/shipyard-dev/shipyard/internal/mcp"
)

func (a *app) termCmd() *cobra.Command {
	return &cobra.Command{Use: "term <sandbox>", Aliases: []string{"terminal", "attach"},
		Short: "Attach an interactive terminal to the sandbox (Ctrl-D in the shell ends it)",
		Long: `Open an interactive bash in the sandbox through bay's terminal WebSocket. The local
terminal is put in raw mode (every key, including Ctrl-C, goes to the remote shell), window
size changes are forwarded, and the terminal is restored when the remote shell exits (Ctrl-D
or "exit"). With a non-terminal stdin, input is forwarded as is and its end sends Ctrl-D.
The command exits with the remote shell's exit status ("exit 3" in the shell: 3).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			inFile, _ := a.stdin.(*os.File)
			outFile, _ := a.stdout.(*os.File)
			tty := inFile != nil && isTerminal(inFile)
			size := func() (int, int) {
				for _, f := range []*os.File{outFile, inFile} {
					if f != nil && isTerminal(f) {
						if w, h, err := term.GetSize(int(f.Fd())); err == nil {
							return w, h
						}
					}
				}
				return 80, 24
			}
			cols, rows := size()
			// Raw mode first, so that nothing typed after the remote prompt appears is
			// handled by the local line discipline; restored on every return path.
			if tty {
				old, err := term.MakeRaw(int(inFile.Fd()))
				if err != nil {
					return err
				}
				defer term.Restore(int(inFile.Fd()), old)
			}
			conn, err := c.Terminal(ctx, args[0], cols, rows)
			if err != nil {
				return err
			}
			defer conn.Close()
			if tty {
				winch := make(chan os.Signal, 1)
				signal.Notify(winch, syscall.SIGWINCH)
				defer signal.Stop(winch)
				go func() {
					for {
						select {
						case <-ctx.Done():
							return
						case <-winch:
							w, h := size()
							conn.Resize(ctx, w, h)
						}
					}
				}()
			}
			// Keystrokes → terminal. This goroutine may stay blocked in Read after the
			// session ends; the process exits right after.
			go func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := a.stdin.Read(buf)
					if n > 0 {
						if _, werr := conn.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						if !tty {
							conn.Write([]byte{0x04}) // end of input: Ctrl-D
						}
						return
					}
				}
			}()
			// Terminal output → stdout until the remote side closes; then the shell's status is
			// the command's.
			_, err = io.Copy(a.stdout, conn)
			if err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
				return err
			}
			if status, ok := conn.ExitStatus(); ok && status != 0 {
				return exitCode(status)
			}
			return nil
		}}
}

func (a *app) mcpCmd() *cobra.Command {
	return &cobra.Command{Use: "mcp", Short: "Serve the Shipyard MCP tools over stdio",
		Long: `Serve Shipyard's MCP server (the reference Shipyard Neo MCP tools plus get_sandbox,
list_sandboxes, stop_sandbox, extend_ttl and keepalive) over stdio, for agent hosts.
Configuration: the global --endpoint/--token (or SHIPYARD_ENDPOINT/SHIPYARD_TOKEN,
SHIPYARD_ENDPOINT_URL/SHIPYARD_ACCESS_TOKEN, BAY_ENDPOINT/BAY_TOKEN), SHIPYARD_DEFAULT_PROFILE,
SHIPYARD_DEFAULT_TTL, SHIPYARD_MAX_TOOL_TEXT_CHARS, SHIPYARD_MAX_WRITE_FILE_BYTES,
SHIPYARD_MAX_TRANSFER_FILE_BYTES, SHIPYARD_SDK_CALL_TIMEOUT, SHIPYARD_ALLOWED_TOOLS (comma-separated
tool names or globs such as "execute_*,skill.*": only those tools are offered).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			opts := mcp.OptionsFromEnv()
			opts.Version = Version
			opts.Logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("component", "mcp")
			srv := mcp.NewServer(c, opts)
			err = srv.Run(cmd.Context(), &mcpsdk.IOTransport{Reader: readCloser{a.stdin}, Writer: writeCloser{a.stdout}})
			if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, io.EOF)) {
				return nil
			}
			return err
		}}
}

type readCloser struct{ io.Reader }

func (readCloser) Close() error { return nil }

type writeCloser struct{ io.Writer }

func (writeCloser) Close() error { return nil }
