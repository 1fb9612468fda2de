package ship

import (
	"os"
	"testing"
	"time"
)

// TestReserveThreadsKeepsThem: the threads made by reserveThreads still exist afterwards,
// idle, for the runtime to reuse when no new one can be created.
func TestReserveThreadsKeepsThem(t *testing.T) {
	threads := func() int {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	reserveThreads(24)
	time.Sleep(100 * time.Millisecond)
	if got := threads(); got < 24 {
		t.Fatalf("%d threads after reserving 24", got)
	}
}
