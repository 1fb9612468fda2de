package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Options configure Open.
type Options struct {
	// URL is the server and database: postgres://user:password@host:port/db?sslmode=... or
	// postgresql://... (a Unix socket: postgres:///db?host=/run/postgresql). A "+driver" suffix
	// on the scheme (postgresql+asyncpg://) is accepted and ignored.
	URL string
	// MaxConns bounds the pool (every connection is one server backend). Default 10; at least 2,
	// so that reads outside a Tx are not starved while one Tx holds a connection.
	MaxConns int
	// ConnectTimeout bounds the opening of one connection. Default 10s.
	ConnectTimeout time.Duration
	// Logger receives migration notices. Default slog.Default().
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultMaxConns       = 10
	DefaultConnectTimeout = 10 * time.Second
)

// Store is the PostgreSQL bay.Store. It is safe for concurrent use.
type Store struct {
	queries // reads on the pool

	pool  *pgxpool.Pool
	where string // the server and database, without credentials, for messages
	fold  string // the tag filter's case fold (see detectFold)
	// writer admits one Tx of this process at a time to the pool. The advisory lock serialises
	// them anyway; without this gate, Txs waiting for the lock would each hold a pooled
	// connection, and reads outside a Tx (fn's included) would wait behind them for one.
	writer    chan struct{}
	closeOnce sync.Once
}

var (
	_ bay.Store  = (*Store)(nil)
	_ bay.Tx     = (*txn)(nil)
	_ bay.Reader = queries{}
)

// txLockKey is the advisory lock every Store.Tx on a database holds until it ends.
const txLockKey int64 = 0x6261792d73746f72 // "bay-stor"

// IsURL reports whether raw names a PostgreSQL database (postgres://, postgresql://, and
// either with a "+driver" suffix).
func IsURL(raw string) bool {
	scheme, _, ok := strings.Cut(strings.TrimSpace(raw), "://")
	base, _, _ := strings.Cut(strings.ToLower(scheme), "+")
	return ok && (base == "postgres" || base == "postgresql")
}

// normaliseURL drops a "+driver" suffix of the scheme.
func normaliseURL(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if !IsURL(s) {
		return "", fmt.Errorf("database url %s: not a postgres:// or postgresql:// url", Redact(raw))
	}
	_, rest, _ := strings.Cut(s, "://")
	return "postgres://" + rest, nil
}

// Redact returns raw with any password (in the user info or a password= parameter) replaced,
// for logs and errors. A raw that does not parse as a URL is replaced whole.
func Redact(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "<unparsable database url>"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// Open connects to the database named by o.URL, checks the server, and applies pending
// migrations. The caller must Close the Store.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	log := o.Logger.With("component", "postgres")
	if o.MaxConns < 2 || o.MaxConns > 10000 {
		return nil, fmt.Errorf("open postgres: max connections %d: want 2..10000", o.MaxConns)
	}
	dsn, err := normaliseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors carry the URL with its password removed; ours names it redacted.
		return nil, fmt.Errorf("open postgres %s: %w", Redact(o.URL), err)
	}
	where := fmt.Sprintf("%s@%s:%d/%s", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	cfg.MaxConns = int32(o.MaxConns)
	cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		// Timestamps come back in UTC, as the SQLite store returns them.
		c.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres %s: %w", where, err)
	}
	s := &Store{pool: pool, where: where, writer: make(chan struct{}, 1)}
	if err := s.init(ctx, log); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres %s: %w", where, err)
	}
	log.InfoContext(ctx, "postgres store open", "database", where, "max_conns", o.MaxConns)
	return s, nil
}

func (s *Store) init(ctx context.Context, log *slog.Logger) error {
	var version int
	if err := s.pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return err
	}
	if version < 130000 {
		return fmt.Errorf("server version %d.%d is too old: PostgreSQL 13 or newer is required", version/10000, version%10000)
	}
	fold, err := detectFold(ctx, s.pool)
	if err != nil {
		return err
	}
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if err := migrate(ctx, s.pool, ms, func(m migration) {
		log.InfoContext(ctx, "applied migration", "version", m.Version, "name", m.Name)
	}); err != nil {
		return err
	}
	s.fold = fold
	s.queries = queries{q: s.pool, pool: s.pool, d: newDialect(fold)}
	return nil
}

// detectFold returns the function that folds case for the tag filter: lower() under the
// database's own LC_CTYPE when that folds non-ASCII letters, else lower() under the ICU root
// collation. The format's %s is the folded expression.
func detectFold(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	for _, fold := range []string{`lower(%s)`, `lower((%s) COLLATE "und-x-icu")`} {
		var ok bool
		err := pool.QueryRow(ctx, `SELECT `+fmt.Sprintf(fold, `'ÉTÉ Ǆ'::text`)+` = 'été ǆ'`).Scan(&ok)
		if err == nil && ok {
			return fold, nil
		}
	}
	var ctype, enc string
	_ = pool.QueryRow(ctx, `SELECT datctype, pg_encoding_to_char(encoding) FROM pg_database WHERE datname = current_database()`).
		Scan(&ctype, &enc)
	return "", fmt.Errorf("the database (encoding %s, LC_CTYPE %s) folds the case of ASCII letters only and the server "+
		"has no ICU collation: create it with ENCODING 'UTF8' and a Unicode LC_CTYPE such as 'C.UTF-8'", enc, ctype)
}

// Close closes the pool; in-flight transactions fail. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(s.pool.Close)
	return nil
}

// Pool returns the connection pool (tests and benchmarks inspect it).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Tx runs fn in one write transaction: committed when fn returns nil; rolled back when fn
// returns an error (returned unchanged, so errors.Is/As work) or panics (the panic is re-raised
// after the rollback). Transactions on one database are serialised by an advisory lock (see the
// package documentation). fn must use tx, not s, for reads that must see its writes; fn must
// NOT call s.Tx: the nested call waits for the lock held by the outer one until its ctx is done.
// The tx must not be used after fn returns.
func (s *Store) Tx(ctx context.Context, fn func(tx bay.Tx) error) error {
	select {
	case s.writer <- struct{}{}:
		defer func() { <-s.writer }()
	case <-ctx.Done():
		return fmt.Errorf("begin write transaction: %w", context.Cause(ctx))
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return fmt.Errorf("begin write transaction: %w", err)
	}
	done := false
	defer func() {
		if !done { // fn failed or panicked, or the lock or commit failed
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = tx.Rollback(rctx)
			cancel()
		}
	}()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, txLockKey); err != nil {
		return fmt.Errorf("begin write transaction: take the write lock: %w", err)
	}
	if err := fn(&txn{queries{q: tx, d: s.d}}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit write transaction: %w", err)
	}
	done = true
	return nil
}

// txn is the bay.Tx of one Store.Tx call.
type txn struct{ queries }
