package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/sdk"
)

// skillCmd is the skill lifecycle: payloads, candidates, evaluations, releases, replay.
func (a *app) skillCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "skill", Short: "Skill lifecycle: payloads, candidates, evaluations, releases, replay",
		Long: `Build skills from executions: store a payload, create a candidate from execution ids,
record evaluations, promote it to a canary or stable release, watch the release's health,
roll back, delete; replay the active release of a browser skill in a sandbox.`}
	cmd.AddCommand(a.skillPayloadCmd(), a.skillCandidateCmd(), a.skillEvaluateCmd(), a.skillPromoteCmd(),
		a.skillListCmd("candidates"), a.skillListCmd("releases"), a.skillShowCmd(), a.skillHealthCmd(),
		a.skillRollbackCmd(), a.skillDeleteCmd(), a.skillRunCmd())
	return cmd
}

// skillDo runs fn with a client and prints its result: JSON with -o json, else line(v).
func skillDo[T any](a *app, cmd *cobra.Command, fn func(ctx context.Context, c *sdk.Client) (*T, error), line func(*T) string) error {
	return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
		v, err := fn(ctx, c)
		if err != nil {
			return err
		}
		if a.json() {
			return a.printJSON(v)
		}
		fmt.Fprintln(a.stdout, line(v))
		return nil
	})
}

func releaseLine(r *sdk.SkillRelease) string {
	return fmt.Sprintf("%s %s v%d %s active=%t", r.ID, r.SkillKey, r.Version, r.Stage, r.IsActive)
}

func (a *app) skillPayloadCmd() *cobra.Command {
	var kind string
	cmd := &cobra.Command{Use: "payload <json | blob:ref>", Short: "Store a JSON payload (object or array), or show one by its blob: reference", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if raw := []byte(args[0]); json.Valid(raw) {
				return skillDo(a, cmd, func(ctx context.Context, c *sdk.Client) (*sdk.SkillPayloadRef, error) {
					return c.CreateSkillPayload(ctx, json.RawMessage(raw), kind)
				}, func(r *sdk.SkillPayloadRef) string { return r.PayloadRef })
			}
			return skillDo(a, cmd, func(ctx context.Context, c *sdk.Client) (*sdk.SkillPayload, error) {
				return c.GetSkillPayload(ctx, args[0])
			}, func(r *sdk.SkillPayload) string { return string(r.Payload) })
		}}
	cmd.Flags().StringVar(&kind, "kind", "", "payload kind (default generic)")
	return cmd
}

func (a *app) skillCandidateCmd() *cobra.Command {
	var payload, summary string
	cmd := &cobra.Command{Use: "candidate <skill-key> <execution-id>...", Short: "Create a candidate from executions", Args: rangeArgs(2, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := sdk.CandidateRequest{SkillKey: args[0], SourceExecutionIDs: args[1:], PayloadRef: payload, Summary: summary}
			return skillDo(a, cmd, func(ctx context.Context, c *sdk.Client) (*sdk.SkillCandidate, error) {
				return c.CreateSkillCandidate(ctx, req)
			}, func(r *sdk.SkillCandidate) string { return r.ID })
		}}
	cmd.Flags().StringVar(&payload, "payload", "", "payload reference (blob:...)")
	cmd.Flags().StringVar(&summary, "summary", "", "summary of the skill")
	return cmd
}

func (a *app) skillEvaluateCmd() *cobra.Command {
	var failed bool
	var score float64
	var report string
	cmd := &cobra.Command{Use: "evaluate <candidate-id>", Short: "Record an evaluation (passing unless --failed)", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := sdk.EvaluateRequest{Passed: !failed, Report: report}
			if cmd.Flags().Changed("score") {
				req.Score = &score
			}
			return skillDo(a, cmd, func(ctx context.Context, c *sdk.Client) (*sdk.SkillEvaluation, error) {
				return c.EvaluateSkillCandidate(ctx, args[0], req)
			}, func(r *sdk.SkillEvaluation) string { return fmt.Sprintf("%s passed=%t", r.ID, r.Passed) })
		}}
	cmd.Flags().BoolVar(&failed, "failed", false, "the evaluation failed (the candidate is rejected)")
	cmd.Flags().Float64Var(&score, "score", 0, "score")
	cmd.Flags().StringVar(&report, "report", "", "report text")
	return cmd
}

func (a *app) skillPromoteCmd() *cobra.Command {
	var stage, summary string
	cmd := &cobra.Command{Use: "promote <candidate-id>", Short: "Release a candidate with a passing evaluation", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return skillDo(a, cmd, func(ctx context.Context, c *sdk.Client) (*sdk.SkillRelease, error) {
				return c.PromoteSkillCandidate(ctx, args[0], sdk.PromoteRequest{Stage: stage, ChangeSummary: summary})
			}, releaseLine)
		}}
	cmd.Flags().StringVar(&stage, "stage", "canary", "canary or stable")
	cmd.Flags().StringVar(&summary, "summary", "", "summary of the change")
	return cmd
}

func (a *app) skillListCmd(what string) *cobra.Command {
	var req sdk.SkillListRequest
	cmd := &cobra.Command{Use: what, Short: "List skill " + what + ", newest first", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if what == "candidates" {
				return skillDo(a, cmd, func(ctx context.Context, c *sdk.Client) (*sdk.SkillCandidateList, error) {
					return c.ListSkillCandidates(ctx, req)
				}, func(l *sdk.SkillCandidateList) string {
					out := fmt.Sprintf("total %d", l.Total)
					for _, it := range l.Items {
						out += fmt.Sprintf("\n%s %s %s", it.ID, it.SkillKey, it.Status)
					}
					return out
				})
			}
			return skillDo(a, cmd, func(ctx context.Context, c *sdk.Client) (*sdk.SkillReleaseList, error) {
				return c.ListSkillReleases(ctx, req)
			}, func(l *sdk.SkillReleaseList) string {
				out := fmt.Sprintf("total %d", l.Total)
				for i := range l.Items {
					out += "\n" + releaseLine(&l.Items[i])
				}
				return out
			})
		}}
	cmd.Flags().StringVar(&req.SkillKey, "skill", "", "only this skill key")
	cmd.Flags().IntVar(&req.Limit, "limit", 0, "page size (1-500, default 100)")
	cmd.Flags().IntVar(&req.Offset, "offset", 0, "rows to skip")
	if what == "candidates" {
		cmd.Flags().StringVar(&req.Status, "status", "", "only this status")
	} else {
		cmd.Flags().StringVar(&req.Stage, "stage", "", "only this stage")
		cmd.Flags().BoolVar(&req.ActiveOnly, "active", false, "only active releases")
	}
	return cmd
}

func (a *app) skillShowCmd() *cobra.Command {
	return &cobra.Command{Use: "show <candidate-id>", Short: "Show a candidate", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return skillDo(a, cmd, func(ctx context.Context, c *sdk.Client) (*sdk.SkillCandidate, error) {
				return c.GetSkillCandidate(ctx, args[0])
			}, func(r *sdk.SkillCandidate) string {
				return fmt.Sprintf("%s %s %s %s pass=%s", r.ID, r.SkillKey, r.SkillType, r.Status, fmtOpt(r.LatestPass))
			})
		}}
}

func fmtOpt[T any](p *T) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func (a *app) skillHealthCmd() *cobra.Command {
	return &cobra.Command{Use: "health <release-id>", Short: "A release's health over its window", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return skillDo(a, cmd, func(ctx context.Context, c *sdk.Client) (*sdk.ReleaseHealth, error) {
				return c.SkillReleaseHealth(ctx, args[0])
			}, func(h *sdk.ReleaseHealth) string {
				return fmt.Sprintf("samples=%d success_rate=%g p95_ms=%d baseline_success_rate=%g healthy=%t should_rollback=%t reasons=%v",
					h.Samples, h.SuccessRate, h.P95Duration.Milliseconds(), h.BaselineSuccessRate, h.Healthy, h.ShouldRollback, h.RollbackReasons)
			})
		}}
}

func (a *app) skillRollbackCmd() *cobra.Command {
	return &cobra.Command{Use: "rollback <release-id>", Short: "Make a new active release from the one before", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return skillDo(a, cmd, func(ctx context.Context, c *sdk.Client) (*sdk.SkillRelease, error) {
				return c.RollbackSkillRelease(ctx, args[0])
			}, releaseLine)
		}}
}

func (a *app) skillDeleteCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{Use: "delete <sc-candidate-id | sr-release-id>", Short: "Soft-delete a candidate or a release", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return skillDo(a, cmd, func(ctx context.Context, c *sdk.Client) (*sdk.Deleted, error) {
				if len(args[0]) > 3 && args[0][:3] == "sr-" {
					return c.DeleteSkillRelease(ctx, args[0], reason)
				}
				return c.DeleteSkillCandidate(ctx, args[0], reason)
			}, func(d *sdk.Deleted) string { return d.ID + " deleted" })
		}}
	cmd.Flags().StringVar(&reason, "reason", "", "why")
	return cmd
}

func (a *app) skillRunCmd() *cobra.Command {
	var trace bool
	var tags string
	cmd := &cobra.Command{Use: "run <sandbox> <skill-key>", Short: "Replay the active release of a browser skill in the sandbox", Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var code int
			err := skillDo(a, cmd, func(ctx context.Context, c *sdk.Client) (*sdk.SkillRunResult, error) {
				r, err := c.RunBrowserSkill(ctx, args[0], args[1], sdk.SkillRunRequest{IncludeTrace: trace, Tags: tags})
				if err == nil && !r.Success {
					code = 1
				}
				return r, err
			}, func(r *sdk.SkillRunResult) string {
				out := fmt.Sprintf("%s %s release=%s %d/%d steps success=%t", r.ExecutionID, r.SkillKey, r.ReleaseID, r.CompletedSteps, r.TotalSteps, r.Success)
				for _, st := range r.Results {
					out += fmt.Sprintf("\n[%d] exit=%d %s", st.StepIndex, st.ExitCode, st.Cmd)
				}
				return out
			})
			if err != nil {
				return err
			}
			return commandExit(code)
		}}
	cmd.Flags().BoolVar(&trace, "include-trace", false, "keep the run's trace and print its reference (with -o json)")
	cmd.Flags().StringVar(&tags, "tags", "", "extra comma-separated tags of the run's history row")
	return cmd
}
