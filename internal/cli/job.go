package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

// jobCmd is `shipyard job start|ls|status|logs|cancel`.
func (a *app) jobCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "job", Short: "Long-running commands: start, list, follow, cancel",
		Long: `Jobs are long-running shell or Python commands. A job starts without waiting; its output
stays in the sandbox (capped, with flags) and can be read or followed from any byte offset
while it runs and after it ended.`}
	cmd.AddCommand(a.jobStartCmd(), a.jobLsCmd(), a.jobStatusCmd(), a.jobLogsCmd(), a.jobCancelCmd())
	return cmd
}

func (a *app) jobStartCmd() *cobra.Command {
	var f execFlags
	var python, follow bool
	var cwd, key string
	cmd := &cobra.Command{Use: "start <sandbox> [command | -]", Short: "Start a job (bash, or Python with --python)",
		Long: `Start a job and print its id. The command (or with --python the program) comes from the
argument(s), from -f FILE, or from stdin. With --follow the output is printed as it comes and
the exit code is the job's. --idempotency-key makes a retry return the job the key started
instead of running the command again.`,
		Args: rangeArgs(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			text, err := a.source(args, &f, "command")
			if err != nil {
				return err
			}
			req := sdk.JobRequest{Kind: bayapi.JobKindShell, Command: text, Cwd: cwd, Timeout: time.Duration(f.execTimeout) * time.Second,
				Description: f.description, Tags: f.tags}
			if python {
				req = sdk.JobRequest{Kind: bayapi.JobKindPython, Code: text, Cwd: cwd, Timeout: time.Duration(f.execTimeout) * time.Second,
					Description: f.description, Tags: f.tags}
			}
			var opts []sdk.CallOption
			if key != "" {
				opts = append(opts, sdk.WithIdempotencyKey(key))
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				j, err := c.StartJob(ctx, args[0], req, opts...)
				if err != nil {
					return err
				}
				if !follow {
					return a.show(j, func() { fmt.Fprintln(a.stdout, j.JobID) })
				}
				fmt.Fprintln(a.stderr, "job", j.JobID)
				return a.followJob(ctx, j)
			})
		}}
	cmd.Flags().StringVarP(&f.file, "file", "f", "", "read the command from this file ('-' = stdin)")
	cmd.Flags().IntVar(&f.execTimeout, "job-timeout", 0, "job timeout in seconds (default: bay's maximum, 24 h)")
	cmd.Flags().StringVar(&f.description, "description", "", "description stored with the job")
	cmd.Flags().StringVar(&f.tags, "tags", "", "comma-separated tags stored with the job")
	cmd.Flags().BoolVar(&python, "python", false, "the job is a Python program")
	cmd.Flags().BoolVarP(&follow, "follow", "F", false, "print the output as it comes and exit with the job's code")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory relative to /workspace")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "a retry with the same key returns the same job")
	return cmd
}

// followJob prints a job's output as it comes (stdout and stderr to ours) and returns the
// job's exit status.
func (a *app) followJob(ctx context.Context, j *sdk.Job) error {
	err := j.Follow(ctx, 0, 0, func(stream string, c sdk.JobChunk) error {
		w := a.stdout
		if stream == bayapi.JobEventStderr {
			w = a.stderr
		}
		_, err := io.WriteString(w, c.Data)
		return err
	})
	if err != nil {
		return err
	}
	return jobExit(j, a.stderr)
}

// jobExit is the exit status of an ended job: its exit code, 124 timed out, 130 cancelled,
// 70 lost (with the reason on stderr).
func jobExit(j *sdk.Job, stderr io.Writer) error {
	if j.Reason != "" {
		fmt.Fprintf(stderr, "shipyard: job %s: %s\n", j.Status, j.Reason)
	}
	switch j.Status {
	case bayapi.JobSucceeded:
		return nil
	case bayapi.JobTimedOut:
		return exitCode(124)
	case bayapi.JobCancelled:
		return exitCode(130)
	case bayapi.JobLost:
		return exitCode(ExitServer)
	}
	if j.Exited {
		return commandExit(j.ExitCode)
	}
	return exitCode(ExitFailure)
}

func (a *app) jobLsCmd() *cobra.Command {
	var status string
	var limit, offset int
	cmd := &cobra.Command{Use: "ls <sandbox>", Short: "List a sandbox's jobs, newest first", Args: rangeArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				l, err := c.ListJobs(ctx, args[0], status, limit, offset)
				if err != nil {
					return err
				}
				return a.show(l, func() {
					tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "JOB\tKIND\tSTATUS\tEXIT\tSTARTED\tCOMMAND")
					for _, j := range l.Items {
						exit := "-"
						if j.Exited {
							exit = fmt.Sprint(j.ExitCode)
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.JobID, j.Kind, j.Status, exit,
							j.CreatedAt.Format("2006-01-02 15:04:05"), oneLine(j.Command, 50))
					}
					tw.Flush()
				})
			})
		}}
	cmd.Flags().StringVar(&status, "status", "", "only jobs with this status (running, succeeded, failed, timed_out, cancelled, lost)")
	cmd.Flags().IntVar(&limit, "limit", 0, "page size (default 50)")
	cmd.Flags().IntVar(&offset, "offset", 0, "skip this many")
	return cmd
}

// oneLine is s on one line, cut to n runes.
func oneLine(s string, n int) string {
	r := []rune(s)
	for i, c := range r {
		if c == '\n' || c == '\r' || c == '\t' {
			r[i] = ' '
		}
	}
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return string(r)
}

func (a *app) jobStatusCmd() *cobra.Command {
	return &cobra.Command{Use: "status <sandbox> <job>", Short: "Show a job", Args: rangeArgs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				j, err := c.Job(ctx, args[0], args[1])
				if err != nil {
					return err
				}
				return a.show(j, func() {
					fmt.Fprintf(a.stdout, "job %s (%s) %s", j.JobID, j.Kind, j.Status)
					if j.Exited {
						fmt.Fprintf(a.stdout, ", exit code %d", j.ExitCode)
					}
					if j.Reason != "" {
						fmt.Fprintf(a.stdout, ": %s", j.Reason)
					}
					fmt.Fprintf(a.stdout, "\nstdout %d bytes%s, stderr %d bytes%s\n", j.Stdout.Bytes, cutNote(j.Stdout.Truncated),
						j.Stderr.Bytes, cutNote(j.Stderr.Truncated))
				})
			})
		}}
}

func cutNote(t bool) string {
	if t {
		return " (truncated)"
	}
	return ""
}

func (a *app) jobLogsCmd() *cobra.Command {
	var follow bool
	var stdoutOff, stderrOff int64
	cmd := &cobra.Command{Use: "logs <sandbox> <job>", Short: "Print a job's output (-f: follow it until the job ends)", Args: rangeArgs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				j, err := c.Job(ctx, args[0], args[1])
				if err != nil {
					return err
				}
				if follow {
					return a.followJob(ctx, j)
				}
				offs := [2]int64{stdoutOff, stderrOff}
				for {
					o, err := j.Output(ctx, offs[0], offs[1])
					if err != nil {
						return err
					}
					io.WriteString(a.stdout, o.Stdout.Data)
					io.WriteString(a.stderr, o.Stderr.Data)
					if o.Stdout.Next == offs[0] && o.Stderr.Next == offs[1] {
						return nil
					}
					offs = [2]int64{o.Stdout.Next, o.Stderr.Next}
				}
			})
		}}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the output until the job ends; exit with the job's code")
	cmd.Flags().Int64Var(&stdoutOff, "stdout-offset", 0, "start at this byte of stdout")
	cmd.Flags().Int64Var(&stderrOff, "stderr-offset", 0, "start at this byte of stderr")
	return cmd
}

func (a *app) jobCancelCmd() *cobra.Command {
	return &cobra.Command{Use: "cancel <sandbox> <job>", Short: "Cancel a job (SIGTERM to its process group, then SIGKILL)", Args: rangeArgs(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				j, err := c.Job(ctx, args[0], args[1])
				if err != nil {
					return err
				}
				if err := j.Cancel(ctx); err != nil {
					return err
				}
				return a.show(j, func() { fmt.Fprintf(a.stdout, "job %s %s\n", j.JobID, j.Status) })
			})
		}}
}

// streamPython runs a cell with its output printed as the kernel publishes it (python
// --stream): stdout and stderr as they are, a rich output's text/plain on stdout (others are
// noted on stderr); then the traceback, and exit 1 when the cell failed.
func (a *app) streamPython(ctx context.Context, c *sdk.Client, id string, req sdk.PythonRequest) error {
	res, err := c.ExecPythonStream(ctx, id, req, func(ev sdk.ExecEvent) error {
		switch {
		case ev.Display != nil:
			img := false
			for mime := range ev.Display.Data {
				if strings.HasPrefix(mime, "image/") {
					img = true
					fmt.Fprintf(a.stderr, "[%s output; use --output json to get it]\n", mime)
				}
			}
			if t, ok := ev.Display.Data["text/plain"]; ok && !img {
				_, err := io.WriteString(a.stdout, withNewline(t))
				return err
			}
		case ev.Stream == bayapi.JobEventStderr:
			_, err := io.WriteString(a.stderr, ev.Text)
			return err
		default:
			_, err := io.WriteString(a.stdout, ev.Text)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !res.Success {
		io.WriteString(a.stderr, withNewline(res.Error))
		return exitCode(ExitFailure)
	}
	return nil
}

// streamShell runs a shell command with its output printed as it comes (shell --stream) and
// exits with its status.
func (a *app) streamShell(ctx context.Context, c *sdk.Client, id string, req sdk.ShellRequest) error {
	res, err := c.ExecShellStream(ctx, id, req, func(stream, data string) error {
		w := a.stdout
		if stream == bayapi.JobEventStderr {
			w = a.stderr
		}
		_, err := io.WriteString(w, data)
		return err
	})
	if err != nil {
		return err
	}
	if res.ExitCode == -1 {
		io.WriteString(a.stderr, withNewline(res.Error))
	}
	if note := truncationNote(res); note != "" {
		io.WriteString(a.stderr, note)
	}
	return commandExit(res.ExitCode)
}
