package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/sdk"
)

// completionTimeout bounds the bay calls a shell completion makes: a slow or absent bay gives
// no suggestions rather than a stuck prompt.
const completionTimeout = 3 * time.Second

// addCompletions makes the shell completion (shipyard completion bash|zsh|fish|powershell)
// offer the caller's sandbox ids for every command whose first argument is a <sandbox>, and
// the profiles for every --profile flag. Both are read from bay with the endpoint and token
// the command line and environment give.
func (a *app) addCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if strings.Contains(c.Use, " <sandbox>") && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveDefault
				}
				return a.completeSandboxes(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
			}
		}
		if c.Flags().Lookup("profile") != nil {
			_ = c.RegisterFlagCompletionFunc("profile", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return a.completeProfiles(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completeSandboxes lists the caller's sandbox ids starting with prefix, each described by its
// profile and status (the first page of bay's list: at most 200).
func (a *app) completeSandboxes(cmd *cobra.Command, prefix string) []cobra.Completion {
	var out []cobra.Completion
	a.completeWith(cmd, func(ctx context.Context, c *sdk.Client) error {
		list, err := c.ListSandboxes(ctx, sdk.ListSandboxesRequest{Limit: 200})
		if err != nil {
			return err
		}
		for _, sb := range list.Items {
			if strings.HasPrefix(sb.ID, prefix) {
				out = append(out, cobra.CompletionWithDesc(sb.ID, sb.Profile+", "+sb.Status))
			}
		}
		return nil
	})
	return out
}

// completeProfiles lists the profile ids starting with prefix.
func (a *app) completeProfiles(cmd *cobra.Command, prefix string) []cobra.Completion {
	var out []cobra.Completion
	a.completeWith(cmd, func(ctx context.Context, c *sdk.Client) error {
		list, err := c.ListProfiles(ctx, false)
		if err != nil {
			return err
		}
		for _, p := range list.Items {
			if strings.HasPrefix(p.ID, prefix) {
				out = append(out, p.ID)
			}
		}
		return nil
	})
	return out
}

// completeWith runs fn with a client under completionTimeout; its errors are dropped (a
// completion has nowhere to show them).
func (a *app) completeWith(cmd *cobra.Command, fn func(ctx context.Context, c *sdk.Client) error) {
	c, err := a.client()
	if err != nil {
		return
	}
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, completionTimeout)
	defer cancel()
	_ = fn(ctx, c)
}
