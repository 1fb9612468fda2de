package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/sdk"
)

// browserFlags are the options both browser commands take.
type browserFlags struct {
	execTimeout  int
	description  string
	tags         string
	learn        bool
	includeTrace bool
}

func (f *browserFlags) register(cmd *cobra.Command, timeoutHelp string) {
	cmd.Flags().IntVar(&f.execTimeout, "exec-timeout", 0, timeoutHelp)
	cmd.Flags().StringVar(&f.description, "description", "", "description stored in the history")
	cmd.Flags().StringVar(&f.tags, "tags", "", "comma-separated tags stored in the history")
	cmd.Flags().BoolVar(&f.learn, "learn", false, "mark the execution as skill-learning evidence (its trace is kept)")
	cmd.Flags().BoolVar(&f.includeTrace, "include-trace", false, "keep a trace of the execution and print its trace_ref")
}

func (a *app) browserCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "browser", Short: "Drive the sandbox's headless browser",
		Long: `Run browser commands (agent-browser syntax, without the "agent-browser" prefix) in the
sandbox's browser. The sandbox's profile must have the browser capability (e.g. browser-python).`}
	cmd.AddCommand(a.browserExecCmd(), a.browserBatchCmd())
	return cmd
}

// commandExit maps a remote exit status to the CLI's: the status itself (0-255), 124 when
// bay reports -1 (timed out or not run).
func commandExit(code int) error {
	switch {
	case code < 0:
		return exitCode(ExitShellTimeout)
	case code > 0:
		return exitCode(code & 0xff)
	}
	return nil
}

func (a *app) browserExecCmd() *cobra.Command {
	var f browserFlags
	var shot string
	var force, full bool
	cmd := &cobra.Command{Use: "exec <sandbox> [command [word...]]", Short: "Run one browser command",
		Long: `Run one browser command, e.g.  shipyard browser exec SB open https://example.com
One argument is sent as the command line as is ("open https://example.com"); several
arguments are words, quoted as needed (fill @e1 "two words"). The command's stdout is printed,
its stderr goes to stderr, and the exit code is the command's (124 if bay reports -1).

--screenshot FILE then writes a PNG of the page to a temporary workspace file, downloads it to
FILE and removes the workspace copy; the command may be left out to only take the screenshot.
An existing FILE is kept unless --force is given.`,
		Args: rangeArgs(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			line := ""
			switch {
			case len(args) == 2:
				line = args[1]
			case len(args) > 2:
				line = sdk.BrowserCommand(args[1:]...)
			}
			if line == "" && shot == "" {
				return usageErr("no browser command given (and no --screenshot)")
			}
			if shot != "" && !force {
				if _, err := os.Lstat(shot); err == nil {
					return usageErr("%s exists; use --force to overwrite it", shot)
				}
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				var res *sdk.BrowserResult
				if line != "" {
					var err error
					res, err = c.ExecBrowser(ctx, args[0], sdk.BrowserRequest{Cmd: line, Timeout: time.Duration(f.execTimeout) * time.Second,
						Description: f.description, Tags: f.tags, Learn: f.learn, IncludeTrace: f.includeTrace})
					if err != nil {
						return err
					}
					text := func() {
						io.WriteString(a.stdout, res.Output)
						io.WriteString(a.stderr, withNewline(res.Error))
						if res.TraceRef != "" {
							fmt.Fprintf(a.stderr, "trace_ref: %s\n", res.TraceRef)
						}
					}
					if res.ExitCode != 0 || shot == "" {
						if err := a.show(res, text); err != nil {
							return err
						}
						return commandExit(res.ExitCode)
					}
					if !a.json() {
						text() // the screenshot's line follows
					}
				}
				n, err := a.screenshot(ctx, c, args[0], shot, full, force)
				if err != nil {
					var ce *sdk.BrowserCommandError
					if errors.As(err, &ce) {
						fmt.Fprintf(a.stderr, "Error: screenshot failed: %s\n", strings.TrimSpace(ce.Stderr))
						return commandExit(ce.ExitCode)
					}
					return err
				}
				return a.show(map[string]any{"result": res, "screenshot": map[string]any{"local_path": shot, "size": n}}, func() {
					fmt.Fprintf(a.stdout, "screenshot saved to %s (%d bytes)\n", shot, n)
				})
			})
		}}
	f.register(cmd, "execution timeout in seconds, 1-300 (default 30)")
	cmd.Flags().StringVar(&shot, "screenshot", "", "then download a PNG screenshot of the page to this local file")
	cmd.Flags().BoolVar(&full, "full", false, "with --screenshot: the full page, not only the viewport")
	cmd.Flags().BoolVar(&force, "force", false, "with --screenshot: overwrite an existing file")
	return cmd
}

// screenshot takes a screenshot into a temporary workspace file, downloads it next to local
// and moves it into place (without force, never over a file that appeared meanwhile), then
// removes the workspace copy. A failure leaves no local file behind.
func (a *app) screenshot(ctx context.Context, c *sdk.Client, id, local string, full, force bool) (int64, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	remote := ".shipyard-screenshot-" + hex.EncodeToString(b[:]) + ".png"
	tmp, err := os.CreateTemp(filepath.Dir(local), "."+filepath.Base(local)+".part-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	res, n, err := c.Screenshot(ctx, id, remote, full, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if res != nil && res.ExitCode == 0 {
		// The command ran and wrote the file: remove the workspace copy whatever happens next.
		defer func() {
			if derr := c.DeleteFile(context.WithoutCancel(ctx), id, remote); derr != nil {
				fmt.Fprintf(a.stderr, "shipyard: could not remove the workspace copy %s: %v\n", remote, derr)
			}
		}()
	}
	if err != nil {
		return 0, err
	}
	if force {
		return n, os.Rename(tmp.Name(), local)
	}
	if err := os.Link(tmp.Name(), local); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return 0, usageErr("%s exists; use --force to overwrite it", local)
		}
		return 0, err
	}
	return n, nil
}

// batchCommands returns the commands: one per argument, or one per line of -f FILE / stdin
// ('-'), skipping blank lines and lines starting with '#'.
func (a *app) batchCommands(args []string, file string) ([]string, error) {
	if file != "" && len(args) > 1 {
		return nil, usageErr("give the commands either as arguments or with -f, not both")
	}
	if len(args) > 1 {
		return args[1:], nil
	}
	var r io.Reader
	switch file {
	case "":
		if f, ok := a.stdin.(*os.File); ok && isTerminal(f) {
			return nil, usageErr("no commands given: pass them as arguments, with -f FILE, or on stdin")
		}
		r = a.stdin
	case "-":
		r = a.stdin
	default:
		fh, err := os.Open(file)
		if err != nil {
			return nil, usageErr("%v", err) // os.ReadFile names the file
		}
		defer fh.Close()
		r = fh
	}
	var cmds []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			cmds = append(cmds, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, usageErr("read commands: %v", err)
	}
	if len(cmds) == 0 {
		return nil, usageErr("no commands given")
	}
	return cmds, nil
}

func (a *app) browserBatchCmd() *cobra.Command {
	var f browserFlags
	var file string
	var cont bool
	cmd := &cobra.Command{Use: "batch <sandbox> [command...]", Short: "Run browser commands in order in one request",
		Long: `Run browser commands in order within one request. Each argument is one command line
("open https://example.com" "get title"); or -f FILE (or '-' / stdin) holds one command per
line, blank lines and lines starting with '#' skipped. Each step's output is printed under a
"--- step" header; the batch stops at the first failing step unless --continue-on-error.
The exit code is 0 when every command ran and succeeded, else the first failing command's
exit code (124 when the batch ran out of time).`,
		Args: rangeArgs(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cmds, err := a.batchCommands(args, file)
			if err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				res, err := c.ExecBrowserBatch(ctx, args[0], sdk.BrowserBatchRequest{Commands: cmds, Timeout: time.Duration(f.execTimeout) * time.Second,
					ContinueOnError: cont, Description: f.description, Tags: f.tags, Learn: f.learn, IncludeTrace: f.includeTrace})
				if err != nil {
					return err
				}
				err = a.show(res, func() {
					for _, st := range res.Results {
						fmt.Fprintf(a.stdout, "--- step %d/%d: %s (exit %d, %d ms)\n", st.StepIndex+1, res.TotalSteps, st.Cmd, st.ExitCode, st.Duration.Milliseconds())
						io.WriteString(a.stdout, withNewline(st.Stdout))
						if st.Stderr != "" {
							io.WriteString(a.stderr, withNewline(st.Stderr))
						}
					}
					state := "succeeded"
					if !res.Success {
						state = "failed"
					}
					fmt.Fprintf(a.stderr, "batch %s: %d/%d steps ran, %d ms\n", state, res.CompletedSteps, res.TotalSteps, res.Duration.Milliseconds())
					if res.TraceRef != "" {
						fmt.Fprintf(a.stderr, "trace_ref: %s\n", res.TraceRef)
					}
				})
				if err != nil {
					return err
				}
				if res.Success {
					return nil
				}
				for _, st := range res.Results {
					if st.ExitCode != 0 {
						return commandExit(st.ExitCode)
					}
				}
				return exitCode(ExitShellTimeout) // every step that ran succeeded: the budget ran out
			})
		}}
	f.register(cmd, fmt.Sprintf("time budget of the whole batch in seconds, 1-%d (default %d)", sdk.MaxBrowserBatchTimeout, sdk.DefaultBrowserBatchTimeout))
	cmd.Flags().StringVarP(&file, "file", "f", "", "read the commands from this file, one per line ('-' = stdin)")
	cmd.Flags().BoolVar(&cont, "continue-on-error", false, "run the remaining commands after a failing one")
	return cmd
}
