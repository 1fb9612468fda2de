// Command bay is Shipyard's control plane daemon: `bay serve` (the default) runs the REST API
// v1; `bay image build` builds the sandbox image locally without a registry.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/internal/bay/app"
	"github.com/shipyard-dev/shipyard/internal/imagebuild"
	"github.com/shipyard-dev/shipyard/internal/mcp"
	"github.com/shipyard-dev/shipyard/internal/version"
)

func main() {
	if err := root().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "bay:", err)
		os.Exit(1)
	}
}

func root() *cobra.Command {
	var configFile, addr, logLevel string
	serve := func(cmd *cobra.Command, _ []string) error {
		log, err := newLogger(logLevel)
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		m := &app.Main{ConfigFile: configFile, Addr: addr, Log: log, Version: version.Version}
		// /mcp serves the MCP tools over streamable HTTP. The tools call bay's own public API on
		// loopback with the caller's credentials, so MCP gets exactly the HTTP API's auth and
		// owner scoping and links nothing of bay's internals.
		m.MountMCP = func(m *app.Main) http.Handler { return mcp.NewHTTPHandler(mcp.LoopbackClients(m.ListenAddr)) }
		m.BuildImage = buildImage
		return m.Run(ctx)
	}
	addServeFlags := func(c *cobra.Command) {
		c.Flags().StringVarP(&configFile, "config", "c", "", "config file (default: $BAY_CONFIG_FILE, ./config.yaml, /etc/bay/config.yaml)")
		c.Flags().StringVar(&addr, "addr", "", "listen address host:port (overrides server.host/server.port)")
		c.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	}
	rootCmd := &cobra.Command{
		Use:           "bay",
		Short:         "Shipyard control plane (REST API v1)",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE:          serve,
	}
	addServeFlags(rootCmd)
	serveCmd := &cobra.Command{Use: "serve", Short: "Run the bay daemon (default)", Args: cobra.NoArgs, RunE: serve}
	addServeFlags(serveCmd)

	versionCmd := &cobra.Command{Use: "version", Short: "Print bay's version", Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), version.Version) }}
	gatewayCmd := &cobra.Command{Use: "egress-gateway", Args: cobra.NoArgs,
		Short: "Run the Kubernetes driver's egress gateway (a Deployment's Pod; docs/kubernetes.md)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return app.RunEgressGateway(ctx, configFile, log)
		}}
	gatewayCmd.Flags().StringVarP(&configFile, "config", "c", "", "bay's config file (default: $BAY_CONFIG_FILE, ./config.yaml, /etc/bay/config.yaml)")
	gatewayCmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	rootCmd.AddCommand(serveCmd, versionCmd, gatewayCmd, imagebuild.Command())
	rootCmd.SetContext(context.Background())
	return rootCmd
}

// newLogger is bay's JSON log on stderr at level (debug, info, warn, error).
func newLogger(level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})), nil
}

// buildImage builds image, one of the friendly tags `bay image build` makes, from the runtime
// binaries of the working directory (images.build_missing).
func buildImage(ctx context.Context, image string, progress io.Writer) error {
	f, ok := imagebuild.FlavourOfTag(image)
	if !ok {
		return fmt.Errorf("bay does not build %s", image)
	}
	_, err := imagebuild.EnsureImage(ctx, imagebuild.Options{Flavour: f, Progress: progress})
	return err
}
