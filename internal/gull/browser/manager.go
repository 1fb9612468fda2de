package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Status is what /health reports about the browser.
type Status struct {
	// Installed is false when the Chromium binary is missing.
	Installed bool
	// Active: a Chromium is running.
	Active bool
	// Ready: a Chromium is running and answered over the pipe.
	Ready bool
	// Crashed: the last Chromium died without being asked to (it is being
	// restarted or failed to restart).
	Crashed bool
	// LastError is the last start failure, if any.
	LastError string
}

// Manager owns the sandbox's one Chromium.
type Manager struct {
	cfg Config

	lockFile *os.File

	mu       sync.Mutex
	cur      *Browser
	starting chan struct{} // non-nil while a start is under way
	crashed  bool
	lastErr  error
	closed   bool
	stop     chan struct{}
}

// NewManager takes gull's profile lock (waiting for it until ctx ends) and
// returns a Manager; Chromium is not started yet (Start or Get do that).
func NewManager(ctx context.Context, cfg Config) (*Manager, error) {
	cfg.defaults()
	if cfg.ProfileDir == "" {
		return nil, errors.New("browser profile dir is empty")
	}
	if err := os.MkdirAll(cfg.ProfileDir, 0o700); err != nil {
		return nil, fmt.Errorf("create profile dir: %w", err)
	}
	f, err := os.OpenFile(cfg.LockFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open profile lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", cfg.LockFile, err)
		}
		cfg.Log.Info("waiting for another gull using the browser profile", "lock", cfg.LockFile)
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", cfg.LockFile, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	return &Manager{cfg: cfg, lockFile: f, stop: make(chan struct{})}, nil
}

// Installed reports whether the Chromium binary exists and is executable.
func (m *Manager) Installed() bool {
	st, err := os.Stat(m.cfg.Binary)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// Status reports the browser's state.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Status{Installed: m.Installed(), Crashed: m.crashed}
	if m.lastErr != nil {
		st.LastError = m.lastErr.Error()
	}
	if m.cur != nil && m.cur.proc.alive() {
		st.Active = true
		st.Ready = true
	}
	return st
}

// Get returns the running browser, starting it when none runs.
func (m *Manager) Get(ctx context.Context) (*Browser, error) {
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, errors.New("browser manager is shut down")
		}
		if m.cur != nil && m.cur.proc.alive() {
			b := m.cur
			m.mu.Unlock()
			return b, nil
		}
		if wait := m.starting; wait != nil {
			m.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		m.starting = done
		m.mu.Unlock()

		b, err := m.start(ctx)
		m.mu.Lock()
		m.starting = nil
		close(done)
		if err != nil {
			m.lastErr = err
			m.mu.Unlock()
			return nil, err
		}
		if m.closed { // Close ran while this one started: it must not outlive it
			m.mu.Unlock()
			b.closing.Store(true)
			b.proc.close(context.WithoutCancel(ctx), m.cfg.CloseTimeout)
			return nil, errors.New("browser manager is shut down")
		}
		m.cur, m.lastErr, m.crashed = b, nil, false
		m.mu.Unlock()
		go m.watch(b)
		return b, nil
	}
}

// start launches Chromium and connects to its first tab.
func (m *Manager) start(ctx context.Context) (*Browser, error) {
	if !m.Installed() {
		return nil, fmt.Errorf("chromium not found at %s", m.cfg.Binary)
	}
	if err := clearSingleton(m.cfg.ProfileDir, m.cfg.Log); err != nil {
		return nil, fmt.Errorf("clear stale profile lock: %w", err)
	}
	t0 := time.Now()
	p, err := startProcess(&m.cfg)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, m.cfg.StartTimeout)
	defer cancel()
	b, err := connect(sctx, p, m.cfg.Width, m.cfg.Height)
	if err != nil {
		p.close(ctx, time.Second)
		return nil, fmt.Errorf("connect to chromium: %w", err)
	}
	m.cfg.Log.Info("chromium started", "pid", p.cmd.Process.Pid, "product", b.Product, "took", time.Since(t0).Round(time.Millisecond))
	return b, nil
}

// watch restarts Chromium when it dies without being asked to; meanwhile
// Status says Crashed.
func (m *Manager) watch(b *Browser) {
	select {
	case <-b.proc.exited:
	case <-m.stop:
		return
	}
	m.mu.Lock()
	intended := b.closing.Load() || m.closed
	if m.cur == b {
		m.cur = nil
	}
	if !intended {
		m.crashed = true
	}
	m.mu.Unlock()
	if intended {
		return
	}
	m.cfg.Log.Warn("chromium exited unexpectedly; restarting", "err", b.proc.err)
	for delay := 500 * time.Millisecond; ; delay = min(2*delay, 30*time.Second) {
		select {
		case <-m.stop:
			return
		case <-time.After(delay):
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.StartTimeout)
		_, err := m.Get(ctx)
		cancel()
		if err == nil {
			return
		}
		m.cfg.Log.Warn("chromium restart failed", "err", err)
	}
}

// CloseBrowser closes the running Chromium gracefully (the next Get starts a
// new one). It reports whether one was running.
func (m *Manager) CloseBrowser(ctx context.Context) bool {
	m.mu.Lock()
	b := m.cur
	m.cur = nil
	m.mu.Unlock()
	if b == nil || !b.proc.alive() {
		return false
	}
	b.closing.Store(true)
	b.proc.close(ctx, m.cfg.CloseTimeout)
	return true
}

// Close closes Chromium gracefully and releases the profile lock.
func (m *Manager) Close(ctx context.Context) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	close(m.stop)
	b := m.cur
	m.cur = nil
	m.mu.Unlock()
	if b != nil {
		b.closing.Store(true)
		b.proc.close(ctx, m.cfg.CloseTimeout)
	}
	m.lockFile.Close()
}

// ProfileDir is the profile directory.
func (m *Manager) ProfileDir() string { return filepath.Clean(m.cfg.ProfileDir) }

// PID is the process id of the running Chromium, 0 when none runs.
func (m *Manager) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil || !m.cur.proc.alive() {
		return 0
	}
	return m.cur.proc.cmd.Process.Pid
}
