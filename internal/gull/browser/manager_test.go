package browser

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestManagerWithoutChromium(t *testing.T) {
	dir := t.TempDir()
	m, err := NewManager(t.Context(), Config{Binary: filepath.Join(dir, "no-chromium"), ProfileDir: filepath.Join(dir, "profile"), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(t.Context())
	if _, err := m.Get(t.Context()); err == nil || !strings.Contains(err.Error(), "chromium not found") {
		t.Fatalf("Get = %v", err)
	}
	st := m.Status()
	if st.Installed || st.Active || st.Ready || st.LastError == "" {
		t.Errorf("status %+v", st)
	}
	if m.PID() != 0 || m.CloseBrowser(t.Context()) {
		t.Error("a browser runs")
	}
}

func TestProfileLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{ProfileDir: filepath.Join(dir, "profile"), Log: slog.New(slog.DiscardHandler)}
	m, err := NewManager(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	if _, err := NewManager(ctx, cfg); err == nil {
		t.Fatal("a second manager took the profile lock")
	}
	m.Close(t.Context())
	m2, err := NewManager(t.Context(), cfg)
	if err != nil {
		t.Fatalf("lock not released: %v", err)
	}
	m2.Close(t.Context())
}

func TestClearSingleton(t *testing.T) {
	p := t.TempDir()
	if err := os.Symlink("other-host-99", filepath.Join(p, "SingletonLock")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"SingletonSocket", "SingletonCookie", "Cookies"} {
		os.WriteFile(filepath.Join(p, n), nil, 0o600)
	}
	if err := clearSingleton(p, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(p)
	if len(ents) != 1 || ents[0].Name() != "Cookies" {
		t.Errorf("left: %v", ents)
	}
	if err := clearSingleton(p, slog.New(slog.DiscardHandler)); err != nil {
		t.Errorf("second clear: %v", err)
	}
}

func TestChromiumArgs(t *testing.T) {
	c := Config{ProfileDir: "/w/.browser/profile", ExtraArgs: []string{"--lang=de"}}
	c.defaults()
	a := strings.Join(c.args(), " ")
	for _, want := range []string{"--remote-debugging-pipe", "--user-data-dir=/w/.browser/profile", "--no-sandbox", "--headless", "--lang=de about:blank"} {
		if !strings.Contains(a, want) {
			t.Errorf("args lack %q: %s", want, a)
		}
	}
	if strings.Contains(a, "--remote-debugging-port") {
		t.Errorf("a TCP debugging port: %s", a)
	}
	c.Sandbox = true
	if strings.Contains(strings.Join(c.args(), " "), "--no-sandbox") {
		t.Error("--no-sandbox with Sandbox")
	}
	if c.LockFile != "/w/.browser/gull.lock" {
		t.Errorf("lock file %s", c.LockFile)
	}
}
