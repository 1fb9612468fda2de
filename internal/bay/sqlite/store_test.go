package sqlite

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/storetest"
)

func openFile(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), Options{Path: path, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func TestConformanceFile(t *testing.T) {
	storetest.Run(t, func(t *testing.T) bay.Store {
		return openFile(t, filepath.Join(t.TempDir(), "bay.db"))
	})
}

// TestConformanceShared runs the concurrency cases on two Stores opened on one file, as two
// bays sharing it would.
func TestConformanceShared(t *testing.T) {
	storetest.RunShared(t, func(t *testing.T) (bay.Store, bay.Store) {
		path := filepath.Join(t.TempDir(), "bay.db")
		return openFile(t, path), openFile(t, path)
	})
}

func TestConformanceMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) bay.Store { return openFile(t, MemoryPath) })
}

func TestPragmas(t *testing.T) {
	s := openFile(t, filepath.Join(t.TempDir(), "bay.db"))
	ctx := t.Context()
	for _, db := range []struct {
		name string
		q    querier
	}{{"write", s.wdb}, {"read", s.rdb}} {
		var journal string
		var fk, sync, busy int
		if err := db.q.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal); err != nil {
			t.Fatal(err)
		}
		_ = db.q.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk)
		_ = db.q.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync)
		_ = db.q.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy)
		if journal != "wal" || fk != 1 || sync != 1 || busy != 5000 {
			t.Fatalf("%s pool: journal_mode=%s foreign_keys=%d synchronous=%d busy_timeout=%d", db.name, journal, fk, sync, busy)
		}
	}
	// The read pool refuses writes.
	if _, err := s.rdb.ExecContext(ctx, `DELETE FROM leases`); err == nil {
		t.Fatal("read pool accepted a write")
	}
}

func TestReopenKeepsDataAndMigrationsAreNoOp(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "bay.db")
	s, err := Open(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	sb := &bay.Sandbox{ID: "sandbox-keep", Owner: "alice", ProfileID: "p", CreatedAt: time.Unix(1, 0), LastActiveAt: time.Unix(2, 0)}
	if err := s.Tx(ctx, func(tx bay.Tx) error { return tx.InsertSandbox(ctx, sb) }); err != nil {
		t.Fatal(err)
	}
	before := migrationRows(t, s)
	if len(before) == 0 {
		t.Fatal("no migration recorded")
	}
	// Re-applying on the open store is a no-op too.
	if err := s.migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := migrationRows(t, s); !equalMaps(got, before) {
		t.Fatalf("re-applying migrations changed schema_migrations: %v -> %v", before, got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := openFile(t, path)
	got, err := s2.GetSandbox(ctx, "sandbox-keep")
	if err != nil || got.Owner != "alice" {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
	if after := migrationRows(t, s2); !equalMaps(after, before) {
		t.Fatalf("reopen changed schema_migrations: %v -> %v", before, after)
	}
}

func migrationRows(t *testing.T, s *Store) map[int]int64 {
	t.Helper()
	rows, err := s.rdb.QueryContext(t.Context(), `SELECT version, applied_at FROM schema_migrations`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[int]int64{}
	for rows.Next() {
		var v int
		var at int64
		if err := rows.Scan(&v, &at); err != nil {
			t.Fatal(err)
		}
		m[v] = at
	}
	return m
}

func equalMaps(a, b map[int]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestMigrationPolicy(t *testing.T) {
	ctx := t.Context()
	s := openFile(t, filepath.Join(t.TempDir(), "bay.db"))
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		t.Fatal(err)
	}

	// A new migration file is applied once, in its own transaction.
	next := ms[len(ms)-1].Version + 1 // versions may have gaps while branches land
	extra := fstest.MapFS{}
	for _, m := range ms {
		extra["migrations/"+m.Name] = &fstest.MapFile{Data: []byte(m.SQL)}
	}
	extra["migrations/"+pad(next)+"_extra.sql"] = &fstest.MapFile{Data: []byte(`CREATE TABLE extra (x INTEGER);`)}
	ms2, err := loadMigrations(extra)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.applyMigrations(ctx, ms2); err != nil {
		t.Fatal(err)
	}
	if err := s.applyMigrations(ctx, ms2); err != nil {
		t.Fatalf("second apply: %v", err)
	}

	// The binary no longer knows the applied migration: refused.
	if err := s.applyMigrations(ctx, ms); err == nil {
		t.Fatal("a database with an unknown migration was accepted")
	}
	// An applied migration was edited: refused.
	extra["migrations/"+pad(next)+"_extra.sql"] = &fstest.MapFile{Data: []byte(`CREATE TABLE extra (x INTEGER, y TEXT);`)}
	ms3, _ := loadMigrations(extra)
	if err := s.applyMigrations(ctx, ms3); err == nil {
		t.Fatal("an edited migration was accepted")
	}

	// A failing migration leaves nothing behind.
	bad := fstest.MapFS{}
	for k, v := range extra {
		bad[k] = v
	}
	bad["migrations/"+pad(next)+"_extra.sql"] = &fstest.MapFile{Data: []byte(`CREATE TABLE extra (x INTEGER);`)}
	bad["migrations/"+pad(next+1)+"_bad.sql"] = &fstest.MapFile{Data: []byte(`CREATE TABLE half (x INTEGER); THIS IS NOT SQL;`)}
	ms4, _ := loadMigrations(bad)
	if err := s.applyMigrations(ctx, ms4); err == nil {
		t.Fatal("a broken migration was accepted")
	}
	var n int
	if err := s.wdb.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'half'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("broken migration left table half behind (%d, %v)", n, err)
	}

	// Malformed names are refused.
	if _, err := loadMigrations(fstest.MapFS{"migrations/init.sql": {}}); err == nil {
		t.Fatal("a migration without a number was accepted")
	}
	if _, err := loadMigrations(fstest.MapFS{"migrations/0001_a.sql": {}, "migrations/1_b.sql": {}}); err == nil {
		t.Fatal("two migrations with one version were accepted")
	}
}

func pad(v int) string {
	s := "000" + string(rune('0'+v%10))
	if v >= 10 {
		s = "00" + string(rune('0'+v/10)) + string(rune('0'+v%10))
	}
	return s
}

func TestStoreReadsSeeCommittedStateOnly(t *testing.T) {
	ctx := t.Context()
	s := openFile(t, filepath.Join(t.TempDir(), "bay.db"))
	err := s.Tx(ctx, func(tx bay.Tx) error {
		if err := tx.InsertSandbox(ctx, &bay.Sandbox{ID: "sandbox-x", Owner: "a", ProfileID: "p"}); err != nil {
			return err
		}
		if _, err := s.GetSandbox(ctx, "sandbox-x"); !bay.IsNotFound(err) {
			t.Errorf("store read saw an uncommitted write: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSandbox(ctx, "sandbox-x"); err != nil {
		t.Fatalf("after commit: %v", err)
	}
}

func TestNestedTxBlocksUntilContextDone(t *testing.T) {
	ctx := t.Context()
	s := openFile(t, filepath.Join(t.TempDir(), "bay.db"))
	err := s.Tx(ctx, func(tx bay.Tx) error {
		inner, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return s.Tx(inner, func(bay.Tx) error { return nil })
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("nested Tx: %v, want the inner context's deadline", err)
	}
}

func TestTwoStoresShareOneFile(t *testing.T) {
	// Two bays (here two Stores) on one file: writes are serialised by SQLite's lock.
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "bay.db")
	a, b := openFile(t, path), openFile(t, path)
	ok1, ok2 := false, false
	if err := a.Tx(ctx, func(tx bay.Tx) (err error) {
		ok1, err = tx.AcquireLease(ctx, "gc", "A", time.Unix(0, 0), time.Minute)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Tx(ctx, func(tx bay.Tx) (err error) {
		ok2, err = tx.AcquireLease(ctx, "gc", "B", time.Unix(1, 0), time.Minute)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !ok1 || ok2 {
		t.Fatalf("lease across stores: A %t, B %t", ok1, ok2)
	}
}

func TestParseURL(t *testing.T) {
	good := map[string]string{
		"sqlite+aiosqlite:///./bay.db":     "./bay.db",
		"sqlite:///bay.db":                 "bay.db",
		"sqlite:///data/bay.db":            "data/bay.db",
		"sqlite:////var/lib/bay/bay.db":    "/var/lib/bay/bay.db",
		"sqlite+pysqlite:////abs/x.db":     "/abs/x.db",
		"sqlite:///:memory:":               MemoryPath,
		"sqlite+aiosqlite:///:memory:":     MemoryPath,
		"sqlite://":                        MemoryPath,
		":memory:":                         MemoryPath,
		"bay.db":                           "bay.db",
		"./bay.db":                         "./bay.db",
		"/abs/bay.db":                      "/abs/bay.db",
		"  sqlite:////abs/with space.db  ": "/abs/with space.db",
	}
	for in, want := range good {
		got, err := ParseURL(in)
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "postgresql://u@h/db", "mysql://x", "sqlite://host/bay.db", "sqlite:///bay.db?mode=ro",
		"sqlite:///", "file:bay.db", "SQLITE+aio://h/x"} {
		if got, err := ParseURL(in); err == nil {
			t.Errorf("ParseURL(%q) = %q, want an error", in, got)
		}
	}
}

func TestOpenURL(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenURL(t.Context(), "sqlite+aiosqlite:///"+dir+"/bay.db") // sqlite:////abs
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Path() != dir+"/bay.db" {
		t.Fatalf("path %q", s.Path())
	}
	if _, err := OpenURL(t.Context(), "postgres://x"); err == nil {
		t.Fatal("a postgres url was opened")
	}
	if _, err := Open(t.Context(), Options{Path: filepath.Join(dir, "missing-dir", "bay.db")}); err == nil {
		t.Fatal("a path in a missing directory was opened")
	}
}

var quiet = slog.New(slog.DiscardHandler)

func TestCheckpointOnReadPool(t *testing.T) {
	ctx := t.Context()
	s := openFile(t, filepath.Join(t.TempDir(), "bay.db"))
	for i := range 10 {
		sb := &bay.Sandbox{ID: bay.NewID(bay.PrefixSandbox), Owner: "a", ProfileID: "p", WarmAttempts: i}
		if err := s.Tx(ctx, func(tx bay.Tx) error { return tx.InsertSandbox(ctx, sb) }); err != nil {
			t.Fatal(err)
		}
	}
	wal, done, err := s.checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if wal == 0 || done != wal {
		t.Fatalf("checkpoint moved %d of %d WAL pages", done, wal)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
}
