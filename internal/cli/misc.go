package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

func (a *app) historyCmd() *cobra.Command {
	var req sdk.HistoryRequest
	var last bool
	cmd := &cobra.Command{Use: "history <sandbox> [execution-id]", Short: "Show a sandbox's execution history (or one entry)", Args: rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if len(args) == 2 || last {
					var e *sdk.HistoryEntry
					var err error
					if last {
						e, err = c.LastExecution(ctx, args[0], req.ExecType)
					} else {
						e, err = c.GetExecution(ctx, args[0], args[1])
					}
					if err != nil {
						return err
					}
					if a.json() {
						return a.printJSON(e)
					}
					fmt.Fprintf(a.stdout, "%s %s success=%t %dms %s\n", e.ID, e.ExecType, e.Success, e.ExecutionTime.Milliseconds(), bayapi.FormatTime(e.CreatedAt))
					fmt.Fprintf(a.stdout, "--- code\n%s", withNewline(e.Code))
					if e.Output != "" {
						fmt.Fprintf(a.stdout, "--- output\n%s", withNewline(e.Output))
					}
					if e.Error != "" {
						fmt.Fprintf(a.stdout, "--- error\n%s", withNewline(e.Error))
					}
					return nil
				}
				list, err := c.ListHistory(ctx, args[0], req)
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(list)
				}
				w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tTYPE\tOK\tMS\tCREATED\tTAGS\tCODE")
				for _, e := range list.Entries {
					code := strings.ReplaceAll(e.Code, "\n", "⏎")
					if len(code) > 40 {
						code = code[:40] + "…"
					}
					tags := "-"
					if e.Tags != "" {
						tags = e.Tags
					}
					fmt.Fprintf(w, "%s\t%s\t%t\t%d\t%s\t%s\t%s\n", e.ID, e.ExecType, e.Success, e.ExecutionTime.Milliseconds(), bayapi.FormatTime(e.CreatedAt), tags, code)
				}
				fmt.Fprintf(w, "(%d of %d)\n", len(list.Entries), list.Total)
				return w.Flush()
			})
		}}
	f := cmd.Flags()
	f.StringVar(&req.ExecType, "type", "", "filter: python|shell|browser|browser_batch")
	f.BoolVar(&req.SuccessOnly, "success-only", false, "only successful executions")
	f.IntVar(&req.Limit, "limit", 0, "max entries (1-500, default 100)")
	f.IntVar(&req.Offset, "offset", 0, "skip this many entries")
	f.StringVar(&req.Tags, "tags", "", "comma-separated tags filter")
	f.BoolVar(&last, "last", false, "show the newest entry")
	return cmd
}

func (a *app) profilesCmd() *cobra.Command {
	var detail bool
	cmd := &cobra.Command{Use: "profiles", Short: "List sandbox profiles", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				list, err := c.ListProfiles(ctx, detail)
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(list)
				}
				w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tIMAGE\tCPUS\tMEMORY\tIDLE\tCAPABILITIES")
				for _, p := range list.Items {
					fmt.Fprintf(w, "%s\t%s\t%g\t%s\t%ds\t%s\n", p.ID, p.Image, p.Resources.CPUs, p.Resources.Memory, int(p.IdleTimeout.Seconds()), strings.Join(p.Capabilities, ","))
					if p.Description != "" {
						fmt.Fprintf(w, "\t%s\n", p.Description)
					}
				}
				return w.Flush()
			})
		}}
	cmd.Flags().BoolVar(&detail, "detail", false, "include descriptions and containers")
	return cmd
}

func (a *app) cargoCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cargo", Short: "Persistent workspaces (cargos): create, list, get, delete"}
	var size int
	create := &cobra.Command{Use: "create", Short: "Create an external cargo", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				cg, err := c.CreateCargo(ctx, size)
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(cg)
				}
				fmt.Fprintln(a.stdout, cg.ID)
				return nil
			})
		}}
	create.Flags().IntVar(&size, "size-mb", 0, "size limit in MiB (default: bay's)")
	var managed bool
	list := &cobra.Command{Use: "list", Short: "List cargos", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				l, err := c.ListCargos(ctx, sdk.ListCargosRequest{Managed: &managed})
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(l)
				}
				w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tMANAGED\tSANDBOX\tSIZE_MB\tCREATED")
				for _, cg := range l.Items {
					sb := "-"
					if cg.ManagedBySandboxID != "" {
						sb = cg.ManagedBySandboxID
					}
					fmt.Fprintf(w, "%s\t%t\t%s\t%d\t%s\n", cg.ID, cg.Managed, sb, cg.SizeLimitMB, bayapi.FormatTime(cg.CreatedAt))
				}
				return w.Flush()
			})
		}}
	list.Flags().BoolVar(&managed, "managed", false, "list sandbox-managed cargos instead of external ones")
	get := &cobra.Command{Use: "get <cargo>", Short: "Show a cargo", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				cg, err := c.GetCargo(ctx, args[0])
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(cg)
				}
				fmt.Fprintf(a.stdout, "%s managed=%t size_mb=%d backend=%s created=%s\n", cg.ID, cg.Managed, cg.SizeLimitMB, cg.Backend, bayapi.FormatTime(cg.CreatedAt))
				return nil
			})
		}}
	del := &cobra.Command{Use: "delete <cargo>", Aliases: []string{"rm"}, Short: "Delete a cargo", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if err := c.DeleteCargo(ctx, args[0]); err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(map[string]string{"id": args[0], "status": "deleted"})
				}
				fmt.Fprintf(a.stdout, "%s deleted\n", args[0])
				return nil
			})
		}}
	cmd.AddCommand(create, list, get, del)
	return cmd
}

func (a *app) healthCmd() *cobra.Command {
	return &cobra.Command{Use: "health", Short: "Check that bay answers", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				h, err := c.Health(ctx)
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(h)
				}
				fmt.Fprintf(a.stdout, "%s (bay %s at %s)\n", h.Status, h.Version, c.Endpoint())
				return nil
			})
		}}
}
