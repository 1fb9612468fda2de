package hostlock_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/hostlock"
)

// One holder at a time; a waiter is told once and gets the lock when it is released; a
// cancelled waiter gives up.
func TestAcquire(t *testing.T) {
	name := fmt.Sprintf("shipyard-hostlock-test-%d", os.Getpid())
	t.Cleanup(func() { os.Remove(os.TempDir() + "/" + name + ".lock") })
	var inside, most atomic.Int32
	var told atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			unlock, err := hostlock.Acquire(t.Context(), name, func() { told.Add(1) })
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			if n > most.Load() {
				most.Store(n)
			}
			time.Sleep(20 * time.Millisecond)
			inside.Add(-1)
			unlock()
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d holders at once", most.Load())
	}
	if told.Load() == 0 {
		t.Fatal("no waiter was told it waits")
	}

	unlock, err := hostlock.Acquire(t.Context(), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := hostlock.Acquire(ctx, name, nil); err == nil {
		t.Fatal("a second holder got the lock")
	}
}
