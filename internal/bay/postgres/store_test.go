package postgres

import (
	"log/slog"
	"os"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/storetest"
	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var quiet = slog.New(slog.DiscardHandler)

// openTest opens a Store on a fresh database of the test cluster, closed at the end of t.
func openTest(t testing.TB, o Options) *Store {
	t.Helper()
	if o.URL == "" {
		o.URL = pgtest.NewDatabase(t)
	}
	if o.Logger == nil {
		o.Logger = quiet
	}
	s, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) bay.Store { return openTest(t, Options{}) })
}

// TestConformanceShared runs the concurrency cases on two Stores (two pools) opened on one
// database, as two bays sharing it would.
func TestConformanceShared(t *testing.T) {
	storetest.RunShared(t, func(t *testing.T) (bay.Store, bay.Store) {
		url := pgtest.NewDatabase(t)
		return openTest(t, Options{URL: url}), openTest(t, Options{URL: url})
	})
}
