package postgres

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

// BenchmarkStore measures the store's hot paths on SQLite (a WAL file in a temporary
// directory) and PostgreSQL (the test cluster over its Unix socket, fsync off) in one run:
//
//	go test -run '^$' -bench Store -benchtime 2s ./internal/bay/postgres
//
// GetSandbox is a point read outside a transaction; UpdateSandbox a Tx that reads a sandbox and
// writes it back with its version; InsertExecution a Tx with one history row; CreateSandbox the
// lazy create's Tx (cargo, sandbox, idempotency record). The Parallel variants run GOMAXPROCS
// goroutines (updates on distinct sandboxes).
func BenchmarkStore(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) bay.Store
	}{
		{"sqlite", func(b *testing.B) bay.Store {
			s, err := sqlite.Open(b.Context(), sqlite.Options{Path: filepath.Join(b.TempDir(), "bay.db"), Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
		{"postgres", func(b *testing.B) bay.Store { return openTest(b, Options{}) }},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			b.Run("GetSandbox", func(b *testing.B) { benchGet(b, st.open(b), false) })
			b.Run("GetSandboxParallel", func(b *testing.B) { benchGet(b, st.open(b), true) })
			b.Run("UpdateSandbox", func(b *testing.B) { benchUpdate(b, st.open(b), false) })
			b.Run("UpdateSandboxParallel", func(b *testing.B) { benchUpdate(b, st.open(b), true) })
			b.Run("InsertExecution", func(b *testing.B) { benchInsertExecution(b, st.open(b)) })
			b.Run("CreateSandbox", func(b *testing.B) { benchCreate(b, st.open(b)) })
		})
	}
}

func benchSandbox(id string) *bay.Sandbox {
	now := time.Now().UTC()
	exp := now.Add(time.Hour)
	return &bay.Sandbox{ID: id, Owner: "alice", ProfileID: "python-default", CargoID: "ws-" + id,
		ExpiresAt: &exp, IdleExpiresAt: &exp, CreatedAt: now, LastActiveAt: now}
}

func seed(b *testing.B, s bay.Store, n int) []string {
	ctx := b.Context()
	ids := make([]string, n)
	if err := s.Tx(ctx, func(tx bay.Tx) error {
		for i := range ids {
			ids[i] = fmt.Sprintf("sandbox-%06d", i)
			if err := tx.InsertSandbox(ctx, benchSandbox(ids[i])); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return ids
}

// latencies collects per-operation times from several goroutines and reports p50/p99.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(d []time.Duration) { l.mu.Lock(); l.all = append(l.all, d...); l.mu.Unlock() }

func (l *latencies) report(b *testing.B) {
	if len(l.all) == 0 {
		return
	}
	slices.Sort(l.all)
	b.ReportMetric(float64(l.all[len(l.all)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(l.all[len(l.all)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// run times op b.N times, in parallel or not; op gets a per-goroutine index.
func run(b *testing.B, parallel bool, op func(g int) error) {
	var lat latencies
	b.ResetTimer()
	if !parallel {
		local := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t0 := time.Now()
			if err := op(0); err != nil {
				b.Fatal(err)
			}
			local = append(local, time.Since(t0))
		}
		lat.add(local)
	} else {
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			g := int(next.Add(1) - 1)
			var local []time.Duration
			for pb.Next() {
				t0 := time.Now()
				if err := op(g); err != nil {
					b.Error(err)
					return
				}
				local = append(local, time.Since(t0))
			}
			lat.add(local)
		})
	}
	lat.report(b)
}

func benchGet(b *testing.B, s bay.Store, parallel bool) {
	ids := seed(b, s, 1000)
	var i atomic.Int64
	run(b, parallel, func(int) error {
		_, err := s.GetSandbox(b.Context(), ids[int(i.Add(1))%len(ids)])
		return err
	})
}

func benchUpdate(b *testing.B, s bay.Store, parallel bool) {
	ids := seed(b, s, 1000)
	ctx := b.Context()
	run(b, parallel, func(g int) error {
		return s.Tx(ctx, func(tx bay.Tx) error {
			sb, err := tx.GetSandbox(ctx, ids[g%len(ids)])
			if err != nil {
				return err
			}
			sb.LastActiveAt = time.Now().UTC()
			return tx.UpdateSandbox(ctx, sb)
		})
	})
}

func benchInsertExecution(b *testing.B, s bay.Store) {
	ctx := b.Context()
	out := "hello\n"
	var n atomic.Int64
	run(b, false, func(int) error {
		e := &bay.Execution{ID: fmt.Sprintf("exec-%09d", n.Add(1)), Owner: "alice", SandboxID: "sandbox-1",
			SessionID: "sess-1", ExecType: "python", Code: "print('hello')", Success: true, ExecutionTimeMS: 3,
			Output: &out, CreatedAt: time.Now().UTC()}
		return s.Tx(ctx, func(tx bay.Tx) error { return tx.InsertExecution(ctx, e) })
	})
}

func benchCreate(b *testing.B, s bay.Store) {
	ctx := b.Context()
	run(b, false, func(int) error {
		now := time.Now().UTC()
		sbID, cargoID := bay.NewID(bay.PrefixSandbox), bay.NewID(bay.PrefixCargo)
		return s.Tx(ctx, func(tx bay.Tx) error {
			if err := tx.InsertCargo(ctx, &bay.Cargo{ID: cargoID, Owner: "alice", Backend: bay.BackendDockerVolume,
				DriverRef: bay.VolumeName(cargoID), Managed: true, ManagedBySandboxID: sbID, SizeLimitMB: 1024,
				CreatedAt: now, LastAccessedAt: now}); err != nil {
				return err
			}
			sb := benchSandbox(sbID)
			sb.CargoID = cargoID
			if err := tx.InsertSandbox(ctx, sb); err != nil {
				return err
			}
			return tx.PutIdempotency(ctx, &bay.IdempotencyRecord{Owner: "alice", Key: sbID, Fingerprint: "0123456789abcdef",
				StatusCode: 201, Response: []byte(`{"id":"` + sbID + `","status":"idle"}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
		})
	})
}
