package ship

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/workspace"
)

// TestWriteProfileEnv writes the profile's environment and sources it with a real bash: every
// value comes back byte for byte, whatever quotes or expansions it holds.
func TestWriteProfileEnv(t *testing.T) {
	dir := t.TempDir()
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	env := map[string]string{
		"PLAIN":              "v",
		"QUOTES":             `it's "q" \ $HOME $(id) ` + "`id`",
		"NEWLINE":            "a\nb",
		"EMPTY":              "",
		shipapi.EnvAuthToken: "secret",
		"bad-key":            "x",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	keys := "PLAIN, QUOTES,NEWLINE,EMPTY,MISSING,bad-key," + shipapi.EnvAuthToken + ",,"
	if err := writeProfileEnv(ws, keys, lookup, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, shipapi.ProfileEnvFile)
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("stat: %v %v", fi, err)
	}
	for _, k := range []string{"PLAIN", "QUOTES", "NEWLINE", "EMPTY"} {
		out, err := bash(`. "$1" && printf '%s' "${!2}"`, file, k)
		if err != nil || string(out) != env[k] {
			t.Errorf("%s: %q %v, want %q", k, out, err, env[k])
		}
	}
	out, err := bash(`. "$1" && printf '%s|%s' "${MISSING-unset}" "${`+shipapi.EnvAuthToken+`-unset}"`, file)
	if err != nil || string(out) != "unset|unset" {
		t.Errorf("missing key and token: %q %v", out, err)
	}
	// Without keys nothing is written.
	os.Remove(file)
	if err := writeProfileEnv(ws, " ", lookup, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("written without keys: %v", err)
	}
}

// bash runs script with args in a clean environment.
func bash(script string, args ...string) ([]byte, error) {
	cmd := exec.Command("bash", append([]string{"-c", script, "bash"}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	return cmd.Output()
}
