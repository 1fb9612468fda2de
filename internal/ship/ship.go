// Package ship wires the ship runtime daemon: the workspace, the IPython
// kernel, the shell runner, terminals and the HTTP API. Main.Run is the whole
// daemon; tests run it on 127.0.0.1:0.
package ship

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/runtimekit"
	"github.com/shipyard-dev/shipyard/internal/ship/httpapi"
	"github.com/shipyard-dev/shipyard/internal/ship/jobs"
	"github.com/shipyard-dev/shipyard/internal/ship/jupyter"
	"github.com/shipyard-dev/shipyard/internal/ship/privsep"
	"github.com/shipyard-dev/shipyard/internal/ship/pty"
	"github.com/shipyard-dev/shipyard/internal/ship/shell"
	"github.com/shipyard-dev/shipyard/internal/ship/skills"
	"github.com/shipyard-dev/shipyard/internal/ship/version"
	"github.com/shipyard-dev/shipyard/internal/ship/workspace"
)

// Config is the configuration of one ship daemon.
type Config struct {
	Listen         string // host:port; default ":8123"
	Workspace      string // default /workspace
	Python         string // interpreter for the kernel; default $SHIP_PYTHON or python3
	SkillsDir      string // built-in skills source; default /opt/shipyard/skills
	MaxUploadBytes int64  // default 10 GiB
	MaxStdoutBytes int    // per shell command; default 1 MiB
	MaxStderrBytes int    // per shell command; default 1 MiB
	// MaxReadBytes bounds the text one read_file returns (file_too_large
	// above); default 64 MiB. The text is streamed, never held in memory.
	MaxReadBytes int64
	// JobsDir is the ship-owned directory of jobs' output and status (see
	// internal/ship/jobs); default jobs.DefaultDir. MaxJobOutputBytes caps each
	// stream of a job (default 64 MiB). An empty JobsDir is a fresh temporary
	// directory (jobs then do not outlive this ship; tests), cmd/ship sets it.
	JobsDir           string
	MaxJobOutputBytes int64
	// Sandbox is the user that user code (kernel, shells, terminals) runs as
	// and that ship acts as on the workspace, when ship runs as another user
	// (cmd/ship sets it after privsep.Drop); nil: ship's own user.
	Sandbox *privsep.User
	// NoKernel skips starting the kernel at boot; it then starts on the
	// first /ipython call.
	NoKernel bool
	// KernelStartTimeout bounds one kernel start; default 60s.
	KernelStartTimeout time.Duration
	// ShutdownTimeout bounds graceful shutdown; default 10s.
	ShutdownTimeout time.Duration
	// AuthToken, when set, is required on every request but /health; default
	// $SHIP_AUTH_TOKEN (shipapi.EnvAuthToken), which bay sets per session.
	AuthToken string
	Log       *slog.Logger
}

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	py := os.Getenv("SHIP_PYTHON")
	if py == "" {
		py = "python3"
	}
	return Config{
		Listen:             fmt.Sprintf(":%d", shipapi.DefaultPort),
		Workspace:          shipapi.DefaultWorkspace,
		Python:             py,
		SkillsDir:          "/opt/shipyard/skills",
		MaxUploadBytes:     10 << 30,
		MaxStdoutBytes:     1 << 20,
		MaxStderrBytes:     1 << 20,
		MaxReadBytes:       workspace.MaxTextBytes,
		MaxJobOutputBytes:  64 << 20,
		KernelStartTimeout: 60 * time.Second,
		ShutdownTimeout:    10 * time.Second,
		AuthToken:          os.Getenv(shipapi.EnvAuthToken),
	}
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
	if c.Python == "" {
		errs = append(errs, errors.New("python interpreter is empty"))
	}
	if c.MaxUploadBytes <= 0 {
		errs = append(errs, errors.New("max upload bytes must be positive"))
	}
	if c.MaxReadBytes <= 0 {
		errs = append(errs, errors.New("max read bytes must be positive"))
	}
	if c.MaxStdoutBytes <= 0 || c.MaxStderrBytes <= 0 {
		errs = append(errs, errors.New("stdout/stderr caps must be positive"))
	}
	return errors.Join(errs...)
}

// Main is the ship daemon.
type Main struct {
	Config Config

	ready chan struct{}
	addr  string
}

// New returns a daemon for cfg.
func New(cfg Config) *Main { return &Main{Config: cfg, ready: make(chan struct{})} }

// Ready is closed once the daemon listens.
func (m *Main) Ready() <-chan struct{} { return m.ready }

// Addr is the listening address; valid after Ready.
func (m *Main) Addr() string { return m.addr }

// kernelMPLBackend is the matplotlib backend of the kernel: matplotlib-inline's
// (a dependency of ipykernel), which shows figures as PNG images in the
// output, as `%matplotlib inline` does. It is what ipykernel itself picks when
// MPLBACKEND is unset; ship sets it explicitly because the image's
// matplotlibrc (MATPLOTLIBRC, which also holds the CJK fonts) says Agg, which
// shell commands keep. Being an environment variable, it costs nothing at
// kernel start: matplotlib reads it when a cell first imports it, and the
// backend module then enables IPython's inline support itself. (Running
// `%matplotlib inline` at start instead imported matplotlib and pyplot
// before the kernel counted as ready: +0.6-0.8 s on every kernel start.)
const kernelMPLBackend = "module://matplotlib_inline.backend_inline"

// kernelInitCode runs once in every new kernel. It registers a PNG formatter
// for matplotlib figures by type name, so `display(fig)` shows a figure as an
// image whatever the backend and whatever ran before (the inline backend
// registers its formatters only on some paths: after a cell had raised, a
// figure of the Agg backend came back as text). Registering by name imports
// nothing: matplotlib is loaded only when a cell uses it.
const kernelInitCode = `def _ship_register_figure_png():
    def png(fig):
        from IPython.core.pylabtools import print_figure
        return print_figure(fig, "png")
    get_ipython().display_formatter.formatters["image/png"].for_type_by_name("matplotlib.figure", "Figure", png)
_ship_register_figure_png()
del _ship_register_figure_png
`

// Run serves until ctx ends, then shuts down gracefully: it stops accepting,
// lets requests finish (bounded), closes terminals, kills background
// processes and shuts the kernel down.
func (m *Main) Run(ctx context.Context) error {
	cfg := m.Config
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("ship config: %w", err)
	}
	base := cfg.Log
	if base == nil {
		base = slog.Default()
	}
	log := base.With("component", "ship")

	if err := cfg.Sandbox.Do(func() error { return os.MkdirAll(cfg.Workspace, 0o755) }); err != nil {
		return fmt.Errorf("create workspace: %w", err)
	}
	ws, err := workspace.OpenAs(cfg.Workspace, cfg.Sandbox)
	if err != nil {
		return err
	}
	defer ws.Close()

	skillList, err := skills.Load(cfg.SkillsDir)
	if err != nil {
		log.Warn("cannot read built-in skills", "dir", cfg.SkillsDir, "err", err)
	}
	if err := ws.Do(func() error { return skills.Install(ws.Root(), cfg.SkillsDir, skillList) }); err != nil {
		log.Warn("cannot install built-in skills", "err", err)
	}
	if err := writeProfileEnv(ws, os.Getenv(shipapi.EnvProfileEnvKeys), os.LookupEnv, log); err != nil {
		log.Warn("cannot write the profile environment file", "file", shipapi.ProfileEnvFile, "err", err)
	}
	if err := writeLoginProfile(ws); err != nil {
		log.Warn("cannot write the login profile", "file", loginProfileFile, "err", err)
	}

	// The kernel, shells and terminals do not inherit the runtime token (code in the sandbox
	// has no use for it; the token only guards ship from other sandboxes and host users).
	env := userEnv(runtimekit.WithoutEnv(os.Environ(), shipapi.EnvAuthToken), ws.Dir())
	env = writableMPLConfig(env, cfg.Sandbox, log)
	kernelEnv := runtimekit.WithEnv(env, "PYDEVD_DISABLE_FILE_VALIDATION=1", "MPLBACKEND="+kernelMPLBackend)
	var onExhausted func() string
	if cfg.Sandbox != nil {
		reserveThreads(reservedThreads)
		onExhausted = func() string { return shell.Exhausted(cfg.Sandbox, log) }
	}
	km := jupyter.NewManager(jupyter.ManagerConfig{
		Kernel: jupyter.KernelConfig{
			Python:         cfg.Python,
			Dir:            ws.Dir(),
			Env:            kernelEnv,
			InitCode:       kernelInitCode + kernelUserSiteCode,
			HeartbeatEvery: 5 * time.Second,
			User:           cfg.Sandbox,
		},
		StartTimeout: cfg.KernelStartTimeout,
		OnExhausted:  onExhausted,
		Log:          base.With("component", "kernel"),
	})
	if !cfg.NoKernel {
		km.Start()
	}
	runner := shell.New(shell.Config{
		Workspace: ws,
		MaxStdout: cfg.MaxStdoutBytes,
		MaxStderr: cfg.MaxStderrBytes,
		Env:       env,
		User:      cfg.Sandbox,
		Log:       base.With("component", "shell"),
	})
	// Without its directory ship runs without the jobs API rather than not at all.
	jobsDir := cfg.JobsDir
	if jobsDir == "" {
		if jobsDir, err = os.MkdirTemp("", "ship-jobs-"); err != nil {
			return fmt.Errorf("jobs directory: %w", err)
		}
		defer os.RemoveAll(jobsDir)
	}
	jm, err := jobs.New(jobs.Config{
		Dir: jobsDir, Shell: runner, Workspace: ws, Python: cfg.Python, Kernel: km, MaxOutput: cfg.MaxJobOutputBytes,
		Log: base.With("component", "jobs"),
	})
	if err != nil {
		log.Error("jobs unavailable", "err", err)
		jm = nil
	}
	term := &pty.Handler{
		Dir:  ws.Dir(),
		Env:  runtimekit.WithEnv(env, "HOME="+ws.Dir(), "SHELL=/bin/bash"),
		User: cfg.Sandbox,
		Log:  base.With("component", "terminal"),
	}

	meta := shipapi.MetaResponse{
		Runtime: shipapi.MetaRuntime{
			Name: "ship", Version: version.Version, APIVersion: shipapi.APIVersion,
			Build: shipapi.MetaBuild{Image: runtimekit.EnvOr("SHIP_IMAGE", "ship:default"), ImageDigest: runtimekit.EnvPtr("SHIP_IMAGE_DIGEST"), GitSHA: runtimekit.EnvPtr("GIT_SHA")},
		},
		Workspace:     shipapi.MetaWorkspace{MountPath: ws.Dir()},
		Capabilities:  httpapi.Capabilities(),
		BuiltInSkills: make([]shipapi.BuiltInSkill, 0, len(skillList)),
	}
	for _, s := range skillList {
		meta.BuiltInSkills = append(meta.BuiltInSkills, s.BuiltInSkill)
	}
	api := &httpapi.Server{
		Workspace:      ws,
		Kernel:         km,
		Shell:          runner,
		Jobs:           jm,
		Terminal:       term,
		Meta:           meta,
		Version:        version.Version,
		MaxUploadBytes: cfg.MaxUploadBytes,
		MaxReadBytes:   cfg.MaxReadBytes,
		Log:            base.With("component", "http"),
		Started:        time.Now(),
		AuthToken:      cfg.AuthToken,
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		km.Close(context.Background())
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	m.addr = ln.Addr().String()
	// Request contexts derive from baseCtx so that shutdown also ends
	// hijacked connections (terminals), which http.Server.Shutdown ignores.
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv := &http.Server{
		Handler:           api.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("ship listening", "addr", m.addr, "workspace", ws.Dir(), "version", version.Version,
		"python", cfg.Python, "skills", len(skillList))
	close(m.ready)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		cancelBase()
		jm.Close()
		runner.Close()
		km.Close(context.Background())
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	log.Info("ship shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	cancelBase()
	err = srv.Shutdown(sctx)
	term.Wait()
	jm.Close()
	runner.Close()
	km.Close(sctx)
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("ship stopped")
	return nil
}

// writeProfileEnv writes shipapi.ProfileEnvFile in the workspace (as the
// sandbox user, mode 0644): one `export KEY='value'` line per key listed in
// keys (comma-separated) that lookup finds. Keys that are not shell names and
// the runtime token are skipped. Without keys it writes nothing.
func writeProfileEnv(ws *workspace.Workspace, keys string, lookup func(string) (string, bool), log *slog.Logger) error {
	if strings.TrimSpace(keys) == "" {
		return nil
	}
	var b strings.Builder
	b.WriteString("# The sandbox profile's environment, written by ship at start.\n")
	for k := range strings.SplitSeq(keys, ",") {
		k = strings.TrimSpace(k)
		switch {
		case k == "":
			continue
		case !isShellName(k) || k == shipapi.EnvAuthToken:
			log.Warn("profile environment: key skipped", "key", k)
			continue
		}
		v, ok := lookup(k)
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v))
	}
	_, err := ws.CreateFile(shipapi.ProfileEnvFile, b.String(), 0o644)
	return err
}

// isShellName reports whether k is a valid shell variable name.
func isShellName(k string) bool {
	for i, c := range k {
		if c != '_' && !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && !(i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return k != ""
}

// shellQuote quotes s for a POSIX shell: in single quotes, each single quote
// inside closing the quotes, escaped, and reopening them.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
