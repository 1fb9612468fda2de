package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Options configure Open.
type Options struct {
	// Path is the database file (created if missing, its directory must exist) or MemoryPath.
	Path string
	// BusyTimeout bounds how long a statement waits for a lock held by another process
	// sharing the file. Default 5s.
	BusyTimeout time.Duration
	// ReadConns is the size of the read pool. Default max(4, GOMAXPROCS).
	ReadConns int
	// Logger receives migration notices. Default slog.Default().
	Logger *slog.Logger
}

// Store is the SQLite bay.Store. It is safe for concurrent use.
type Store struct {
	queries // reads on the read pool

	path string
	wdb  *sql.DB // one connection, every Tx (BEGIN IMMEDIATE)
	rdb  *sql.DB // read-only pool
	log  *slog.Logger
}

var (
	_ bay.Store  = (*Store)(nil)
	_ bay.Tx     = (*txn)(nil)
	_ bay.Reader = queries{}
)

// OpenURL opens the database named by a URL accepted by ParseURL, with default options.
func OpenURL(ctx context.Context, rawURL string) (*Store, error) {
	p, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return Open(ctx, Options{Path: p})
}

// Open opens (creating if needed) the database at o.Path, configures its connections and
// applies pending migrations. The caller must Close the Store.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Path == "" {
		return nil, errors.New("open sqlite: empty path")
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.ReadConns <= 0 {
		o.ReadConns = max(4, runtime.GOMAXPROCS(0))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	log := o.Logger.With("component", "sqlite")

	var base string
	journal := "WAL"
	if o.Path == MemoryPath {
		// memdb: one in-memory database shared by this Store's connections, by a unique name.
		var b [8]byte
		_, _ = rand.Read(b[:])
		base = "file:/bay-mem-" + hex.EncodeToString(b[:]) + "?vfs=memdb&"
		journal = "MEMORY"
	} else {
		abs, err := filepath.Abs(o.Path)
		if err != nil {
			return nil, fmt.Errorf("open sqlite %s: %w", o.Path, err)
		}
		base = "file:" + (&url.URL{Path: abs}).EscapedPath() + "?"
	}
	params := "_pragma=busy_timeout(" + strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10) + ")" +
		"&_pragma=foreign_keys(1)" +
		"&_pragma=journal_mode(" + journal + ")" +
		"&_pragma=synchronous(NORMAL)"

	wdb, err := sql.Open("sqlite", base+params+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", o.Path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	// The write connection comes first: it creates the file and switches it to WAL before
	// any reader opens it (a query_only reader cannot change the journal mode).
	if err := wdb.PingContext(ctx); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", o.Path, err)
	}

	rdb, err := sql.Open("sqlite", base+params+"&_pragma=query_only(1)")
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", o.Path, err)
	}
	rdb.SetMaxOpenConns(o.ReadConns)
	rdb.SetMaxIdleConns(o.ReadConns)
	rdb.SetConnMaxLifetime(0)
	rdb.SetConnMaxIdleTime(0)

	s := &Store{queries: queries{q: rdb, db: rdb}, path: o.Path, wdb: wdb, rdb: rdb, log: log}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", o.Path, err)
	}
	return s, nil
}

// Path returns the database path the Store was opened with.
func (s *Store) Path() string { return s.path }

// Close closes both pools. In-flight transactions fail.
func (s *Store) Close() error {
	return errors.Join(s.rdb.Close(), s.wdb.Close())
}

// Tx runs fn in one write transaction (BEGIN IMMEDIATE on the single write connection):
// committed when fn returns nil; rolled back when fn returns an error (returned unchanged, so
// errors.Is/As work) or panics (the panic is re-raised after the rollback). Transactions are
// serialised, in this process by the one write connection and across processes by SQLite's
// write lock. fn must use tx, not s, for reads that must see its writes; fn must NOT call
// s.Tx: the nested call waits for the write connection held by the outer one and blocks until
// its ctx is done. The tx must not be used after fn returns.
func (s *Store) Tx(ctx context.Context, fn func(tx bay.Tx) error) error {
	sqlTx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin write transaction: %w", err)
	}
	done := false
	defer func() {
		if !done { // fn failed or panicked
			_ = sqlTx.Rollback()
		}
	}()
	if err := fn(&txn{queries{q: sqlTx}}); err != nil {
		return err
	}
	done = true
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit write transaction: %w", err)
	}
	return nil
}

// txn is the bay.Tx of one Store.Tx call.
type txn struct{ queries }
