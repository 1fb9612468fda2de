package idempotency_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/idempotency"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func open(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(dir, "bay.db"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// effect writes the record through the hook in a store Tx, like the service does.
func effect(st bay.Store, n *int, v any) func(ctx context.Context, hook idempotency.Hook) (any, error) {
	return func(ctx context.Context, hook idempotency.Hook) (any, error) {
		*n++
		err := st.Tx(ctx, func(tx bay.Tx) error {
			if hook != nil {
				return hook(ctx, tx, v)
			}
			return nil
		})
		return v, err
	}
}

func TestKeysScopeExpiryAndSwitch(t *testing.T) {
	st := open(t, t.TempDir())
	defer st.Close()
	clk := &clock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	m := idempotency.New(st, clk, idempotency.Config{Enabled: true, TTL: time.Hour}, nil)
	ctx := context.Background()
	n := 0
	req := idempotency.Request{Owner: "o", Key: "k", Method: "POST", Path: "/v1/cargos", Body: map[string]int{"a": 1}}
	r1, err := m.Do(ctx, req, 201, effect(st, &n, map[string]int{"v": 1}))
	if err != nil || r1.Status != 201 || string(r1.Body) != `{"v":1}` || r1.Replayed {
		t.Fatalf("first: %+v %v", r1, err)
	}
	r2, err := m.Do(ctx, req, 201, effect(st, &n, map[string]int{"v": 2}))
	if err != nil || !r2.Replayed || string(r2.Body) != `{"v":1}` || n != 1 {
		t.Fatalf("replay: %+v %v (n=%d)", r2, err, n)
	}
	// Another path with the same key is another scope.
	other := req
	other.Path = "/v1/sandboxes/sandbox-1/extend_ttl"
	if r, err := m.Do(ctx, other, 200, effect(st, &n, 3)); err != nil || r.Replayed || n != 2 {
		t.Fatalf("other scope: %+v %v", r, err)
	}
	// After the TTL the key is free again.
	clk.Advance(time.Hour + time.Second)
	if r, err := m.Do(ctx, req, 201, effect(st, &n, 4)); err != nil || r.Replayed || string(r.Body) != "4" {
		t.Fatalf("expired: %+v %v", r, err)
	}
	// Disabled: the header is ignored entirely, even an invalid key.
	off := idempotency.New(st, clk, idempotency.Config{Enabled: false}, nil)
	bad := req
	bad.Key = "not valid!"
	for range 2 {
		if r, err := off.Do(ctx, bad, 201, effect(st, &n, 5)); err != nil || r.Replayed {
			t.Fatalf("disabled: %+v %v", r, err)
		}
	}
	if !idempotency.ValidKey("a-Z_9") || idempotency.ValidKey("") || idempotency.ValidKey(string(make([]byte, 129))) {
		t.Fatal("ValidKey")
	}
}

// TestRunSweepsExpiredRecords runs the sweep loop in a synctest bubble.
func TestRunSweepsExpiredRecords(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		st := open(t, dir)
		defer st.Close()
		clk := &clock{t: time.Now()}
		m := idempotency.New(st, clk, idempotency.Config{Enabled: true, TTL: time.Minute, SweepInterval: 5 * time.Minute}, nil)
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		if _, err := m.Do(ctx, idempotency.Request{Owner: "o", Key: "k", Method: "POST", Path: "/p"}, 201, effect(st, &n, 1)); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		clk.Advance(2 * time.Minute)
		time.Sleep(5*time.Minute + time.Second) // fake time inside the bubble
		synctest.Wait()
		if _, err := st.GetIdempotency(context.Background(), "o", "POST /p k"); !bay.IsNotFound(err) {
			t.Fatalf("record not swept: %v", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
