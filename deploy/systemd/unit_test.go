package systemd_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shipyard-dev/shipyard/deploy/deploytest"
)

// TestUnitVerifies runs `systemd-analyze verify` on bay.service (with ExecStart pointed at an
// executable that exists here) and checks the hardening the unit promises is in it.
func TestUnitVerifies(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatalf("systemd-analyze is needed (apt-get install systemd): %v", err)
	}
	unit, err := os.ReadFile(filepath.Join(deploytest.RepoRoot(t), "deploy", "systemd", "bay.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"User=bay", "NoNewPrivileges=yes", "CapabilityBoundingSet=CAP_NET_ADMIN\n", "AmbientCapabilities=CAP_NET_ADMIN\n",
		"ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "PrivateDevices=yes", "RestrictNamespaces=yes",
		"SystemCallFilter=@system-service", "MemoryDenyWriteExecute=yes", "StateDirectory=bay", "ExecStart=/usr/local/bin/bay serve",
	} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("bay.service lacks %q", want)
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bay")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	local := strings.ReplaceAll(string(unit), "/usr/local/bin/bay", bin)
	if err := os.WriteFile(filepath.Join(dir, "bay.service"), []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", filepath.Join(dir, "bay.service")).CombinedOutput()
	if err != nil || strings.Contains(string(out), "bay.service:") {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
