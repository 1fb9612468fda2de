package jupyter

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/internal/ship/apierr"
	"github.com/shipyard-dev/shipyard/internal/ship/shiptest"
)

// TestCallAfterDeathBeforeWatcher: the call after one that saw its kernel die runs on a new
// kernel even when the dead kernel's watcher has not reacted yet (a loaded machine schedules it
// late). Before, that call met the dead kernel again and answered kernel_died with the old exit
// status.
func TestCallAfterDeathBeforeWatcher(t *testing.T) {
	py := shiptest.Python(t)
	m := NewManager(ManagerConfig{Kernel: KernelConfig{Python: py, Dir: t.TempDir(), Env: os.Environ()},
		StartTimeout: 60 * time.Second})
	release := make(chan struct{})
	m.watcherLate = func() { <-release }
	t.Cleanup(func() {
		close(release)
		m.Close(context.Background())
	})

	if _, err := m.Exec(t.Context(), "z = 5", 30*time.Second, false); err != nil {
		t.Fatal(err)
	}
	pid := m.KernelPID()
	_, err := m.Exec(t.Context(), "import os\nos._exit(1)", 30*time.Second, false)
	if apierr.CodeOf(err) != shipapi.CodeKernelDied {
		t.Fatalf("the dying call: %v, want kernel_died", err)
	}
	resp, err := m.Exec(t.Context(), "print('z' in globals())", 60*time.Second, false)
	if err != nil || strings.TrimSpace(resp.Output.Text) != "False" || !resp.KernelRestarted ||
		!strings.Contains(resp.KernelNotice, "died") {
		t.Fatalf("the next call: %+v %v", resp, err)
	}
	st := m.Status()
	if st.Status != StateAlive || st.PID == pid || st.Restarts != 1 {
		t.Fatalf("status %+v, want a new kernel after one restart", st)
	}
}
