package postgres

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one embedded migrations/NNNN_name.sql file.
type migration struct {
	version  int
	name     string
	sql      string
	checksum string // sha256 hex of the file
}

// loadMigrations reads the migrations of fsys in version order. Versions must be unique.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", e.Name())
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, e.Name(), v)
		}
		seen[v] = e.Name()
		b, err := fs.ReadFile(fsys, "migrations/"+e.Name())
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b), checksum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrateLockKey is the advisory lock under which one bay at a time migrates a database.
const migrateLockKey int64 = 0x6261792d6d696772 // "bay-migr"

// migrate applies the pending migrations of ms on one connection of pool, holding the
// migration lock, each in its own transaction with its schema_migrations row.
func migrate(ctx context.Context, pool *pgxpool.Pool, ms []migration, applied func(migration)) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return fmt.Errorf("migrate: take the migration lock: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, migrateLockKey); err != nil {
			conn.Conn().Close(uctx) // a session lock dies with its connection
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer     NOT NULL PRIMARY KEY,
		name       text        NOT NULL,
		checksum   text        NOT NULL,
		applied_at timestamptz NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	rows, err := conn.Query(ctx, `SELECT version, checksum FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	done := map[int]string{}
	var v int
	var sum string
	_, err = pgx.ForEachRow(rows, []any{&v, &sum}, func() error { done[v] = sum; return nil })
	if err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	known := make(map[int]migration, len(ms))
	for _, m := range ms {
		known[m.version] = m
	}
	for v, sum := range done {
		m, ok := known[v]
		if !ok {
			return fmt.Errorf("database has migration %d, unknown to this binary (written by a newer bay?)", v)
		}
		if m.checksum != sum {
			return fmt.Errorf("migration %s was edited after it was applied (checksum differs): add a new migration instead", m.name)
		}
	}
	for _, m := range ms {
		if _, ok := done[m.version]; ok {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)`,
				m.version, m.name, m.checksum, time.Now().UTC())
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		applied(m)
	}
	return nil
}
