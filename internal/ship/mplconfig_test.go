package ship

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// TestWritableMPLConfig: a config directory the user cannot write (the image's, on a
// read-only root filesystem) is copied to a writable one that MPLCONFIGDIR then names; a
// writable one is kept.
func TestWritableMPLConfig(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Log("as root every directory is writable: only the kept case is checked")
	}
	log := slog.New(slog.DiscardHandler)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "fontlist-v390.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := writableMPLConfig([]string{"MPLCONFIGDIR=" + src}, nil, log)
	if got := lookupEnv(env, "MPLCONFIGDIR"); got != src {
		t.Errorf("a writable directory was replaced by %q", got)
	}
	if os.Geteuid() == 0 {
		return
	}
	if err := os.Chmod(src, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(src, 0o755) })
	t.Setenv("TMPDIR", t.TempDir())
	env = writableMPLConfig([]string{"MPLCONFIGDIR=" + src}, nil, log)
	dst := lookupEnv(env, "MPLCONFIGDIR")
	if dst == src {
		t.Fatal("a read-only directory was kept")
	}
	if _, err := os.Stat(filepath.Join(dst, "fontlist-v390.json")); err != nil {
		t.Errorf("the prebuilt cache was not copied: %v", err)
	}
	// A second start (ship restarted in the same container) finds the copy and keeps it.
	if again := lookupEnv(writableMPLConfig([]string{"MPLCONFIGDIR=" + src}, nil, log), "MPLCONFIGDIR"); again != dst {
		t.Errorf("second start: %q, want %q", again, dst)
	}
}
