// Package sqlite is the SQLite implementation of bay.Store, on the pure-Go driver
// modernc.org/sqlite. It passes internal/bay/storetest.
//
// # Connections
//
// A file database is opened in WAL mode with synchronous=NORMAL, foreign_keys=ON and a busy
// timeout. Writes are serialised on one dedicated connection: Store.Tx begins with
// BEGIN IMMEDIATE on a pool of size one, so a read-check-write inside a Tx is atomic, also
// against other processes sharing the file (they wait up to the busy timeout). Reader methods
// called on the Store use a separate pool of read-only connections (query_only=ON) and see the
// last committed state; Reader methods called on a bay.Tx see the transaction's own writes.
//
// ":memory:" opens a private in-memory database (the memdb VFS, shared by this Store's
// connections only); it is meant for tests and throw-away runs.
//
// # Values
//
// Timestamps are stored as INTEGER microseconds since the Unix epoch and read back in UTC:
// a time round-trips exactly at microsecond precision (finer digits are truncated).
// Optional strings that queries test for (current_session_id, cargo_id,
// managed_by_sandbox_id, session_id) are stored as NULL when empty.
//
// # Errors
//
// Missing rows wrap bay.ErrNotFound; unique-key violations on insert and version mismatches
// wrap bay.ErrConflict; a foreign-key violation (a session of an unknown sandbox) wraps
// bay.ErrNotFound. Everything else is unclassified (internal).
//
// # Migration policy
//
// The schema lives in migrations/NNNN_name.sql, embedded in the binary and applied at Open in
// version order, each in its own write transaction together with its row in
// schema_migrations (version, name, sha256 checksum, applied_at). Re-opening applies nothing
// that is already recorded. Rules:
//
//   - Never edit (or rename, or renumber) a migration that has been released: Open refuses a
//     database whose recorded checksum differs from the embedded file. Add a new file with the
//     next number instead.
//   - A migration must be valid inside a transaction (no VACUUM, no PRAGMA journal_mode).
//   - Open refuses a database carrying a migration this binary does not know (a newer bay
//     wrote it); downgrades are not supported.
//   - The PostgreSQL store keeps its own migrations with the same numbering and meaning.
package sqlite
