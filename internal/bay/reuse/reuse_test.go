package reuse_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/postgres"
	"github.com/shipyard-dev/shipyard/internal/bay/reuse"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var quiet = slog.New(slog.DiscardHandler)

// TestLockAcrossHandles: a key's lock, taken through one store handle, keeps a call on another
// handle of the same database (another bay) waiting until it is released, or until the lock
// timeout; other keys and owners are free; a lock whose call died lapses after its TTL. On
// SQLite and on PostgreSQL.
func TestLockAcrossHandles(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) func() (bay.Store, error){
		"sqlite": func(t *testing.T) func() (bay.Store, error) {
			path := filepath.Join(t.TempDir(), "bay.db")
			return func() (bay.Store, error) { return sqlite.Open(t.Context(), sqlite.Options{Path: path, Logger: quiet}) }
		},
		"postgres": func(t *testing.T) func() (bay.Store, error) {
			url := pgtest.NewDatabase(t)
			return func() (bay.Store, error) {
				return postgres.Open(t.Context(), postgres.Options{URL: url, Logger: quiet})
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			var st [2]bay.Store
			handle := open(t)
			for i := range st {
				h, err := handle()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { h.Close() })
				st[i] = h
			}
			ctx := t.Context()
			unlock, err := reuse.Lock(ctx, st[0], "alice", "proj:agent.1", time.Now, time.Second, quiet)
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			if _, err := reuse.Lock(ctx, st[1], "alice", "proj:agent.1", time.Now, 300*time.Millisecond, quiet); bay.ErrorCode(err) != bay.CodeConflict {
				t.Fatalf("a locked key: %v", err)
			}
			if d := time.Since(began); d < 250*time.Millisecond {
				t.Fatalf("gave up after %v, before the lock timeout", d)
			}
			for _, other := range [][2]string{{"alice", "proj:agent.2"}, {"bob", "proj:agent.1"}, {"alice/x", "y"}} {
				u, err := reuse.Lock(ctx, st[1], other[0], other[1], time.Now, 100*time.Millisecond, quiet)
				if err != nil {
					t.Fatalf("%v held up: %v", other, err)
				}
				u()
			}
			go func() {
				time.Sleep(200 * time.Millisecond)
				unlock()
			}()
			u, err := reuse.Lock(ctx, st[1], "alice", "proj:agent.1", time.Now, 5*time.Second, quiet)
			if err != nil {
				t.Fatalf("after the release: %v", err)
			}
			// Its call dies holding it: past the lock's TTL another call takes it.
			later := func() time.Time { return time.Now().Add(31 * time.Second) }
			if _, err := reuse.Lock(ctx, st[0], "alice", "proj:agent.1", later, 100*time.Millisecond, quiet); err != nil {
				t.Fatalf("a lapsed lock: %v", err)
			}
			u()
		})
	}
}
