// Package gull wires the gull browser runtime daemon: the sandbox's Chromium
// (internal/gull/browser), the agent-browser command language
// (internal/gull/agent), the built-in skill and the HTTP API. Main.Run is the
// whole daemon; tests run it on 127.0.0.1:0.
package gull

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/shipyard-dev/shipyard/api/gullapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/gull/agent"
	"github.com/shipyard-dev/shipyard/internal/gull/browser"
	"github.com/shipyard-dev/shipyard/internal/gull/version"
	"github.com/shipyard-dev/shipyard/internal/runtimekit"
	"github.com/shipyard-dev/shipyard/internal/ship/skills"
)

// Config is the configuration of one gull daemon.
type Config struct {
	Listen    string // host:port; default ":8115"
	Workspace string // default /workspace
	SkillsDir string // built-in skills source; default /opt/shipyard/skills
	Session   string // default $SANDBOX_ID, $BAY_SANDBOX_ID or "default"
	// Chromium is the browser executable; default $GULL_CHROMIUM_BIN or
	// browser.DefaultBinary. ChromiumArgs are appended to its command line
	// (default: $GULL_CHROMIUM_ARGS split into words).
	Chromium     string
	ChromiumArgs []string
	// ChromiumSandbox keeps Chromium's own sandbox (it then needs user
	// namespaces or a setuid helper, which a hardened container lacks).
	ChromiumSandbox bool
	// LazyBrowser starts Chromium on the first command instead of at boot.
	LazyBrowser bool
	// AuthToken, when set, is required on every request but /health;
	// default $GULL_AUTH_TOKEN.
	AuthToken    string
	AllowedHosts []string
	// ShutdownTimeout bounds graceful shutdown; default 10s.
	ShutdownTimeout time.Duration
	Log             *slog.Logger
}

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	c := Config{
		Listen:          fmt.Sprintf(":%d", gullapi.DefaultPort),
		Workspace:       runtimekit.EnvOr("BAY_WORKSPACE_PATH", gullapi.DefaultWorkspace),
		SkillsDir:       "/opt/shipyard/skills",
		Session:         gullapi.DefaultSession,
		Chromium:        runtimekit.EnvOr("GULL_CHROMIUM_BIN", browser.DefaultBinary),
		AuthToken:       os.Getenv(gullapi.EnvAuthToken),
		ShutdownTimeout: 10 * time.Second,
	}
	for _, k := range gullapi.EnvSession {
		if v := os.Getenv(k); v != "" {
			c.Session = v
			break
		}
	}
	return c
}

// ChromiumArgsFromEnv splits $GULL_CHROMIUM_ARGS into words.
func ChromiumArgsFromEnv() ([]string, error) {
	v := os.Getenv("GULL_CHROMIUM_ARGS")
	if v == "" {
		return nil, nil
	}
	a, err := agent.Split(v)
	if err != nil {
		return nil, fmt.Errorf("GULL_CHROMIUM_ARGS: %w", err)
	}
	return a, nil
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	var errs []error
	if c.Listen == "" {
		errs = append(errs, errors.New("listen address is empty"))
	}
	if c.Workspace == "" {
		errs = append(errs, errors.New("workspace is empty"))
	}
	if c.Chromium == "" {
		errs = append(errs, errors.New("chromium binary is empty"))
	}
	if c.Session == "" {
		errs = append(errs, errors.New("session name is empty"))
	}
	return errors.Join(errs...)
}

// Main is the gull daemon.
type Main struct {
	Config Config

	ready chan struct{}
	addr  string
	mgr   *browser.Manager
}

// New returns a daemon for cfg.
func New(cfg Config) *Main { return &Main{Config: cfg, ready: make(chan struct{})} }

// Ready is closed once the daemon listens.
func (m *Main) Ready() <-chan struct{} { return m.ready }

// Addr is the listening address; valid after Ready.
func (m *Main) Addr() string { return m.addr }

// Browser is the browser manager; valid after Ready.
func (m *Main) Browser() *browser.Manager { return m.mgr }

// Run serves until ctx ends, then shuts down gracefully: it stops accepting,
// lets commands finish (bounded) and closes Chromium so that its cookies
// reach the profile on disk.
func (m *Main) Run(ctx context.Context) error {
	cfg := m.Config
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("gull config: %w", err)
	}
	base := cfg.Log
	if base == nil {
		base = slog.Default()
	}
	log := base.With("component", "gull")

	if err := os.MkdirAll(cfg.Workspace, 0o755); err != nil {
		return fmt.Errorf("create workspace: %w", err)
	}
	wsDir, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	root, err := os.OpenRoot(wsDir)
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()

	skillList, err := skills.Load(cfg.SkillsDir)
	if err != nil {
		log.Warn("cannot read built-in skills", "dir", cfg.SkillsDir, "err", err)
	}
	if err := skills.Install(root, cfg.SkillsDir, skillList); err != nil {
		log.Warn("cannot install built-in skills", "err", err)
	}

	// Chromium and its pages never see the runtime token.
	env := runtimekit.WithEnv(runtimekit.WithoutEnv(os.Environ(), gullapi.EnvAuthToken),
		"HOME="+filepath.Join(wsDir, ".browser"),
		"XDG_CONFIG_HOME="+filepath.Join(os.TempDir(), "gull-xdg", "config"),
		"XDG_CACHE_HOME="+filepath.Join(os.TempDir(), "gull-xdg", "cache"))
	mctx, cancelLock := context.WithTimeout(ctx, time.Minute)
	mgr, err := browser.NewManager(mctx, browser.Config{
		Binary:     cfg.Chromium,
		ProfileDir: filepath.Join(wsDir, filepath.FromSlash(gullapi.ProfileDir)),
		ExtraArgs:  cfg.ChromiumArgs,
		Sandbox:    cfg.ChromiumSandbox,
		Env:        env,
		Log:        base.With("component", "browser"),
	})
	cancelLock()
	if err != nil {
		return err
	}
	m.mgr = mgr
	defer mgr.Close(context.WithoutCancel(ctx))

	runner := agent.NewRunner(agent.Runner{
		Browsers: mgr, Workspace: root, WorkspaceDir: wsDir,
		Session: cfg.Session, Version: version.Version, Log: base.With("component", "agent"),
	})
	meta := gullapi.MetaResponse{
		Runtime: shipapi.MetaRuntime{
			Name: "gull", Version: version.Version, APIVersion: gullapi.APIVersion,
			Build: shipapi.MetaBuild{Image: runtimekit.EnvOr("GULL_IMAGE", "gull:default"), ImageDigest: runtimekit.EnvPtr("GULL_IMAGE_DIGEST"), GitSHA: runtimekit.EnvPtr("GIT_SHA")},
		},
		Workspace: shipapi.MetaWorkspace{MountPath: wsDir},
		Capabilities: map[string]gullapi.Capability{"browser": {
			Version:    gullapi.CapabilityVersion,
			Operations: []string{"exec", "exec_batch"},
			Endpoints:  map[string]string{"exec": gullapi.PathExec, "exec_batch": gullapi.PathExecBatch},
		}},
		BuiltInSkills: make([]shipapi.BuiltInSkill, 0, len(skillList)),
	}
	for _, s := range skillList {
		meta.BuiltInSkills = append(meta.BuiltInSkills, s.BuiltInSkill)
	}
	api := &Server{
		Exec: runner, Browser: mgr, Meta: meta, Session: cfg.Session, Version: version.Version,
		AuthToken: cfg.AuthToken, AllowedHosts: cfg.AllowedHosts, Log: base.With("component", "http"),
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	m.addr = ln.Addr().String()
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv := &http.Server{
		Handler:           api.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if !cfg.LazyBrowser {
		go func() {
			sctx, cancel := context.WithTimeout(baseCtx, time.Minute)
			defer cancel()
			if _, err := mgr.Get(sctx); err != nil {
				log.Warn("chromium did not start at boot (the first command retries)", "err", err)
			}
		}()
	}
	log.Info("gull listening", "addr", m.addr, "workspace", wsDir, "version", version.Version,
		"session", cfg.Session, "chromium", cfg.Chromium, "skills", len(skillList), "auth", cfg.AuthToken != "")
	close(m.ready)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("gull shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	cancelBase()
	mgr.Close(sctx)
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("gull stopped")
	return nil
}
