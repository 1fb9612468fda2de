package main

import (
	"context"
	"sync"
	"time"

	"github.com/moby/moby/client"
)

// engineEvents records when the engine finished creating and starting each container (from
// the Engine API event stream, nanosecond timestamps on the same clock as ours). It breaks a
// bay cold start into parts without touching bay: request -> container created -> container
// started -> result.
type engineEvents struct {
	mu     sync.Mutex
	create map[string]time.Time // key: bay.sandbox_id label, else container name
	start  map[string]time.Time
	cancel context.CancelFunc
}

func watchEvents(ctx context.Context, cli *client.Client) *engineEvents {
	ctx, cancel := context.WithCancel(ctx)
	ev := &engineEvents{create: map[string]time.Time{}, start: map[string]time.Time{}, cancel: cancel}
	res := cli.Events(ctx, client.EventsListOptions{Filters: make(client.Filters).
		Add("type", "container").Add("event", "create", "start")})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-res.Err:
				return
			case m := <-res.Messages:
				key := m.Actor.Attributes["bay.sandbox_id"]
				if key == "" {
					key = m.Actor.Attributes["name"]
				}
				t := time.Unix(0, m.TimeNano)
				ev.mu.Lock()
				switch m.Action {
				case "create":
					ev.create[key] = t
				case "start":
					ev.start[key] = t
				}
				ev.mu.Unlock()
			}
		}
	}()
	return ev
}

// times returns the create and start event times of key (zero when not seen). Events arrive
// asynchronously: it waits up to 2 s for both.
func (e *engineEvents) times(key string) (created, started time.Time) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		e.mu.Lock()
		created, started = e.create[key], e.start[key]
		e.mu.Unlock()
		if (!created.IsZero() && !started.IsZero()) || time.Now().After(deadline) {
			return created, started
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *engineEvents) stop() { e.cancel() }
