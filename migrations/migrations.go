// Package migrations holds the numbered SQL migrations of the paykit schema, embedded in
// the binary, and applies them with goose. The same files are applied by tests, the dev
// command and docker-compose, and they run unchanged on MySQL 8 and MariaDB 10.11.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// FS holds the migration files (0001_….sql, …) in goose format. An applied migration is
// never edited; a change is a new file.
//
//go:embed *.sql
var FS embed.FS

// Up applies every pending migration to db. Concurrent callers (an API server and a
// worker starting together) are serialised by goose's MySQL table lock, so each
// migration runs exactly once.
func Up(ctx context.Context, db *sql.DB) error {
	p, err := newProvider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
}

// Version returns the version of the last migration applied to db.
func Version(ctx context.Context, db *sql.DB) (int64, error) {
	p, err := newProvider(db)
	if err != nil {
		return 0, err
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations: version: %w", err)
	}
	return v, nil
}

func newProvider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewMySQLTableLocker(
		lock.WithTableLockTimeout(time.Second, 120),
	)
	if err != nil {
		return nil, fmt.Errorf("migrations: locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectMySQL, db, FS,
		goose.WithLocker(locker),
		goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()),
	)
	if err != nil {
		return nil, fmt.Errorf("migrations: provider: %w", err)
	}
	return p, nil
}
