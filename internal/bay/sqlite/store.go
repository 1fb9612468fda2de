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
	"sync"
	"sync/atomic"
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

	path   string
	wdb    *sql.DB // one connection, every Tx (BEGIN IMMEDIATE)
	rdb    *sql.DB // read-only pool
	wstmts map[string]*sql.Stmt
	rstmts map[string]*sql.Stmt
	log    *slog.Logger

	// Background WAL checkpoints (file databases only): every checkpointEvery commits, Tx
	// kicks the checkpointer goroutine, which runs a PASSIVE checkpoint (it never blocks the
	// writer). Close stops it.
	wal           bool
	commits       atomic.Int64
	kick          chan struct{}
	stop, stopped chan struct{}
	closeOnce     sync.Once
	closeErr      error
}

// checkpointEvery is the number of commits between background WAL checkpoints. A lazy create
// writes about ten pages, so the WAL stays around a few MB.
const checkpointEvery = 128

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

	// The write connection does not checkpoint on commit (that fsyncs the database file in the
	// middle of a request); the checkpointer goroutine does it in the background instead.
	wdb, err := sql.Open("sqlite", base+params+"&_txlock=immediate&_pragma=wal_autocheckpoint(0)")
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

	s := &Store{path: o.Path, wdb: wdb, rdb: rdb, log: log, wal: o.Path != MemoryPath}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", o.Path, err)
	}
	if s.wstmts, err = prepareAll(ctx, wdb, false); err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", o.Path, err)
	}
	if s.rstmts, err = prepareAll(ctx, rdb, true); err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", o.Path, err)
	}
	s.queries = queries{q: rdb, db: rdb, stmts: s.rstmts}
	if s.wal {
		s.kick, s.stop, s.stopped = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		go s.checkpointer()
	}
	return s, nil
}

// Path returns the database path the Store was opened with.
func (s *Store) Path() string { return s.path }

// Close stops the checkpointer and closes both pools; SQLite checkpoints the WAL when the last
// connection closes. In-flight transactions fail. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.stop != nil {
			close(s.stop)
			<-s.stopped
		}
		closeAll(s.wstmts)
		closeAll(s.rstmts)
		s.closeErr = errors.Join(s.rdb.Close(), s.wdb.Close())
	})
	return s.closeErr
}

func (s *Store) checkpointer() {
	defer close(s.stopped)
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
			if _, _, err := s.checkpoint(context.Background()); err != nil {
				s.log.Warn("wal checkpoint failed", "err", err)
			}
		}
	}
}

// checkpoint copies committed WAL frames into the database file without blocking the writer
// (PASSIVE). It runs on a read-pool connection: a checkpoint changes no data.
// It returns the WAL's size in pages and how many of them are now in the database file.
func (s *Store) checkpoint(ctx context.Context) (walPages, done int, err error) {
	var busy int
	if err := s.rdb.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &walPages, &done); err != nil {
		return 0, 0, fmt.Errorf("wal checkpoint: %w", err)
	}
	return walPages, done, nil
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
	if err := fn(&txn{queries{q: sqlTx, tx: sqlTx, stmts: s.wstmts}}); err != nil {
		return err
	}
	done = true
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit write transaction: %w", err)
	}
	if s.wal && s.commits.Add(1)%checkpointEvery == 0 {
		select {
		case s.kick <- struct{}{}:
		default: // one is pending already
		}
	}
	return nil
}

// txn is the bay.Tx of one Store.Tx call.
type txn struct{ queries }
