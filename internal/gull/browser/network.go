package browser

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// netTracker counts the requests in flight per tab session, from the
// Network events of every session (Network.enable at attach).
type netTracker struct {
	mu       sync.Mutex
	inflight map[string]map[string]bool // session -> request ids
	changed  map[string]time.Time       // session -> last request start or end
}

func newNetTracker() *netTracker {
	return &netTracker{inflight: map[string]map[string]bool{}, changed: map[string]time.Time{}}
}

// track follows the Network events until the connection ends.
func (b *Browser) trackNetwork() {
	events, stop := b.c.Subscribe("Network.requestWillBeSent", "Network.loadingFinished", "Network.loadingFailed")
	defer stop()
	t := b.net
	for ev := range events {
		var p struct {
			RequestID string `json:"requestId"`
		}
		if json.Unmarshal(ev.Params, &p) != nil || p.RequestID == "" {
			continue
		}
		t.mu.Lock()
		set := t.inflight[ev.SessionID]
		if set == nil {
			set = map[string]bool{}
			t.inflight[ev.SessionID] = set
		}
		if ev.Method == "Network.requestWillBeSent" {
			set[p.RequestID] = true
		} else {
			delete(set, p.RequestID)
		}
		t.changed[ev.SessionID] = time.Now()
		t.mu.Unlock()
	}
}

// idleFor reports how long the session has had no request in flight (0
// while some are).
func (t *netTracker) idleFor(session string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.inflight[session]) > 0 {
		return 0
	}
	c, ok := t.changed[session]
	if !ok {
		return time.Duration(1<<62 - 1)
	}
	return time.Since(c)
}

// NetworkIdle waits until the current page has loaded and made no request
// for quiet (no request in flight, none started or ended).
func (b *Browser) NetworkIdle(ctx context.Context, quiet time.Duration) error {
	sid := b.Tab().SessionID
	for {
		loaded, err := b.evaluate(ctx, "document.readyState === 'complete'", false)
		if err != nil {
			return err
		}
		if string(loaded) == "true" && b.net.idleFor(sid) >= quiet {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
