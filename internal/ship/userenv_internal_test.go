package ship

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/ship/workspace"
)

func TestUserEnv(t *testing.T) {
	got := userEnv([]string{"PATH=/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8"}, "/workspace")
	for _, want := range []string{"HOME=/workspace", "PATH=/workspace/.local/bin:/usr/bin:/bin", "PIP_BREAK_SYSTEM_PACKAGES=1",
		"NPM_CONFIG_PREFIX=/workspace/.local", "LANG=C.UTF-8"} {
		if !slices.Contains(got, want) {
			t.Errorf("userEnv lacks %s: %v", want, got)
		}
	}
	if slices.Contains(got, "HOME=/root") {
		t.Errorf("ship's HOME leaked: %v", got)
	}
	// What the image or the profile set is kept; PATH is not extended twice.
	got = userEnv([]string{"PATH=/workspace/.local/bin:/bin", "PIP_BREAK_SYSTEM_PACKAGES=0", "NPM_CONFIG_PREFIX=/opt/npm"}, "/workspace")
	for _, want := range []string{"PATH=/workspace/.local/bin:/bin", "PIP_BREAK_SYSTEM_PACKAGES=0", "NPM_CONFIG_PREFIX=/opt/npm"} {
		if !slices.Contains(got, want) {
			t.Errorf("userEnv overrode %s: %v", want, got)
		}
	}
}

func TestWriteLoginProfileKeepsTheUsers(t *testing.T) {
	dir := t.TempDir()
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := writeLoginProfile(ws); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, ".profile"))
	if string(b) != loginProfile {
		t.Fatalf(".profile = %q", b)
	}
	// A login shell gets ~/.local/bin first on PATH once, whatever /etc/profile set.
	out, err := exec.Command("bash", "-c", `HOME=`+dir+` PATH=/usr/bin:/bin; . "$HOME/.profile"; . "$HOME/.profile"; echo "$PATH"`).Output()
	if err != nil || strings.TrimSpace(string(out)) != dir+"/.local/bin:/usr/bin:/bin" {
		t.Errorf("PATH after .profile = %q, %v", out, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".profile"), []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeLoginProfile(ws); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".profile")); string(b) != "# mine\n" {
		t.Errorf("the user's .profile was changed: %q", b)
	}
}
