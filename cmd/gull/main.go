// Command gull is the browser runtime daemon of a sandbox (:8115): it drives
// the sandbox's one headless Chromium over the DevTools pipe and answers
// agent-browser command lines. It runs as the unprivileged user that starts
// it and needs no root and no capability.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/shipyard-dev/shipyard/api/gullapi"
	"github.com/shipyard-dev/shipyard/internal/gull"
	"github.com/shipyard-dev/shipyard/internal/gull/version"
	"github.com/shipyard-dev/shipyard/internal/runtimekit"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gull:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := gull.DefaultConfig()
	chromiumArgs, err := gull.ChromiumArgsFromEnv()
	if err != nil {
		return err
	}
	cfg.ChromiumArgs = chromiumArgs
	if p := os.Getenv(gullapi.EnvPort); p != "" {
		cfg.Listen = ":" + p
	}
	fs := flag.NewFlagSet("gull", flag.ContinueOnError)
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "listen address (env "+gullapi.EnvPort+": the port)")
	fs.StringVar(&cfg.Workspace, "workspace", cfg.Workspace, "workspace directory (env BAY_WORKSPACE_PATH)")
	fs.StringVar(&cfg.SkillsDir, "skills-dir", cfg.SkillsDir, "built-in skills source directory")
	fs.StringVar(&cfg.Session, "session", cfg.Session, "session name (env SANDBOX_ID or BAY_SANDBOX_ID)")
	fs.StringVar(&cfg.Chromium, "chromium", cfg.Chromium, "Chromium executable (env GULL_CHROMIUM_BIN)")
	fs.BoolVar(&cfg.ChromiumSandbox, "chromium-sandbox", os.Getenv(gullapi.EnvChromiumSandbox) == "1",
		"keep Chromium's own sandbox (needs user namespaces; off: the container is the boundary; env "+gullapi.EnvChromiumSandbox+"=1)")
	fs.BoolVar(&cfg.LazyBrowser, "lazy-browser", false, "start Chromium on the first command instead of at boot")
	hosts := fs.String("allowed-hosts", os.Getenv("GULL_ALLOWED_HOSTS"), "comma-separated extra Host names accepted (IP literals, localhost and single-label names always are)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		fmt.Println(version.Version)
		return nil
	}
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			cfg.AllowedHosts = append(cfg.AllowedHosts, h)
		}
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("log level: %w", err)
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := runtimekit.AwaitEnvNetworkBarrier(ctx, cfg.Log); err != nil {
		return err
	}
	return gull.New(cfg).Run(ctx)
}
