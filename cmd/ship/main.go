// Command ship is the runtime daemon inside every sandbox container (:8123):
// filesystem, IPython kernel, shell, terminal.
//
// Started as root with SHIP_SANDBOX_USER=1000:1000 (the image sets it; bay
// starts the container as root with every capability dropped but CAP_SETUID,
// CAP_SETGID and CAP_KILL, and no-new-privileges), ship first switches to its
// own system user (uid 999, "ship") keeping only those three capabilities,
// and runs all user code as the sandbox user with none: see
// internal/ship/privsep. Before it serves, a probe started as user code is
// (ship's binary with privsep.ProbeArg) checks that the separation holds,
// under runc and under gVisor alike; ship exits if it does not. Otherwise it runs everything as the user that started
// it (no separation; for use by hand and host tests).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/runtimekit"
	"github.com/shipyard-dev/shipyard/internal/ship"
	"github.com/shipyard-dev/shipyard/internal/ship/jobs"
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
	if len(args) > 0 && args[0] == privsep.ProbeArg {
		return privsep.RunProbe(args[1:])
	}
	cfg := ship.DefaultConfig()
	if p := os.Getenv(shipapi.EnvPort); p != "" {
		cfg.Listen = ":" + p
	}
	fs := flag.NewFlagSet("ship", flag.ContinueOnError)
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "listen address (env "+shipapi.EnvPort+": the port)")
	fs.StringVar(&cfg.Workspace, "workspace", cfg.Workspace, "workspace directory")
	fs.StringVar(&cfg.Python, "python", cfg.Python, "Python interpreter with ipykernel (env SHIP_PYTHON)")
	fs.StringVar(&cfg.SkillsDir, "skills-dir", cfg.SkillsDir, "built-in skills source directory")
	fs.Int64Var(&cfg.MaxUploadBytes, "max-upload-bytes", cfg.MaxUploadBytes, "largest accepted upload (413 above)")
	fs.IntVar(&cfg.MaxStdoutBytes, "max-stdout-bytes", cfg.MaxStdoutBytes, "stdout bytes kept per shell command")
	fs.IntVar(&cfg.MaxStderrBytes, "max-stderr-bytes", cfg.MaxStderrBytes, "stderr bytes kept per shell command")
	fs.BoolVar(&cfg.NoKernel, "no-kernel", os.Getenv(shipapi.EnvNoKernel) == "1",
		"do not start the kernel at boot (it starts on the first /ipython call; env "+shipapi.EnvNoKernel+"=1)")
	fs.Int64Var(&cfg.MaxReadBytes, "max-read-bytes", cfg.MaxReadBytes, "largest text one read_file returns (413 file_too_large above)")
	fs.StringVar(&cfg.JobsDir, "jobs-dir", jobs.DefaultDir, "ship-owned directory of the jobs' output and status (created 0700)")
	fs.Int64Var(&cfg.MaxJobOutputBytes, "max-job-output-bytes", cfg.MaxJobOutputBytes, "bytes kept per output stream of a job (the rest is counted and dropped)")
	shipUID := fs.Int("ship-uid", privsep.ShipUID, "uid (and gid) ship switches to when it separates privileges")
	sandboxUser := fs.String("sandbox-user", os.Getenv(shipapi.EnvSandboxUser),
		"uid:gid user code runs as; started as root with it, ship separates privileges (env "+shipapi.EnvSandboxUser+")")
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
	sandbox, err := sandboxUserFor(*sandboxUser, *shipUID)
	if err != nil {
		return err
	}
	if sandbox != nil {
		if err := privsep.Drop(*shipUID, *shipUID, privsep.Kept); err != nil {
			return fmt.Errorf("separate privileges (the container needs CAP_SETUID, CAP_SETGID and CAP_KILL): %w", err)
		}
		// Refuse to serve unless user code, started as it will be, holds nothing it must not.
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("separate privileges: ship's binary: %w", err)
		}
		if err := sandbox.Check(context.Background(), exe, *shipUID); err != nil {
			return fmt.Errorf("separate privileges: %w", err)
		}
		cfg.Sandbox = sandbox
		cfg.Log.Info("privileges separated and checked", "ship_uid", *shipUID, "sandbox_uid", sandbox.UID, "sandbox_user", sandbox.Name)
	} else if *sandboxUser != "" {
		cfg.Log.Info("not started as root: everything runs as this user, without privilege separation", "uid", os.Geteuid())
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := runtimekit.AwaitEnvNetworkBarrier(ctx, cfg.Log); err != nil {
		return err
	}
	return ship.New(cfg).Run(ctx)
}

// sandboxUserFor parses spec ("uid:gid") and returns the sandbox user when ship
// must separate privileges: spec is set and ship runs as root.
func sandboxUserFor(spec string, shipUID int) (*privsep.User, error) {
	if spec == "" || os.Geteuid() != 0 {
		return nil, nil
	}
	u, g, ok := strings.Cut(spec, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || uid <= 0 || gid <= 0 {
		return nil, fmt.Errorf("sandbox user %q: want uid:gid, both above 0", spec)
	}
	if shipUID <= 0 || shipUID == uid {
		return nil, fmt.Errorf("ship uid %d must be above 0 and differ from the sandbox uid %d", shipUID, uid)
	}
	return privsep.Sandbox(uid, gid), nil
}
