package privsep

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("this test needs root (CAP_SETUID and CAP_SETGID to change a thread's ids)")
		}
		t.Skip("needs root")
	}
}

func owner(t *testing.T, p string) (int, int) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// TestDoActsAsTheSandboxUser runs file operations under Do in this (root) process: they create
// files owned by the sandbox user and get its permission checks; afterwards, on the same
// goroutine, and after a panic inside Do, the thread is root again.
func TestDoActsAsTheSandboxUser(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	os.Chmod(filepath.Dir(dir), 0o755)
	u := &User{UID: 1000, GID: 1000, Name: "shipyard"}
	if err := u.Do(func() error {
		if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "d", "f"), []byte("x"), 0o600)
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"d", "d/f"} {
		if uid, gid := owner(t, filepath.Join(dir, p)); uid != 1000 || gid != 1000 {
			t.Errorf("%s owned by %d:%d, want 1000:1000", p, uid, gid)
		}
	}
	// Root's 0600 file is not readable as the sandbox user.
	secret := filepath.Join(dir, "root-only")
	os.WriteFile(secret, []byte("s"), 0o600)
	if err := u.Do(func() error { _, err := os.ReadFile(secret); return err }); !os.IsPermission(err) {
		t.Errorf("read root's 0600 file as the sandbox user: %v", err)
	}
	// Back to root on this goroutine, and after a panic.
	func() {
		defer func() { recover() }()
		u.Do(func() error { panic("boom") })
	}()
	after := filepath.Join(dir, "after")
	if err := os.WriteFile(after, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if uid, _ := owner(t, after); uid != 0 {
		t.Errorf("file written after Do owned by %d, want root", uid)
	}
	if _, err := os.ReadFile(secret); err != nil {
		t.Errorf("root cannot read its file after Do: %v", err)
	}
	// Many goroutines at once: none leaks its identity to another.
	done := make(chan error, 16)
	for i := range 16 {
		go func() {
			if i%2 == 0 {
				done <- u.Do(func() error {
					runtime.Gosched()
					return os.WriteFile(filepath.Join(dir, "d", "c"+string(rune('a'+i))), nil, 0o644)
				})
				return
			}
			_, err := os.ReadFile(secret)
			done <- err
		}()
	}
	for range 16 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestNilUserChangesNothing(t *testing.T) {
	var u *User
	if u.Credential() != nil {
		t.Error("nil user has a credential")
	}
	attr := &syscall.SysProcAttr{Setpgid: true}
	u.Apply(attr)
	if attr.Credential != nil || !attr.Setpgid {
		t.Errorf("Apply of nil user: %+v", attr)
	}
	ran := false
	if err := u.Do(func() error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("Do of nil user: %v %v", ran, err)
	}
	if _, err := u.KillAll(); err == nil {
		t.Error("KillAll without a separate user must refuse (it would hit ship itself)")
	}
	c := (&User{UID: 1000, GID: 1000}).Credential()
	if c.Uid != 1000 || c.Gid != 1000 || c.Groups == nil || len(c.Groups) != 0 || c.NoSetGroups {
		t.Errorf("credential %+v: supplementary groups must be set to none", c)
	}
}

func TestParseStatus(t *testing.T) {
	st := ParseStatus("Name:\tship\nUid:\t999\t999\t999\t999\nCapEff:\t00000000000000e0\nGroups:\t\n")
	if st["Name"] != "ship" || st["Uid"] != "999\t999\t999\t999" || st["CapEff"] != "00000000000000e0" || st["Groups"] != "" {
		t.Errorf("%q", st)
	}
}
