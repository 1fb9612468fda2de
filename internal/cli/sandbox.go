package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || (hi >= 0 && len(args) > hi) {
			return usageErr("%s: wrong number of arguments (usage: %s)", cmd.CommandPath(), cmd.UseLine())
		}
		return nil
	}
}

func exactArgs(n int) cobra.PositionalArgs { return rangeArgs(n, n) }

// timeStr is t in the wire's format, "-" for the zero time.
func timeStr(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return bayapi.FormatTime(t)
}

func (a *app) printSandbox(sb *sdk.Sandbox) error {
	if a.json() {
		return a.printJSON(sb)
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "id:\t%s\n", sb.ID)
	fmt.Fprintf(w, "status:\t%s\n", sb.Status)
	fmt.Fprintf(w, "profile:\t%s\n", sb.Profile)
	fmt.Fprintf(w, "cargo:\t%s\n", sb.CargoID)
	fmt.Fprintf(w, "capabilities:\t%s\n", strings.Join(sb.Capabilities, ","))
	fmt.Fprintf(w, "created:\t%s\n", bayapi.FormatTime(sb.CreatedAt))
	exp := timeStr(sb.ExpiresAt)
	if sb.ExpiresAt.IsZero() {
		exp = "never"
	}
	fmt.Fprintf(w, "expires:\t%s\n", exp)
	fmt.Fprintf(w, "idle expires:\t%s\n", timeStr(sb.IdleExpiresAt))
	fmt.Fprintf(w, "network:\t%s\n", networkStr(sb.Network))
	for _, c := range sb.Containers {
		v, h := "?", "?"
		if c.Version != "" {
			v = c.Version
		}
		if c.Healthy != nil {
			h = strconv.FormatBool(*c.Healthy)
		}
		fmt.Fprintf(w, "container:\t%s (%s) %s version=%s healthy=%s\n", c.Name, c.RuntimeType, c.Status, v, h)
	}
	return w.Flush()
}

func (a *app) sandboxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sandbox", Aliases: []string{"sb"}, Short: "Create, inspect and remove sandboxes"}

	var profile, cargo, idemKey, reuseKey string
	var reuseIdle, reuseHard int
	ttl := int(DefaultTTL / time.Second)
	var skills []string
	var nf networkFlags
	create := &cobra.Command{Use: "create", Short: "Create a sandbox (prints its id)", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			network, err := nf.policy(cmd, "network")
			if err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				var opts []sdk.CallOption
				if idemKey != "" {
					opts = append(opts, sdk.WithIdempotencyKey(idemKey))
				}
				req := sdk.CreateSandboxRequest{Profile: profile, CargoID: cargo, TTL: time.Duration(ttl) * time.Second, Skills: skills, Network: network}
				if reuseKey != "" {
					req.Reuse = &sdk.Reuse{Key: reuseKey, IdleTTL: time.Duration(reuseIdle) * time.Second, HardTTL: time.Duration(reuseHard) * time.Second}
					if !cmd.Flags().Changed("ttl") {
						req.TTL = 0 // the key's hard TTL (bay's default unless --reuse-hard-ttl)
					}
				}
				sb, err := c.CreateSandbox(ctx, req, opts...)
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(sb)
				}
				fmt.Fprintln(a.stdout, sb.ID)
				return nil
			})
		}}
	create.Flags().StringVar(&profile, "profile", "", "profile id (default: bay's python-default)")
	create.Flags().Var(secondsValue{&ttl}, "ttl", "time to live, e.g. 30m, 2h or 600 (seconds); 0 = no expiry")
	create.Flags().StringVar(&cargo, "cargo", "", "attach an existing cargo as /workspace")
	create.Flags().StringSliceVar(&skills, "skill", nil, "library skill to mount at /skills/<name> (repeatable)")
	create.Flags().StringVar(&idemKey, "idempotency-key", "", "Idempotency-Key (default: generated)")
	nf.add(create, "network")
	create.Flags().StringVar(&reuseKey, "reuse-key", "", "print the id of your sandbox of this key (e.g. project:agent), created only when there is none")
	create.Flags().Var(secondsValue{&reuseIdle}, "reuse-idle-ttl", "with --reuse-key: replace the key's sandbox when idle longer (default: bay's reuse.idle_ttl_sec)")
	create.Flags().Var(secondsValue{&reuseHard}, "reuse-hard-ttl", "with --reuse-key: replace the key's sandbox when older (default: bay's reuse.hard_ttl_sec)")

	var status, cursor string
	var limit int
	var all bool
	list := &cobra.Command{Use: "list", Aliases: []string{"ls"}, Short: "List sandboxes", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				out := sdk.SandboxList{Items: []*sdk.Sandbox{}}
				cur := cursor
				for {
					page, err := c.ListSandboxes(ctx, sdk.ListSandboxesRequest{Limit: limit, Cursor: cur, Status: status})
					if err != nil {
						return err
					}
					out.Items = append(out.Items, page.Items...)
					out.NextCursor = page.NextCursor
					if !all || page.NextCursor == "" {
						break
					}
					cur = page.NextCursor
				}
				if a.json() {
					return a.printJSON(out)
				}
				w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tSTATUS\tPROFILE\tCREATED\tEXPIRES")
				for _, sb := range out.Items {
					exp := timeStr(sb.ExpiresAt)
					if sb.ExpiresAt.IsZero() {
						exp = "never"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", sb.ID, sb.Status, sb.Profile, bayapi.FormatTime(sb.CreatedAt), exp)
				}
				if out.NextCursor != "" {
					fmt.Fprintf(w, "(more: --cursor %s)\n", out.NextCursor)
				}
				return w.Flush()
			})
		}}
	list.Flags().StringVar(&status, "status", "", "filter: idle|starting|ready|failed|expired")
	list.Flags().IntVar(&limit, "limit", 0, "page size (1-200)")
	list.Flags().StringVar(&cursor, "cursor", "", "start after this sandbox id")
	list.Flags().BoolVar(&all, "all", false, "follow next_cursor to list every page")

	get := &cobra.Command{Use: "get <sandbox>", Short: "Show a sandbox", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				sb, err := c.GetSandbox(ctx, args[0])
				if err != nil {
					return err
				}
				return a.printSandbox(sb)
			})
		}}

	simple := func(use, short, done string, f func(c *sdk.Client, cmd *cobra.Command, id string) error) *cobra.Command {
		return &cobra.Command{Use: use + " <sandbox>...", Short: short, Args: rangeArgs(1, -1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := a.client()
				if err != nil {
					return err
				}
				for _, id := range args {
					if err := f(c, cmd, id); err != nil {
						return err
					}
					if a.json() {
						a.printJSON(map[string]string{"id": id, "status": done})
					} else {
						fmt.Fprintf(a.stdout, "%s %s\n", id, done)
					}
				}
				return nil
			}}
	}
	stop := simple("stop", "Stop sandboxes (the workspace is kept)", "stopped", func(c *sdk.Client, cmd *cobra.Command, id string) error {
		ctx, cancel := a.ctx(cmd)
		defer cancel()
		return c.StopSandbox(ctx, id)
	})
	del := simple("delete", "Delete sandboxes", "deleted", func(c *sdk.Client, cmd *cobra.Command, id string) error {
		ctx, cancel := a.ctx(cmd)
		defer cancel()
		return c.DeleteSandbox(ctx, id)
	})
	del.Aliases = []string{"rm"}
	keep := simple("keepalive", "Refresh sandboxes' idle timers", "ok", func(c *sdk.Client, cmd *cobra.Command, id string) error {
		ctx, cancel := a.ctx(cmd)
		defer cancel()
		return c.Keepalive(ctx, id)
	})

	extend := &cobra.Command{Use: "extend <sandbox> <duration>", Short: "Extend a sandbox's TTL by a duration (30m, 2h, or seconds)", Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			secs, err := parseSeconds(args[1])
			if err != nil {
				return usageErr("duration %v", err)
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				var opts []sdk.CallOption
				if idemKey != "" {
					opts = append(opts, sdk.WithIdempotencyKey(idemKey))
				}
				sb, err := c.ExtendTTL(ctx, args[0], time.Duration(secs)*time.Second, opts...)
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(sb)
				}
				fmt.Fprintf(a.stdout, "%s expires %s\n", sb.ID, timeStr(sb.ExpiresAt))
				return nil
			})
		}}
	extend.Flags().StringVar(&idemKey, "idempotency-key", "", "Idempotency-Key (default: generated)")

	cmd.AddCommand(create, list, get, stop, del, extend, keep, a.metricsCmd(), a.networkCmd(), a.networkEventsCmd())
	return cmd
}
