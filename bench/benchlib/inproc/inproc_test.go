package inproc

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// TestBayLifecycle starts a real in-process bay (SQLite file, Docker driver: the engine must
// be running), checks that it answers, and that Close stops it and removes its directory.
func TestBayLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logPath := filepath.Join(t.TempDir(), "bay.log")
	b, err := New(Options{TempPrefix: "inproc-test-", LogPath: logPath, Config: func(dir string) string {
		return fmt.Sprintf("database:\n  url: \"sqlite:///%s/bay.db\"\nsecurity:\n  allow_anonymous: true\ngc:\n  enabled: false\nwarm_pool:\n  enabled: false\n", dir)
	}})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			b.Close()
		}
	}()
	if _, err := os.Stat(filepath.Join(b.Dir, "config.yaml")); err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(b.URL() + bayapi.PathHealth)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health: HTTP %d", resp.StatusCode)
	}
	b.Stop()
	b.Stop() // idempotent
	if _, err := http.Get(b.URL() + bayapi.PathHealth); err == nil {
		t.Fatal("bay still answers after Stop")
	}
	b.Close()
	closed = true
	if _, err := os.Stat(b.Dir); !os.IsNotExist(err) {
		t.Fatalf("data directory left after Close: %v", err)
	}
}

// TestStartFailure: a bay that cannot start returns its error from Start, and Close does
// not hang on it.
func TestStartFailure(t *testing.T) {
	b, err := New(Options{TempPrefix: "inproc-test-", LogPath: filepath.Join(t.TempDir(), "bay.log"),
		Config: func(string) string { return "database: [not, a, mapping\n" }})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err == nil {
		t.Fatal("Start succeeded with a broken config")
	}
	b.Close()
	if _, err := os.Stat(b.Dir); !os.IsNotExist(err) {
		t.Fatalf("data directory left after Close: %v", err)
	}
}
