package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHeavyOperationsShareSlots: heavy operations never run more at once than the slots allow;
// a body over a quarter of MaxJSONBytes, or of unknown length, runs alone; small bodies pass.
func TestHeavyOperationsShareSlots(t *testing.T) {
	s := &Server{HeavyOps: 2, HeavyBytes: 10, MaxJSONBytes: 400, Log: slog.New(slog.DiscardHandler)}
	s.Handler()
	var cur, peak atomic.Int32
	h := s.heavyBody(func(w http.ResponseWriter, r *http.Request) {
		n := cur.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		cur.Add(-1)
	})
	run := func(n int, body string, length int64) int32 {
		peak.Store(0)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				r := httptest.NewRequest("POST", "/", strings.NewReader(body))
				r.ContentLength = length
				h(httptest.NewRecorder(), r)
			})
		}
		wg.Wait()
		return peak.Load()
	}
	if p := run(6, "small", 5); p < 3 {
		t.Errorf("small bodies ran %d at once; they need no slot", p)
	}
	if p := run(6, strings.Repeat("m", 50), 50); p != 2 {
		t.Errorf("medium bodies ran %d at once, want 2", p)
	}
	if p := run(4, strings.Repeat("l", 150), 150); p != 1 {
		t.Errorf("large bodies ran %d at once, want 1", p)
	}
	if p := run(4, "chunked", -1); p != 1 {
		t.Errorf("bodies of unknown length ran %d at once, want 1", p)
	}
}
