package jupyter

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/apierr"
	"github.com/shipyard-dev/shipyard/internal/ship/shiptest"
)

// TestExecHealsExhaustedSandbox: a kernel that cannot start for lack of processes (here an
// interpreter failing the way Python does when it cannot create a thread, as long as a marker
// file exists) makes Exec call OnExhausted and start it once more; the answer carries the
// notice. Without OnExhausted the call fails with resources_exhausted.
func TestExecHealsExhaustedSandbox(t *testing.T) {
	py := shiptest.Python(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "exhausted")
	wrapper := filepath.Join(dir, "python")
	script := "#!/bin/sh\nif [ -e " + marker + " ]; then echo 'RuntimeError: can'\"'\"'t start new thread' >&2; exit 1; fi\nexec " + py + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	newManager := func(heal func() string) *Manager {
		os.WriteFile(marker, nil, 0o644)
		m := NewManager(ManagerConfig{Kernel: KernelConfig{Python: wrapper, Dir: dir, Env: os.Environ()},
			StartTimeout: 30 * time.Second, OnExhausted: heal})
		t.Cleanup(func() { m.Close(context.Background()) })
		return m
	}

	m := newManager(nil)
	_, err := m.Exec(t.Context(), "1", 10*time.Second, false)
	if apierr.CodeOf(err) != shipapi.CodeResourcesExhausted {
		t.Fatalf("without healing: %v, want resources_exhausted", err)
	}

	calls := 0
	m = newManager(func() string {
		calls++
		os.Remove(marker)
		return "healed"
	})
	resp, err := m.Exec(t.Context(), "print(6*7)", 30*time.Second, false)
	if err != nil || resp.Output.Text != "42" || resp.Notice != "healed" || calls != 1 {
		t.Fatalf("with healing: %+v %v (calls %d)", resp, err, calls)
	}
	resp, err = m.Exec(t.Context(), "print(1)", 30*time.Second, false)
	if err != nil || resp.Notice != "" || strings.TrimSpace(resp.Output.Text) != "1" {
		t.Fatalf("next call: %+v %v", resp, err)
	}
}

// TestKernelStartStalledAtPidsLimit: an interpreter that hangs on start (as Python does when
// it got its process but cannot create its threads) while the sandbox stays at its pids limit
// is given up after PidsStall, not after StartTimeout; healing then starts a working kernel.
func TestKernelStartStalledAtPidsLimit(t *testing.T) {
	py := shiptest.Python(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "bomb")
	wrapper := filepath.Join(dir, "python")
	script := "#!/bin/sh\nif [ -e " + marker + " ]; then exec sleep 600; fi\nexec " + py + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(marker, nil, 0o644)
	atLimit := func() bool { _, err := os.Stat(marker); return err == nil }
	calls := 0
	m := NewManager(ManagerConfig{Kernel: KernelConfig{Python: wrapper, Dir: dir, Env: os.Environ()},
		StartTimeout: 60 * time.Second, AtPidsLimit: atLimit, PidsStall: 500 * time.Millisecond,
		OnExhausted: func() string {
			calls++
			os.Remove(marker)
			return "healed"
		}})
	t.Cleanup(func() { m.Close(context.Background()) })
	t0 := time.Now()
	resp, err := m.Exec(t.Context(), "print(6*7)", 30*time.Second, false)
	if err != nil || resp.Output.Text != "42" || resp.Notice != "healed" || calls != 1 {
		t.Fatalf("stalled start: %+v %v (calls %d)", resp, err, calls)
	}
	if took := time.Since(t0); took > 30*time.Second {
		t.Errorf("the stalled start was given up after %s, want about PidsStall", took)
	}
}
