package privsep

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain makes the test binary the probe when Check starts it (as cmd/ship does).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ProbeArg {
		if err := RunProbe(os.Args[2:]); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCheckRefusesWithoutNoNewPrivileges runs the probe from this (root) process as the
// sandbox user: without no-new-privileges a set-user-id program would give root back, and
// Check says so; with it (set on the thread that starts the probe, which the probe inherits)
// the probe finds nothing: it cannot take root's or ship's ids, signal this process or open its
// /proc files, and holds no capability.
func TestCheckRefusesWithoutNoNewPrivileges(t *testing.T) {
	needRoot(t)
	exe := probeBinary(t)
	u := &User{UID: 1000, GID: 1000, Name: "shipyard"}
	if nnp, _ := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); nnp == 0 {
		err := u.Check(t.Context(), exe, ShipUID)
		if err == nil || !strings.Contains(err.Error(), "no-new-privileges") {
			t.Fatalf("Check without no-new-privileges: %v", err)
		}
		if strings.Count(err.Error(), ";") != 0 {
			t.Errorf("Check found more than the missing no-new-privileges: %v", err)
		}
	}
	done := make(chan error)
	go func() {
		// This thread keeps no-new-privileges for good: it stays locked and ends with the
		// goroutine.
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			done <- err
			return
		}
		done <- u.Check(context.Background(), exe, ShipUID)
	}()
	if err := <-done; err != nil {
		t.Fatalf("Check with no-new-privileges: %v", err)
	}
	var nilUser *User
	if err := nilUser.Check(t.Context(), exe, ShipUID); err == nil {
		t.Error("Check without a separate user must refuse")
	}
}

// probeBinary copies the test binary where the sandbox user may run it (go test's build
// directory is root's alone).
func probeBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "privsep-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "probe")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestVerifyThisProcess checks Verify against what this process holds: as root with every
// capability it must fail on the ids and pass nothing it should not.
func TestVerifyThisProcess(t *testing.T) {
	needRoot(t)
	if err := Verify(1000, 1000, 0); err == nil || !strings.Contains(err.Error(), "Uid") && !strings.Contains(err.Error(), "Gid") {
		t.Fatalf("Verify as root for uid 1000: %v", err)
	}
	eff, prm, _, err := threadCaps(0)
	if err != nil || eff == 0 || prm == 0 {
		t.Fatalf("threadCaps of a root thread: %x %x %v", eff, prm, err)
	}
	if err := Verify(0, 0, eff); err != nil && !strings.Contains(err.Error(), "Groups") {
		t.Fatalf("Verify of root's own ids and capabilities: %v", err)
	}
}
