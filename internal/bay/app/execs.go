package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/execs"
	"github.com/shipyard-dev/shipyard/internal/bay/skills"
)

// buildExecs makes the audited exec service from the configuration and finishes what a
// previous run of this bay left open (nil when execs are disabled). goneAfter is the heartbeat
// age from which another bay instance counts as gone: its open execs are then adopted
// (execs.Service.RunAdoption).
func buildExecs(ctx context.Context, cfg *config.Config, store bay.Store, drv bay.Driver, lib *skills.Library, dataDir, deployment string, goneAfter time.Duration, log *slog.Logger) (*execs.Service, error) {
	ec := cfg.Execs
	if !ec.Enabled {
		return nil, nil
	}
	linuxRoot := ec.WorkspaceRoot
	if linuxRoot == "" {
		base := dataDir
		if base == "" {
			base = "."
		}
		abs, err := filepath.Abs(filepath.Join(base, "workspace"))
		if err != nil {
			return nil, fmt.Errorf("execs workspace root: %w", err)
		}
		linuxRoot = abs
	}
	procVersion, _ := os.ReadFile("/proc/version")
	rt := execs.DetectRuntime(execs.Runtime(ec.Runtime), runtime.GOOS, string(procVersion))
	paths, err := execs.AdaptPaths(rt, linuxRoot, ec.WorkspaceRootWin, ec.WorkspaceRootWSL)
	if err != nil {
		return nil, fmt.Errorf("execs workspace: %w", err)
	}
	var library execs.Library
	if lib != nil {
		library = lib
	}
	svc := execs.New(store, drv, nil, log, execs.Config{
		Workspace: execs.Workspace{Paths: paths}, Image: ec.Image, ContainerRuntime: ec.ContainerRuntime,
		MaxConcurrent: ec.MaxConcurrentExecs, QueueSize: ec.QueueSize, Settings: execsSettings(ec.Policy),
		Library: library, InstanceID: cfg.InstanceID(), Deployment: deployment, Runtime: rt,
		GoneAfter: goneAfter, AdoptInterval: ec.AdoptInterval,
	})
	if err := svc.Reconcile(ctx); err != nil {
		return nil, err
	}
	log.InfoContext(ctx, "audited execs ready", "runtime", rt, "workspace", paths.Native, "image", ec.Image, "max_concurrent_execs", ec.MaxConcurrentExecs)
	return svc, nil
}

// execsSettings is the settings layer of the policy merge: zero values keep the defaults.
func execsSettings(p config.ExecsPolicyConfig) bay.PolicyOverrides {
	var o bay.PolicyOverrides
	if p.NetMode != "" {
		m := bay.NetMode(p.NetMode)
		o.NetMode = &m
	}
	set := func(dst **int64, v int64) {
		if v > 0 {
			*dst = &v
		}
	}
	set(&o.TimeoutMS, p.TimeoutMS)
	set(&o.MaxStdoutBytes, p.MaxStdoutBytes)
	set(&o.MaxStderrBytes, p.MaxStderrBytes)
	set(&o.MaxArtifactsBytesTotal, p.MaxArtifactsBytesTotal)
	set(&o.MemoryMB, p.MemoryMB)
	set(&o.Pids, p.Pids)
	set(&o.MaxInputBytes, p.MaxInputBytes)
	set(&o.MaxInputsBytesTotal, p.MaxInputsBytesTotal)
	set(&o.MaxOutputBytes, p.MaxOutputBytes)
	set(&o.MaxOutputsBytesTotal, p.MaxOutputsBytesTotal)
	if p.CPUCores > 0 {
		c := p.CPUCores
		o.CPUCores = &c
	}
	return o
}

// stopExecs stops admitting execs and gives the running ones a few seconds to finish; those
// still running are left to the engine and re-attached by the next boot's Reconcile (or, when
// this instance id does not come back, adopted by another bay of the database).
func stopExecs(ctx context.Context, svc *execs.Service) {
	if svc == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	svc.Stop(sctx)
}
