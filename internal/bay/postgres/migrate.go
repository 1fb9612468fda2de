package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	migrationpkg "github.com/shipyard-dev/shipyard/internal/bay/migration"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one embedded migrations/NNNN_name.sql file.
type migration = migrationpkg.File

// loadMigrations reads the embedded migrations in version order.
func loadMigrations(fsys fs.FS) ([]migration, error) { return migrationpkg.Load(fsys) }

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
	if err := migrationpkg.Verify(ms, done); err != nil {
		return err
	}
	for _, m := range ms {
		if _, ok := done[m.Version]; ok {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)`,
				m.Version, m.Name, m.Checksum, time.Now().UTC())
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		applied(m)
	}
	return nil
}
