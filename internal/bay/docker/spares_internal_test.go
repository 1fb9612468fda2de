package docker

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// An unfinished spare file is removed once its maker is gone (no one holds its lock), and only
// then: one whose maker still holds the lock, or made a moment ago, stays.
func TestSweepUnfinishedSpares(t *testing.T) {
	dir := t.TempDir()
	s := newSpares(&Driver{cfg: Config{CargoDir: dir}, log: slog.New(slog.DiscardHandler)})
	if err := os.MkdirAll(s.dir(), 0o700); err != nil {
		t.Fatal(err)
	}
	unfinished := func(name string, age time.Duration) string {
		p := filepath.Join(s.dir(), name+".img.tmp")
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
		return p
	}
	held := unfinished("1024-held", time.Minute)
	f, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	orphan := unfinished("1024-orphan", time.Minute)
	fresh := unfinished("1024-fresh", 0)

	s.sweep()
	for p, want := range map[string]bool{held: true, orphan: false, fresh: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: present %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
	// Its maker gone (the lock released with the file), the held one goes too.
	f.Close()
	s.sweep()
	if _, err := os.Stat(held); err == nil {
		t.Errorf("%s stayed after its maker let go", filepath.Base(held))
	}
}
