package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/sdk"
)

// metricsCmd is `shipyard sandbox metrics <sandbox>`: the sandbox's resource use now.
func (a *app) metricsCmd() *cobra.Command {
	return &cobra.Command{Use: "metrics <sandbox>", Short: "Show a sandbox's resource use (CPU, memory, pids, disk)", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				m, err := c.SandboxMetrics(ctx, args[0])
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(m)
				}
				return a.printMetrics(m)
			})
		}}
}

func (a *app) printMetrics(m *sdk.SandboxMetrics) error {
	fmt.Fprintf(a.stdout, "%s %s\n", m.SandboxID, m.Status)
	if len(m.Containers) == 0 {
		fmt.Fprintln(a.stdout, "no running containers")
	} else {
		w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "CONTAINER\tCPU\tMEMORY\tPIDS")
		for _, c := range m.Containers {
			cpu := fmt.Sprintf("%.2fs", c.CPUSeconds)
			if c.CPULimitCores != 0 {
				cpu += fmt.Sprintf(" (limit %g cores)", c.CPULimitCores)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", c.Name, cpu, ofLimit(c.MemoryBytes, c.MemoryLimitBytes, human), ofLimit(c.Pids, c.PidsLimit, func(n int64) string { return fmt.Sprint(n) }))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	used := "unknown (no running compute)"
	if m.Disk.Measured {
		used = human(m.Disk.UsedBytes)
	}
	fmt.Fprintf(a.stdout, "disk: %s of %s\n", used, human(m.Disk.LimitBytes))
	return nil
}

// ofLimit is v, and " / limit" unless the limit is 0 (unlimited).
func ofLimit(v int64, limit int64, f func(int64) string) string {
	if limit == 0 {
		return f(v)
	}
	return f(v) + " / " + f(limit)
}
