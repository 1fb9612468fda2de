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

// networkFlags are the flags of a network policy: --network (the mode), --allow and --deny.
type networkFlags struct {
	mode        string
	allow, deny []string
}

func (n *networkFlags) add(cmd *cobra.Command, modeFlag string) {
	cmd.Flags().StringVar(&n.mode, modeFlag, "", "network mode: none, allowlist or open (within the profile's policy)")
	cmd.Flags().StringSliceVar(&n.allow, "allow", nil, "allowlist entry: a host (*.example.com too), an address or CIDR range, each with an optional :port (repeatable; default: the profile's list)")
	cmd.Flags().StringSliceVar(&n.deny, "deny", nil, "entry that wins over --allow (repeatable)")
}

// policy is the policy the flags give, nil when none was set; --allow or --deny without a
// mode means allowlist.
func (n *networkFlags) policy(cmd *cobra.Command, modeFlag string) (*sdk.NetworkPolicy, error) {
	allowSet, denySet := cmd.Flags().Changed("allow"), cmd.Flags().Changed("deny")
	if n.mode == "" && !allowSet && !denySet {
		return nil, nil
	}
	mode := n.mode
	if mode == "" {
		mode = bayapi.NetworkAllowlist
	}
	switch mode {
	case bayapi.NetworkNone, bayapi.NetworkAllowlist, bayapi.NetworkOpen:
	default:
		return nil, usageErr("--%s %q: want none, allowlist or open", modeFlag, mode)
	}
	if mode != bayapi.NetworkAllowlist && (allowSet || denySet) {
		return nil, usageErr("--allow and --deny need --%s allowlist", modeFlag)
	}
	p := &sdk.NetworkPolicy{Mode: mode, Deny: n.deny}
	if allowSet {
		p.Allow = n.allow
	}
	return p, nil
}

// networkStr renders a policy on one line: "allowlist allow=a,b deny=c".
func networkStr(p sdk.NetworkPolicy) string {
	if p.Mode == "" {
		return "-"
	}
	s := p.Mode
	if len(p.Allow) > 0 {
		s += " allow=" + strings.Join(p.Allow, ",")
	}
	if len(p.Deny) > 0 {
		s += " deny=" + strings.Join(p.Deny, ",")
	}
	return s
}

// networkCmd is `shipyard sandbox network <sandbox>`: the effective policy, changed with
// --mode, --allow and --deny.
func (a *app) networkCmd() *cobra.Command {
	var nf networkFlags
	cmd := &cobra.Command{Use: "network <sandbox>", Short: "Show a sandbox's network policy, or change it within its profile's (--mode, --allow, --deny)", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := nf.policy(cmd, "mode")
			if err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				var sb *sdk.Sandbox
				if p == nil {
					sb, err = c.GetSandbox(ctx, args[0])
				} else {
					sb, err = c.SetNetwork(ctx, args[0], *p)
				}
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(sb.Network)
				}
				fmt.Fprintf(a.stdout, "%s %s\n", sb.ID, networkStr(sb.Network))
				return nil
			})
		}}
	nf.add(cmd, "mode")
	return cmd
}

// networkEventsCmd is `shipyard sandbox network-events <sandbox>`: the newest refusals.
func (a *app) networkEventsCmd() *cobra.Command {
	return &cobra.Command{Use: "network-events <sandbox>", Short: "Show the connections and DNS queries a sandbox's network policy refused (newest last)", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				ev, err := c.NetworkEvents(ctx, args[0])
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(ev)
				}
				w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "TIME\tKIND\tHOST\tPORT\tRULE")
				for _, e := range ev.Items {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", timeStr(e.Time), e.Kind, e.Host, e.Port, e.Rule)
				}
				fmt.Fprintf(w, "(%d refused in all)\n", ev.Denied)
				return w.Flush()
			})
		}}
}
