package egress

import (
	"log/slog"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Ring bounds.
const (
	// RingSize is how many refusals are kept per sandbox (the newest).
	RingSize = 256
	// maxRings bounds the sandboxes with a ring; the least recently refused one is dropped.
	maxRings = 4096
	// logBurst refusals per sandbox are logged per second; the rest are only counted (a DNS
	// tunnel attempt makes thousands).
	logBurst = 10
)

// events keeps a bounded ring of refusals per sandbox and counts them.
type events struct {
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	rings map[string]*ring
}

type ring struct {
	buf    []bay.NetworkEvent
	next   int
	denied int64
	last   time.Time
	// logged counts log lines in the second that began at logSec.
	logSec time.Time
	logged int
}

func newEvents(log *slog.Logger, now func() time.Time) *events {
	return &events{log: log, now: now, rings: map[string]*ring{}}
}

// deny records a refusal for the sandbox and logs it (rate-limited).
func (e *events) deny(sandboxID, kind, host string, port int, rule string) {
	t := e.now()
	ev := bay.NetworkEvent{Time: t, Kind: kind, Host: host, Port: port, Rule: rule}
	e.mu.Lock()
	r := e.rings[sandboxID]
	if r == nil {
		if len(e.rings) >= maxRings {
			e.evictLocked()
		}
		r = &ring{}
		e.rings[sandboxID] = r
	}
	if len(r.buf) < RingSize {
		r.buf = append(r.buf, ev)
	} else {
		r.buf[r.next] = ev
		r.next = (r.next + 1) % RingSize
	}
	r.denied++
	r.last = t
	if t.Sub(r.logSec) >= time.Second {
		r.logSec, r.logged = t, 0
	}
	r.logged++
	logIt := r.logged <= logBurst
	e.mu.Unlock()
	if logIt {
		e.log.Info("egress refused", "sandbox_id", sandboxID, "kind", kind, "host", host, "port", port, "rule", rule)
	}
}

func (e *events) evictLocked() {
	var oldest string
	var at time.Time
	for id, r := range e.rings {
		if oldest == "" || r.last.Before(at) {
			oldest, at = id, r.last
		}
	}
	delete(e.rings, oldest)
}

// list returns the sandbox's refusals, oldest first, and their total count.
func (e *events) list(sandboxID string) ([]bay.NetworkEvent, int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.rings[sandboxID]
	if r == nil {
		return nil, 0
	}
	out := make([]bay.NetworkEvent, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	out = append(out, r.buf[:r.next]...)
	return out, r.denied
}
