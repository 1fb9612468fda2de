// Command ship is the runtime daemon inside every sandbox container (:8123):
// filesystem, IPython kernel, shell, terminal. It runs as the unprivileged
// user that starts it and needs no root.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/shipyard-dev/shipyard/internal/ship"
	"github.com/shipyard-dev/shipyard/internal/ship/version"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ship:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := ship.DefaultConfig()
	fs := flag.NewFlagSet("ship", flag.ContinueOnError)
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "listen address")
	fs.StringVar(&cfg.Workspace, "workspace", cfg.Workspace, "workspace directory")
	fs.StringVar(&cfg.Python, "python", cfg.Python, "Python interpreter with ipykernel (env SHIP_PYTHON)")
	fs.StringVar(&cfg.SkillsDir, "skills-dir", cfg.SkillsDir, "built-in skills source directory")
	fs.Int64Var(&cfg.MaxUploadBytes, "max-upload-bytes", cfg.MaxUploadBytes, "largest accepted upload (413 above)")
	fs.IntVar(&cfg.MaxStdoutBytes, "max-stdout-bytes", cfg.MaxStdoutBytes, "stdout bytes kept per shell command")
	fs.IntVar(&cfg.MaxStderrBytes, "max-stderr-bytes", cfg.MaxStderrBytes, "stderr bytes kept per shell command")
	fs.BoolVar(&cfg.NoKernel, "no-kernel", false, "do not start the kernel at boot (it starts on the first /ipython call)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		fmt.Println(version.Version)
		return nil
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("log level: %w", err)
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return ship.New(cfg).Run(ctx)
}
