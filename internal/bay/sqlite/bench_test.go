package sqlite

import (
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// createSandbox is the write of a lazy sandbox create: a managed cargo, its sandbox and the
// idempotency record, in one Tx.
func createSandbox(b *testing.B, s *Store, now time.Time) {
	ctx := b.Context()
	sbID, cargoID := bay.NewID(bay.PrefixSandbox), bay.NewID(bay.PrefixCargo)
	err := s.Tx(ctx, func(tx bay.Tx) error {
		if err := tx.InsertCargo(ctx, &bay.Cargo{ID: cargoID, Owner: "alice", Backend: bay.BackendDockerVolume,
			DriverRef: bay.VolumeName(cargoID), Managed: true, ManagedBySandboxID: sbID, SizeLimitMB: 1024,
			CreatedAt: now, LastAccessedAt: now}); err != nil {
			return err
		}
		exp := now.Add(time.Hour)
		if err := tx.InsertSandbox(ctx, &bay.Sandbox{ID: sbID, Owner: "alice", ProfileID: "python-default",
			CargoID: cargoID, ExpiresAt: &exp, CreatedAt: now, LastActiveAt: now}); err != nil {
			return err
		}
		return tx.PutIdempotency(ctx, &bay.IdempotencyRecord{Owner: "alice", Key: sbID, Fingerprint: "0123456789abcdef",
			StatusCode: 201, Response: []byte(`{"id":"` + sbID + `","status":"idle"}`), CreatedAt: now, ExpiresAt: exp})
	})
	if err != nil {
		b.Fatal(err)
	}
}

func benchStore(b *testing.B) *Store {
	s, err := Open(b.Context(), Options{Path: filepath.Join(b.TempDir(), "bay.db"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkCreateSandbox measures one lazy-create transaction at a time (a real file, WAL).
func BenchmarkCreateSandbox(b *testing.B) {
	s := benchStore(b)
	now := time.Now().UTC()
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		createSandbox(b, s, now)
		lat = append(lat, time.Since(t0))
	}
	reportLatency(b, lat)
}

// BenchmarkCreateSandboxParallel runs the same transaction from GOMAXPROCS goroutines (they
// queue on the one write connection); p50/p99 include the wait.
func BenchmarkCreateSandboxParallel(b *testing.B) {
	s := benchStore(b)
	now := time.Now().UTC()
	var mu sync.Mutex
	var lat []time.Duration
	b.RunParallel(func(pb *testing.PB) {
		var local []time.Duration
		for pb.Next() {
			t0 := time.Now()
			createSandbox(b, s, now)
			local = append(local, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	})
	reportLatency(b, lat)
}

// BenchmarkGetSandbox measures a point read on the read pool while the table holds rows.
func BenchmarkGetSandbox(b *testing.B) {
	s := benchStore(b)
	now := time.Now().UTC()
	ctx := b.Context()
	sb := &bay.Sandbox{ID: "sandbox-bench", Owner: "alice", ProfileID: "p", CreatedAt: now, LastActiveAt: now}
	if err := s.Tx(ctx, func(tx bay.Tx) error { return tx.InsertSandbox(ctx, sb) }); err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.GetSandbox(ctx, "sandbox-bench"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
