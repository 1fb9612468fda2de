package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/sdk"
)

// execsCmd is `shipyard execs`: audited one-shot executions (POST /v1/sandbox/execs).
func (a *app) execsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "execs", Short: "Audited one-shot executions in fresh containers without network"}
	var (
		python, noWait  bool
		inputs, envs    []string
		policy, taskID  string
		cwd, skill, cid string
	)
	run := &cobra.Command{Use: "run <project> [script | -]",
		Short: "Run a bash script (or Python code with --python) once, audited",
		Long: `Run a script once in a fresh container for a project: no network, uid 1000, the
project's inputs/ read-only at /workspace/inputs, work/ and the exec's artifact directory
writable. --input NAME=LOCALFILE copies a local file into inputs/NAME first. --policy takes a
JSON object of policy overrides (e.g. '{"timeout_ms": 5000}'), which may only tighten. The exit
code is the script's; 124 when it timed out.`,
		Args: rangeArgs(1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := execFlags{}
			script, err := a.source(args, &f, "script")
			if err != nil {
				return err
			}
			req := sdk.ExecRequest{ProjectID: args[0], SkillID: skill, TaskID: taskID, ConversationID: cid, NoWait: noWait,
				Exec: sdk.ExecCommand{Kind: "shell", Command: "bash", Args: []string{"-lc", script}, Cwd: cwd}}
			if python {
				req.Exec.Kind, req.Exec.Command, req.Exec.Args = "python", "python3", []string{"-c", script}
			}
			for _, in := range inputs {
				name, local, ok := strings.Cut(in, "=")
				if !ok {
					return usageErr("--input %q: want NAME=LOCALFILE", in)
				}
				b, err := os.ReadFile(local)
				if err != nil {
					return usageErr("--input %s: %v", in, err)
				}
				req.Inputs = append(req.Inputs, sdk.ExecInput{Path: name, Content: b})
			}
			for _, e := range envs {
				k, v, ok := strings.Cut(e, "=")
				if !ok {
					return usageErr("--env %q: want KEY=VALUE", e)
				}
				if req.Exec.Env == nil {
					req.Exec.Env = map[string]string{}
				}
				req.Exec.Env[k] = v
			}
			if req.PolicyOverrides, err = policyOverrides(policy); err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				rec, err := c.CreateExec(ctx, req)
				if err != nil {
					return err
				}
				if a.json() || noWait {
					if err := a.printExec(rec); err != nil {
						return err
					}
				} else {
					if _, err := c.DownloadExecArtifact(ctx, rec.ExecID, "stdout.txt", a.stdout); err != nil {
						return err
					}
					if _, err := c.DownloadExecArtifact(ctx, rec.ExecID, "stderr.txt", a.stderr); err != nil {
						return err
					}
					fmt.Fprintf(a.stderr, "[%s %s%s]\n", rec.ExecID, rec.Status, reasonSuffix(rec))
				}
				return execExit(rec)
			})
		}}
	run.Flags().BoolVar(&python, "python", false, "the script is Python code (python3 -c)")
	run.Flags().BoolVar(&noWait, "no-wait", false, "return at once with the queued exec")
	run.Flags().StringArrayVar(&inputs, "input", nil, "NAME=LOCALFILE: copy a local file into inputs/NAME (repeatable)")
	run.Flags().StringArrayVar(&envs, "env", nil, "KEY=VALUE in the exec's environment (values are never recorded)")
	run.Flags().StringVar(&policy, "policy", "", "policy overrides as a JSON object")
	run.Flags().StringVar(&taskID, "task", "", "task id recorded with the exec")
	run.Flags().StringVar(&cid, "conversation", "", "conversation id recorded with the exec")
	run.Flags().StringVar(&cwd, "cwd", "", "working directory (default /workspace/work)")
	run.Flags().StringVar(&skill, "skill", "", "skill id whose manifest sets the image and limits")

	var lr sdk.ListExecsRequest
	list := &cobra.Command{Use: "list", Short: "List your execs, newest first", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				l, err := c.ListExecs(ctx, lr)
				if err != nil {
					return err
				}
				return a.show(l, func() {
					for _, e := range l.Items {
						fmt.Fprintf(a.stdout, "%s\t%s\t%s\t%s\n", e.ExecID, e.Status, e.ProjectID, e.CreatedAt.Format("2006-01-02T15:04:05Z"))
					}
					fmt.Fprintf(a.stderr, "%d of %d\n", len(l.Items), l.Total)
				})
			})
		}}
	list.Flags().StringVar(&lr.TaskID, "task", "", "only this task's execs")
	list.Flags().StringVar(&lr.ProjectID, "project", "", "only this project's execs")
	list.Flags().StringVar(&lr.Status, "status", "", "only execs in this status")
	list.Flags().IntVar(&lr.Limit, "limit", 0, "page size (default 50)")
	list.Flags().IntVar(&lr.Offset, "offset", 0, "items to skip")

	one := func(use, short string, call func(*sdk.Client, context.Context, string) (*sdk.Exec, error)) *cobra.Command {
		return &cobra.Command{Use: use + " <exec>", Short: short, Args: exactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
					rec, err := call(c, ctx, args[0])
					if err != nil {
						return err
					}
					return a.printExec(rec)
				})
			}}
	}
	get := one("get", "Show an exec's audit record", (*sdk.Client).GetExec)
	cancel := one("cancel", "Cancel a queued or running exec", (*sdk.Client).CancelExec)
	arts := &cobra.Command{Use: "artifacts <exec>", Short: "List an exec's artifacts with sizes and sha256", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				m, err := c.ExecArtifacts(ctx, args[0])
				if err != nil {
					return err
				}
				return a.show(m, func() {
					for _, f := range m.Files {
						fmt.Fprintf(a.stdout, "%s\t%d\t%s\n", f.SHA256, f.Size, f.Path)
					}
				})
			})
		}}
	dl := &cobra.Command{Use: "download <exec> <artifact>", Short: "Write one artifact to stdout", Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				_, err := c.DownloadExecArtifact(ctx, args[0], args[1], a.stdout)
				return err
			})
		}}
	cmd.AddCommand(run, list, get, cancel, arts, dl)
	return cmd
}

// printExec prints the record as JSON (text output shows the same: it is the audit record).
func (a *app) printExec(rec *sdk.Exec) error { return a.printJSON(rec) }

func reasonSuffix(rec *sdk.Exec) string {
	if rec.ErrorReason == "" {
		return ""
	}
	return ": " + rec.ErrorReason
}

// execExit maps the exec's outcome to the command's exit code.
func execExit(rec *sdk.Exec) error {
	switch {
	case rec.Status == "timed_out":
		return exitCode(124)
	case rec.Exited && rec.ExitCode != 0:
		return exitCode(rec.ExitCode)
	case rec.Status == "failed" || rec.Status == "cancelled" || rec.Status == "lost":
		return exitCode(ExitFailure)
	}
	return nil
}
