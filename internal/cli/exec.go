package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/sdk"
)

type execFlags struct {
	file        string
	execTimeout int
	include     bool
	description string
	tags        string
}

func (f *execFlags) register(cmd *cobra.Command, what string) {
	cmd.Flags().StringVarP(&f.file, "file", "f", "", "read the "+what+" from this file ('-' = stdin)")
	cmd.Flags().IntVar(&f.execTimeout, "exec-timeout", 0, "execution timeout in seconds, 1-300 (default 30)")
	cmd.Flags().BoolVar(&f.include, "include-code", false, "echo the "+what+" in the JSON result")
	cmd.Flags().StringVar(&f.description, "description", "", "description stored in the history")
	cmd.Flags().StringVar(&f.tags, "tags", "", "comma-separated tags stored in the history")
}

func (f *execFlags) options() sdk.ExecOptions {
	return sdk.ExecOptions{Timeout: time.Duration(f.execTimeout) * time.Second, IncludeCode: f.include, Description: f.description, Tags: f.tags}
}

// source returns the code: the argument, the -f file, or stdin ("-" or no argument).
func (a *app) source(args []string, f *execFlags, what string) (string, error) {
	switch {
	case f.file != "" && len(args) > 1:
		return "", usageErr("give the %s either as an argument or with -f, not both", what)
	case f.file == "-":
		return a.readStdin(what)
	case f.file != "":
		b, err := os.ReadFile(f.file)
		if err != nil {
			return "", usageErr("%v", err) // os.ReadFile names the file
		}
		return string(b), nil
	case len(args) > 1 && args[1] == "-":
		return a.readStdin(what)
	case len(args) > 1:
		return strings.Join(args[1:], " "), nil
	}
	if file, ok := a.stdin.(*os.File); ok && isTerminal(file) {
		return "", usageErr("no %s given: pass it as an argument, with -f FILE, or on stdin", what)
	}
	return a.readStdin(what)
}

func (a *app) readStdin(what string) (string, error) {
	b, err := io.ReadAll(a.stdin)
	if err != nil {
		return "", fmt.Errorf("read %s from stdin: %w", what, err)
	}
	return string(b), nil
}

// show prints res as JSON with --output json, else runs text, which prints it for people.
func (a *app) show(res any, text func()) error {
	if a.json() {
		return a.printJSON(res)
	}
	text()
	return nil
}

func withNewline(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

func (a *app) pythonCmd() *cobra.Command {
	var f execFlags
	var stream bool
	cmd := &cobra.Command{Use: "python <sandbox> [code | -]", Aliases: []string{"py"},
		Short: "Run Python in the sandbox's persistent kernel",
		Long: `Run Python code in the sandbox's persistent IPython kernel. The code comes from the
argument, from -f FILE, or from stdin ('-' or no argument). Output goes to stdout; if the code
raises, the traceback goes to stderr and the exit code is 1; if it runs past its timeout
(--exec-timeout) the exit code is 124, as for shell.`,
		Args: rangeArgs(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := a.source(args, &f, "code")
			if err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				req := sdk.PythonRequest{Code: code, ExecOptions: f.options()}
				if stream && !a.json() {
					return a.streamPython(ctx, c, args[0], req)
				}
				res, err := c.ExecPython(ctx, args[0], req)
				if err != nil {
					return err
				}
				err = a.show(res, func() {
					io.WriteString(a.stdout, withNewline(res.Output))
					for _, img := range res.Data.Images {
						for mime, b64 := range img {
							fmt.Fprintf(a.stderr, "[%s output, %d base64 bytes; use --output json to get it]\n", mime, len(b64))
						}
					}
					if !res.Success {
						io.WriteString(a.stderr, withNewline(res.Error))
					}
				})
				if err != nil {
					return err
				}
				switch {
				case res.TimedOut:
					return exitCode(ExitShellTimeout)
				case !res.Success:
					return exitCode(ExitFailure)
				}
				return nil
			})
		}}
	f.register(cmd, "code")
	cmd.Flags().BoolVar(&stream, "stream", false, "print stdout, stderr and rich outputs' text as the cell prints them (text output only)")
	return cmd
}

func (a *app) shellCmd() *cobra.Command {
	var f execFlags
	var cwd string
	var stream bool
	cmd := &cobra.Command{Use: "shell <sandbox> [command | -]", Aliases: []string{"sh"},
		Short: "Run a shell command in the sandbox",
		Long: `Run a command with bash in the sandbox. The command comes from the argument(s), from
-f FILE, or from stdin ('-' or no argument). stdout and stderr are printed; the exit code is
the command's (124 if bay reports it timed out).`,
		Args: rangeArgs(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			command, err := a.source(args, &f, "command")
			if err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if stream && !a.json() {
					return a.streamShell(ctx, c, args[0], sdk.ShellRequest{Command: command, Cwd: cwd, ExecOptions: f.options()})
				}
				res, err := c.ExecShell(ctx, args[0], sdk.ShellRequest{Command: command, Cwd: cwd, ExecOptions: f.options()})
				if err != nil {
					return err
				}
				err = a.show(res, func() {
					io.WriteString(a.stdout, withNewline(res.Output))
					io.WriteString(a.stderr, withNewline(res.Error))
					if note := truncationNote(res); note != "" {
						io.WriteString(a.stderr, note)
					}
				})
				if err != nil {
					return err
				}
				return commandExit(res.ExitCode)
			})
		}}
	f.register(cmd, "command")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory relative to /workspace")
	cmd.Flags().BoolVar(&stream, "stream", false, "print stdout and stderr as the command prints them (text output only)")
	return cmd
}

// truncationNote tells, on stderr, that the runtime cut an output longer than it keeps.
func truncationNote(res *sdk.ShellResult) string {
	var which []string
	if res.StdoutTruncated {
		which = append(which, "stdout")
	}
	if res.StderrTruncated {
		which = append(which, "stderr")
	}
	if len(which) == 0 {
		return ""
	}
	return "shipyard: " + strings.Join(which, " and ") + " cut by the sandbox: longer than it keeps\n"
}
