package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/sdk"
)

// versionServerTimeout bounds the server half of `shipyard version` when --timeout is unset.
const versionServerTimeout = 10 * time.Second

// versionCmd prints the client's version, then the version of the bay it talks to. The client
// line is printed even when bay cannot be reached (the command then fails like any other call).
func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{Use: "version", Short: "Print the client's and bay's versions", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if _, ok := ctx.Deadline(); !ok {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, versionServerTimeout)
					defer cancel()
				}
				if !a.json() {
					fmt.Fprintf(a.stdout, "client %s\n", Version)
				}
				h, err := c.Health(ctx)
				if a.json() {
					out := map[string]any{"client": Version, "endpoint": c.Endpoint(), "server": nil}
					if err == nil {
						out["server"] = h.Version
					}
					if perr := a.printJSON(out); perr != nil {
						return perr
					}
				} else if err == nil {
					fmt.Fprintf(a.stdout, "server %s (bay at %s)\n", h.Version, c.Endpoint())
				}
				return err
			})
		}}
}
