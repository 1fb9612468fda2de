package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

// skillsCmd is `shipyard skills ls|show|cat|upload|validate|rm|invoke`.
func (a *app) skillsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "skills", Short: "The skill library: list, show, read files, upload, validate, remove, invoke"}
	ls := &cobra.Command{Use: "ls", Short: "List the library's skills", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				list, err := c.ListSkills(ctx)
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(list)
				}
				w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "NAME\tKIND\tVERSION\tFILES\tDESCRIPTION")
				for _, s := range list.Items {
					desc := strings.ReplaceAll(s.Description, "\n", " ")
					if len(desc) > 60 {
						desc = desc[:60] + "…"
					}
					fmt.Fprintf(w, "%s\t%s\t%.12s\t%d\t%s\n", s.Name, s.Kind, s.Version, s.FileCount, desc)
				}
				return w.Flush()
			})
		}}
	show := &cobra.Command{Use: "show <name>", Short: "Show a skill: summary, files and SKILL.md", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				d, err := c.GetSkill(ctx, args[0])
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(d)
				}
				fmt.Fprintf(a.stdout, "%s (%s) version %s, %d bytes, uploaded by %s at %s\n", d.Name, d.Kind, d.Version, d.SizeBytes,
					d.UploadedBy, bayapi.FormatTime(d.CreatedAt))
				if d.ManifestJSON != nil {
					fmt.Fprintf(a.stdout, "manifest sha256 %s\n", d.ManifestSHA256)
				}
				fmt.Fprintln(a.stdout, "--- files")
				for _, f := range d.Files {
					extra := ""
					if f.Link != "" {
						extra = " -> " + f.Link
					} else if f.Executable {
						extra = " (executable)"
					}
					fmt.Fprintf(a.stdout, "%8d  %s%s\n", f.Size, f.Path, extra)
				}
				fmt.Fprintf(a.stdout, "--- SKILL.md\n%s", withNewline(d.SkillMD))
				return nil
			})
		}}
	cat := &cobra.Command{Use: "cat <name> <path>", Short: "Print one file of a skill", Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				_, err := c.ReadSkillFile(ctx, args[0], args[1], a.stdout)
				return err
			})
		}}
	upload := &cobra.Command{Use: "upload <folder|archive>", Short: "Upload a skill folder, .tar.gz or .zip as the skill's new version (admin)", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			archive, err := readSkillArchive(args[0])
			if err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				res, err := c.UploadSkill(ctx, archive)
				if err != nil {
					a.printProblems(err)
					return err
				}
				if a.json() {
					return a.printJSON(res)
				}
				state := "unchanged"
				if res.Created {
					state = "stored"
				}
				fmt.Fprintf(a.stdout, "%s %s version %s\n", res.Skill.Name, state, res.Skill.Version)
				a.printFindings("warning", res.Warnings)
				return nil
			})
		}}
	validate := &cobra.Command{Use: "validate <folder|archive>", Short: "Check a skill without storing it (admin); exits 1 when invalid", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			archive, err := readSkillArchive(args[0])
			if err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				v, err := c.ValidateSkill(ctx, archive)
				if err != nil {
					return err
				}
				if a.json() {
					if err := a.printJSON(v); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(a.stdout, "%s valid=%t version %s\n", v.Name, v.Valid, v.Version)
					a.printFindings("error", v.Errors)
					a.printFindings("warning", v.Warnings)
				}
				if !v.Valid {
					return fmt.Errorf("the skill is invalid: %d problem(s)", len(v.Errors))
				}
				return nil
			})
		}}
	rm := &cobra.Command{Use: "rm <name>", Short: "Remove a skill from the library (admin; running sessions keep it)", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				return c.DeleteSkill(ctx, args[0])
			})
		}}
	cmd.AddCommand(ls, show, cat, upload, validate, rm, a.skillInvokeCmd())
	return cmd
}

// readSkillArchive packs a folder or reads an archive file.
func readSkillArchive(p string) ([]byte, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return sdk.PackSkill(p)
	}
	return os.ReadFile(p)
}

func (a *app) printFindings(kind string, ps []sdk.SkillProblem) {
	for _, p := range ps {
		where := p.File
		if p.Field != "" {
			where += " " + p.Field
		}
		fmt.Fprintf(a.stderr, "%s: %s: %s\n", kind, where, p.Message)
	}
}

// printProblems lists a refused upload's problems (details.errors and details.warnings).
func (a *app) printProblems(err error) {
	e, ok := sdk.AsError(err)
	if !ok || e.Details == nil {
		return
	}
	for _, kind := range []string{"errors", "warnings"} {
		list, _ := e.Details[kind].([]any)
		for _, it := range list {
			m, _ := it.(map[string]any)
			p := sdk.SkillProblem{}
			p.File, _ = m["file"].(string)
			p.Field, _ = m["field"].(string)
			p.Message, _ = m["message"].(string)
			if ptr, ok := m["pointer"].(string); ok { // an invocation's inputs against interface.inputs
				p.File, p.Field = "inputs", ptr
			}
			a.printFindings(strings.TrimSuffix(kind, "s"), []sdk.SkillProblem{p})
		}
	}
}
