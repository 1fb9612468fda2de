package postgres

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
)

// TestFoldWithoutUnicodeLocale: on a database whose LC_CTYPE is "C" (lower() folds ASCII
// only), the tag filter still folds non-ASCII letters, through the ICU collation.
func TestFoldWithoutUnicodeLocale(t *testing.T) {
	c := pgtest.Shared(t)
	name := fmt.Sprintf("c_locale_%d", time.Now().UnixNano())
	if err := c.Exec(t.Context(), "CREATE DATABASE "+name+" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)") })
	s := openTest(t, Options{URL: c.URL(name)})
	if !strings.Contains(s.fold, "und-x-icu") {
		t.Fatalf("fold on a C-locale database = %q, want the ICU collation", s.fold)
	}
	ctx := t.Context()
	tags := "ÉTÉ,Ǆ"
	if err := s.Tx(ctx, func(tx bay.Tx) error {
		return tx.InsertExecution(ctx, &bay.Execution{ID: "exec-1", Owner: "alice", SandboxID: "sandbox-1",
			ExecType: "python", Tags: &tags, CreatedAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"été", "ǆ", "ÉtÉ"} {
		got, total, err := s.ListExecutions(ctx, bay.ExecutionQuery{Tags: []string{tag}})
		if err != nil || total != 1 || len(got) != 1 {
			t.Fatalf("tag %q: %d rows, total %d, %v", tag, len(got), total, err)
		}
	}
	// The test cluster's own databases (LC_CTYPE C.UTF-8) fold with plain lower().
	if s := openTest(t, Options{}); s.fold != "lower(%s)" {
		t.Fatalf("fold on a C.UTF-8 database = %q", s.fold)
	}
}

// TestPasswordNeverShown: neither a failed Open nor a successful one's logs show the password
// of the URL (in the user info or as a parameter).
func TestPasswordNeverShown(t *testing.T) {
	const secret = "s3cr3t-pa55"
	c := pgtest.Shared(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, raw := range []string{
		"postgresql://bay:" + secret + "@127.0.0.1:1/nodb?connect_timeout=2",
		"postgres:///nodb?host=/nonexistent&password=" + secret,
		"postgresql+asyncpg://bay:" + secret + "@[::1",
		"postgres:///nodb_missing?host=" + c.SocketDir() + "&port=" + fmt.Sprint(c.Port()) + "&user=bay&password=" + secret,
	} {
		_, err := Open(ctx, Options{URL: raw, Logger: log, ConnectTimeout: 2 * time.Second})
		if err == nil {
			t.Fatalf("Open(%s) succeeded", Redact(raw))
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error shows the password: %v", err)
		}
		t.Logf("refused: %v", err)
	}
	// Trust authentication ignores the password: the store opens, and logs without it.
	url := pgtest.NewDatabase(t)
	withPW := strings.Replace(url, "postgres:///", "postgres://bay:"+secret+"@/", 1)
	s := openTest(t, Options{URL: withPW, Logger: log})
	if _, err := s.GetSandbox(ctx, "sandbox-x"); !bay.IsNotFound(err) {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), secret) || !strings.Contains(logs.String(), "postgres store open") {
		t.Fatalf("logs:\n%s", logs.String())
	}
	if r := Redact("postgres://u:" + secret + "@h/db?password=" + secret); strings.Contains(r, secret) {
		t.Fatalf("Redact = %s", r)
	}
}

// TestMigrations: a reopen applies nothing; an edited or unknown migration is refused; bays
// opening one fresh database at once all succeed and apply each migration once.
func TestMigrations(t *testing.T) {
	ctx := t.Context()
	url := pgtest.NewDatabase(t)
	const opens = 4
	var wg sync.WaitGroup
	errs := make([]error, opens)
	for i := range opens {
		wg.Go(func() {
			s, err := Open(ctx, Options{URL: url, Logger: quiet})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("concurrent open: %v", err)
		}
	}
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != len(ms) {
		t.Fatalf("schema_migrations has %d rows (%v), want %d", n, err, len(ms))
	}

	s := openTest(t, Options{URL: url})
	edited := append([]migration(nil), ms...)
	edited[0].Checksum = "0000"
	err = migrate(ctx, s.pool, edited, func(migration) { t.Fatal("applied a migration on an edited history") })
	if err == nil || !strings.Contains(err.Error(), "edited") {
		t.Fatalf("edited migration: %v", err)
	}
	err = migrate(ctx, s.pool, ms[:len(ms)-1], func(migration) {})
	if err == nil || !strings.Contains(err.Error(), "unknown to this binary") {
		t.Fatalf("unknown migration: %v", err)
	}
	// A new migration is applied once, in its transaction: a failing one leaves nothing.
	bad := append(append([]migration(nil), ms...), migration{Version: 999, Name: "0999_bad.sql",
		SQL: "CREATE TABLE half (x int); SELECT no_such_function();", Checksum: "x"})
	if err := migrate(ctx, s.pool, bad, func(migration) {}); err == nil {
		t.Fatal("a failing migration was applied")
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'half'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("failed migration left table half: %d, %v", n, err)
	}
	// Names must be NNNN_name.sql and unique.
	for _, files := range []fstest.MapFS{
		{"migrations/init.sql": {Data: []byte("")}},
		{"migrations/0001_a.sql": {Data: []byte("")}, "migrations/0001_b.sql": {Data: []byte("")}},
	} {
		if _, err := loadMigrations(files); err == nil {
			t.Fatalf("loadMigrations accepted %v", files)
		}
	}
}

// TestPoolBounded: the pool never opens more than MaxConns connections, and too small a bound
// is refused.
func TestPoolBounded(t *testing.T) {
	s := openTest(t, Options{MaxConns: 3})
	ctx := t.Context()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if _, err := s.ListSandboxes(ctx, bay.SandboxQuery{}); err != nil {
				t.Error(err)
			}
			_ = s.Tx(ctx, func(tx bay.Tx) error { _, err := tx.CountSandboxes(ctx, bay.SandboxQuery{}); return err })
		})
	}
	wg.Wait()
	if st := s.Pool().Stat(); st.MaxConns() != 3 || st.TotalConns() > 3 {
		t.Fatalf("pool: max %d, total %d", st.MaxConns(), st.TotalConns())
	}
	for _, n := range []int{-1, 1, 10001} {
		if _, err := Open(ctx, Options{URL: pgtest.NewDatabase(t), MaxConns: n, Logger: quiet}); err == nil {
			t.Fatalf("MaxConns %d accepted", n)
		}
	}
	if _, err := Open(ctx, Options{URL: "sqlite:///bay.db", Logger: quiet}); err == nil {
		t.Fatal("a sqlite url was accepted")
	}
}

// TestReadsNotStarvedByWaitingWriters: with a pool of 2, while one Tx holds the write lock and
// others wait for it, a read outside any Tx (also from inside the holder's fn) still gets a
// connection at once.
func TestReadsNotStarvedByWaitingWriters(t *testing.T) {
	s := openTest(t, Options{MaxConns: 2})
	ctx := t.Context()
	holding, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		err := s.Tx(ctx, func(tx bay.Tx) error {
			close(holding)
			<-release
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			_, err := s.CountSandboxes(rctx, bay.SandboxQuery{}) // a read through the Store inside fn
			return err
		})
		if err != nil {
			t.Error(err)
		}
	})
	<-holding
	for range 4 {
		wg.Go(func() {
			if err := s.Tx(ctx, func(tx bay.Tx) error { return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // let the writers queue
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := s.ListSandboxes(rctx, bay.SandboxQuery{})
	close(release)
	if err != nil {
		t.Errorf("read while writers wait: %v", err)
	}
	wg.Wait()
}
