package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/postgres"
	"github.com/shipyard-dev/shipyard/internal/bay/sqlite"
)

// openStore opens the store database.url names: SQLite for sqlite:// URLs and file paths,
// PostgreSQL for postgres:// and postgresql:// (a "+driver" suffix is accepted). Errors name a
// PostgreSQL server without its password.
func openStore(ctx context.Context, db config.DatabaseConfig, log *slog.Logger) (bay.Store, error) {
	dialect, err := db.Dialect()
	if err != nil {
		return nil, err
	}
	switch dialect {
	case config.DialectPostgres:
		dsn, _ := db.PostgresDSN()
		s, err := postgres.Open(ctx, postgres.Options{URL: dsn, MaxConns: db.PoolSize,
			ConnectTimeout: db.ConnectTimeout, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open database: %w", err)
		}
		return s, nil
	case config.DialectSQLite:
		path, err := sqlite.ParseURL(db.URL)
		if err != nil {
			return nil, fmt.Errorf("database.url: %w", err)
		}
		s, err := sqlite.Open(ctx, sqlite.Options{Path: path, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open database: %w", err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("database.url: dialect %s is not supported by this build", dialect)
}
