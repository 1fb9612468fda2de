package metrics_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/metrics"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

// BenchmarkStoreRead is the cost the metrics decorator adds to a store read (a missing row
// on a real SQLite file): raw against decorated.
func BenchmarkStoreRead(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(b.TempDir(), "bay.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for _, c := range []struct {
		name  string
		store bay.Store
	}{{"raw", st}, {"decorated", metrics.New("bench", nil).Store(st)}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.store.GetSandbox(ctx, "sandbox-000000000000"); !bay.IsNotFound(err) {
					b.Fatal(err)
				}
			}
		})
	}
}
