// Command ship is the runtime daemon inside every sandbox container (:8123):
// filesystem, IPython kernel, shell, terminal.
//
// Started as root (how bay starts a sandbox: every capability dropped but
// CAP_SETUID, CAP_SETGID and CAP_KILL, no-new-privileges), ship first switches
// to its own system user (uid 999, "ship") keeping only those three
// capabilities, and runs all user code as the sandbox user (uid 1000) with
// none: see internal/ship/privsep. Started as any other user it runs
// everything as that user (no separation; for use by hand).
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
	"github.com/shipyard-dev/shipyard/internal/ship/privsep"
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
	fs.Int64Var(&cfg.MaxReadBytes, "max-read-bytes", cfg.MaxReadBytes, "largest text one read_file returns (413 file_too_large above)")
	shipUID := fs.Int("ship-uid", privsep.ShipUID, "uid (and gid) ship switches to when started as root")
	sandboxUID := fs.Int("sandbox-uid", privsep.SandboxUID, "uid (and gid) user code runs as when ship is started as root")
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
	if os.Geteuid() == 0 {
		if *shipUID <= 0 || *sandboxUID <= 0 || *shipUID == *sandboxUID {
			return fmt.Errorf("ship uid %d and sandbox uid %d must be distinct and not root", *shipUID, *sandboxUID)
		}
		if err := privsep.Drop(*shipUID, *shipUID, privsep.Kept); err != nil {
			return fmt.Errorf("separate privileges (the container needs CAP_SETUID, CAP_SETGID and CAP_KILL): %w", err)
		}
		cfg.Sandbox = privsep.Sandbox(*sandboxUID, *sandboxUID)
		cfg.Log.Info("privileges separated", "ship_uid", *shipUID, "sandbox_uid", *sandboxUID, "sandbox_user", cfg.Sandbox.Name)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return ship.New(cfg).Run(ctx)
}
