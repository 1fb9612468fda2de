// Package postgres is the PostgreSQL implementation of bay.Store, on github.com/jackc/pgx/v5
// (its native pool, pgxpool, rather than the database/sql adapter: pgxpool bounds the
// connections itself, caches each statement's preparation per connection, speaks the binary
// protocol for timestamps, booleans and bytea, and reports server errors with their SQLSTATE;
// database/sql would add a second pool in front of it and convert values through text). It
// passes internal/bay/storetest against a real server.
//
// # What the server needs
//
// PostgreSQL 13 or newer (DROP DATABASE ... WITH (FORCE) in the tests, and the planner's
// handling of FOR UPDATE SKIP LOCKED); an existing database, UTF8-encoded; a role that can
// connect to it and create tables in its schema (the first Open creates them: CONNECT on the
// database, CREATE and USAGE on the schema, usually "public", or owning the database). The
// history tag filter folds case with Unicode rules: Open checks that the database's LC_CTYPE does
// (C.UTF-8, en_US.UTF-8, ...) and otherwise uses the ICU collation "und-x-icu"; a database that
// offers neither is refused.
//
// # Transactions
//
// Store.Tx runs in READ COMMITTED and first takes a transaction-scoped advisory lock
// (pg_advisory_xact_lock) on one key shared by every bay using the database: write
// transactions are serialised, within this process and across every bay on the database, as
// SQLite's BEGIN IMMEDIATE serialises them on one file. Because the lock is taken before the
// transaction's first read, each statement's snapshot includes every transaction committed
// before it, so a read-check-write inside fn is atomic (version checks, idempotency records,
// leases, warm claims and quota counts alike), and fn runs exactly once: nothing is retried.
// SERIALIZABLE with a retry on 40001/40P01 was not chosen because a retry runs fn again, and
// bay's transaction functions have effects outside the database (they record what they claimed,
// build responses). Row locks alone (SELECT ... FOR UPDATE) were not chosen because they do not
// cover the read-check-insert patterns (a count then an insert). The price is one writer at a
// time, the same as the SQLite store; reads outside a Tx are not serialised and use any pooled
// connection. Within one Store, a Tx waits for its turn before it takes a pooled connection,
// so writers queued behind the lock hold at most one connection and never starve reads (nor
// the reads a Tx's fn makes through the Store).
//
// The warm claim still picks its row with FOR UPDATE SKIP LOCKED, and inserts use
// ON CONFLICT DO NOTHING, so that neither depends on the lock for correctness and a failed
// insert leaves the transaction usable (PostgreSQL aborts a transaction on any error; the SQLite
// store's transactions survive a failed statement, and callers may rely on that).
//
// # Values
//
// Timestamps are timestamptz, written truncated to the microsecond and read back in UTC.
// Optional strings that queries test for (current_session_id, cargo_id, managed_by_sandbox_id,
// session_id) are NULL when empty. Identifier columns use COLLATE "C" so that ordering and
// cursor paging compare bytes, as SQLite does. An execution's code, output and error are bytea
// (arbitrary bytes, NUL included); a NUL byte in another string is refused by PostgreSQL and
// reported as an internal error.
//
// # Errors
//
// Missing rows wrap bay.ErrNotFound; duplicate keys on insert and version mismatches wrap
// bay.ErrConflict; a session of an unknown sandbox wraps bay.ErrNotFound. Everything else is
// unclassified (internal). Errors and logs name the server and database, never the password.
//
// # Migration policy
//
// The same as the SQLite store's, with the same numbering and meaning: migrations/NNNN_name.sql,
// embedded, applied at Open in version order, each in its own transaction with its row in
// schema_migrations (version, name, sha256 checksum, applied_at). Several bays opening one
// database at once apply them one at a time under a session-level advisory lock. Open refuses a
// database whose recorded checksum differs from the embedded file, or that carries a migration
// this binary does not know.
package postgres
