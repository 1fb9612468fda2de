// Package browser runs the one Chromium of a sandbox and drives it over the
// DevTools pipe: the Manager starts it (with the persistent profile), watches
// it, restarts it when it dies and closes it gracefully; a Browser is one
// running Chromium with its tabs, element refs and page operations.
package browser

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shipyard-dev/shipyard/internal/gull/cdp"
)

// DefaultBinary is the headless Chromium of Debian's chromium-headless-shell
// package, called directly (the /usr/bin wrapper only adds flags of its own).
const DefaultBinary = "/usr/lib/chromium/chromium-headless-shell"

// Config configures the Manager.
type Config struct {
	// Binary is the Chromium executable; default DefaultBinary.
	Binary string
	// ProfileDir is the user data directory; it persists across restarts.
	ProfileDir string
	// LockFile is gull's own lock: held for the Manager's lifetime, it makes
	// any Chromium Singleton* file in ProfileDir stale. Default
	// <ProfileDir>/../gull.lock.
	LockFile string
	// ExtraArgs are appended to Chromium's command line.
	ExtraArgs []string
	// Sandbox keeps Chromium's own sandbox; by default it runs with
	// --no-sandbox (the container is the boundary, and an unprivileged
	// container without user namespaces cannot set Chromium's up).
	Sandbox bool
	// Env is Chromium's environment; default os.Environ().
	Env []string
	// Width and Height are the window (viewport) size; default 1280x720.
	Width, Height int
	// StartTimeout bounds one start; default 30s.
	StartTimeout time.Duration
	// CloseTimeout bounds a graceful close before the process is killed;
	// default 5s.
	CloseTimeout time.Duration
	Log          *slog.Logger
}

func (c *Config) defaults() {
	if c.Binary == "" {
		c.Binary = DefaultBinary
	}
	if c.LockFile == "" {
		c.LockFile = filepath.Join(filepath.Dir(c.ProfileDir), "gull.lock")
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
	if c.Width <= 0 || c.Height <= 0 {
		c.Width, c.Height = 1280, 720
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.CloseTimeout <= 0 {
		c.CloseTimeout = 5 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// args is Chromium's command line (without the binary).
func (c *Config) args() []string {
	a := []string{
		"--headless",
		"--remote-debugging-pipe",
		"--user-data-dir=" + c.ProfileDir,
		"--no-first-run",
		"--no-default-browser-check",
		"--disable-gpu",
		// Docker gives /dev/shm 64 MiB by default: too small for renderers.
		"--disable-dev-shm-usage",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
		"--disable-extensions",
		"--disable-breakpad",
		"--disable-crash-reporter",
		"--disable-default-apps",
		"--disable-domain-reliability",
		"--disable-features=Translate,MediaRouter,OptimizationHints,InterestFeedContentSuggestions",
		"--metrics-recording-only",
		"--mute-audio",
		"--hide-scrollbars",
		"--password-store=basic",
		"--use-mock-keychain",
		"--window-size=" + strconv.Itoa(c.Width) + "," + strconv.Itoa(c.Height),
	}
	if !c.Sandbox {
		a = append(a, "--no-sandbox")
	}
	a = append(a, c.ExtraArgs...)
	return append(a, "about:blank")
}

// process is one running Chromium.
type process struct {
	cmd    *exec.Cmd
	conn   *cdp.Conn
	log    *slog.Logger
	exited chan struct{}
	err    error // Wait's result, valid once exited is closed
}

func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// startProcess starts Chromium with the DevTools pipe on its fds 3 and 4.
func startProcess(cfg *Config) (*process, error) {
	// Chromium reads commands on fd 3 and writes on fd 4.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("devtools pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		return nil, fmt.Errorf("devtools pipe: %w", err)
	}
	cmd := exec.Command(cfg.Binary, cfg.args()...)
	cmd.Env = cfg.Env
	cmd.Dir = filepath.Dir(cfg.ProfileDir)
	cmd.ExtraFiles = []*os.File{cmdR, outW}
	// Its own process group, so that a kill reaches the renderers too; and
	// it dies with gull.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	log := &logWriter{log: cfg.Log}
	cmd.Stdout, cmd.Stderr = log, log
	// Wait also waits for the end of the output: a child that left the
	// process group keeps it open. Once Chromium itself exited, its output
	// is given this long.
	cmd.WaitDelay = outputDelay
	err = cmd.Start()
	cmdR.Close()
	outW.Close()
	if err != nil {
		cmdW.Close()
		outR.Close()
		return nil, fmt.Errorf("start chromium %s: %w", cfg.Binary, err)
	}
	p := &process{cmd: cmd, conn: cdp.New(outR, cmdW), log: cfg.Log, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		outR.Close()
		cmdW.Close()
		close(p.exited)
	}()
	return p, nil
}

// outputDelay bounds how long Wait reads Chromium's output after Chromium
// exited; killDelay how long close waits after a signal.
const (
	outputDelay = 2 * time.Second
	killDelay   = 2 * time.Second
)

// close asks Chromium to close (it writes its cookies and profile first),
// then kills its process group if it has not exited in time.
func (p *process) close(ctx context.Context, timeout time.Duration) {
	if !p.alive() {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	_ = p.conn.Call(cctx, "", "Browser.close", nil, nil)
	select {
	case <-p.exited:
		return
	case <-cctx.Done():
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(killDelay):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	// A killed process is reaped at once and its output given outputDelay;
	// a process stuck in the kernel (uninterruptible I/O) is not waited for.
	select {
	case <-p.exited:
	case <-time.After(killDelay + outputDelay):
		p.log.Warn("chromium did not exit after SIGKILL", "pid", p.cmd.Process.Pid)
	}
}

// clearSingleton removes Chromium's Singleton* files from the profile. It is
// called with gull's lock held and no Chromium of ours running, so they are
// stale: left by a Chromium of an earlier container (another hostname: its
// lock would make Chromium refuse the profile) or one that was killed.
func clearSingleton(profile string, log *slog.Logger) error {
	if target, err := os.Readlink(filepath.Join(profile, "SingletonLock")); err == nil {
		host, _, _ := strings.Cut(target, "-")
		if me, _ := os.Hostname(); host != me {
			log.Info("profile was last used on another host; clearing its lock", "host", host)
		}
	}
	var errs []error
	for _, n := range []string{"SingletonLock", "SingletonSocket", "SingletonCookie"} {
		if err := os.Remove(filepath.Join(profile, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// logWriter sends Chromium's output lines to the log at debug level.
type logWriter struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(w.buf[:i])); line != "" {
			w.log.Debug("chromium", "line", line)
		}
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 8<<10 {
		w.buf = w.buf[:0]
	}
	return len(b), nil
}
