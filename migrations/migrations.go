// Package migrations holds the numbered SQL migrations of the paykit schema, embedded in
// the binary, and applies them with goose. The same files are applied by tests, the dev
// command and docker-compose, and they run unchanged on MySQL 8 and MariaDB 10.11.
//
// They are written to run on a live database:
//   - goose records versions, but the statements of each file are run by this package
//     (runner.go), one by one on one connection with a short lock_wait_timeout: a DDL
//     that cannot get its table's metadata lock (a long transaction is reading the
//     table) gives up within Options.LockWait instead of stalling every query on the
//     table behind it, and is retried with backoff;
//   - a file interrupted half way (a crash, a lock timeout past the retries) completes
//     when run again: each DDL statement is atomic, and one whose effect is already
//     there (table exists, duplicate column or key) is skipped as far as it is
//     verified (verify.go): a table, column or key found counts as applied only if it
//     is what the migration creates, the clauses of an ALTER not found are applied,
//     and one found with another definition stops the runner;
//   - a new migration is one DDL statement, with ALGORITHM=INPLACE, LOCK=NONE (or
//     INSTANT) where MySQL 8 and MariaDB both allow it; the older files that hold
//     several statements say so, and the runner makes them safe to re-run;
//   - a Down that would destroy refunds, credentials or payments has a
//     "-- +paykit down-guard:" query and refuses while it finds rows, unless forced.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"math"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// FS holds the migration files (0001_….sql, …) in goose format. An applied migration is
// never edited; a change is a new file.
//
//go:embed *.sql
var FS embed.FS

// Up applies every pending migration to db with the default Options. Concurrent callers
// (an API server and a worker starting together) are serialised by goose's MySQL table
// lock, so each migration runs exactly once.
func Up(ctx context.Context, db *sql.DB) error { return UpWith(ctx, db, Options{}) }

// UpWith is Up with o.
func UpWith(ctx context.Context, db *sql.DB, o Options) error {
	return UpTo(ctx, db, math.MaxInt64, o)
}

// UpTo applies the pending migrations up to and including version.
func UpTo(ctx context.Context, db *sql.DB, version int64, o Options) error {
	p, err := newProvider(db, o)
	if err != nil {
		return err
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
}

// DownTo rolls back the migrations above version, newest first. A migration whose
// guard finds data it would destroy refuses with ErrDestroysData unless o.Force.
func DownTo(ctx context.Context, db *sql.DB, version int64, o Options) error {
	p, err := newProvider(db, o)
	if err != nil {
		return err
	}
	if _, err := p.DownTo(ctx, version); err != nil {
		return fmt.Errorf("migrations: down: %w", err)
	}
	return nil
}

// Version returns the version of the last migration applied to db.
func Version(ctx context.Context, db *sql.DB) (int64, error) {
	p, err := newProvider(db, Options{})
	if err != nil {
		return 0, err
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations: version: %w", err)
	}
	return v, nil
}

func newProvider(db *sql.DB, o Options) (*goose.Provider, error) {
	locker, err := lock.NewMySQLTableLocker(
		lock.WithTableLockTimeout(time.Second, 120),
	)
	if err != nil {
		return nil, fmt.Errorf("migrations: locker: %w", err)
	}
	ms, err := goMigrations(o.withDefaults())
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(goose.DialectMySQL, db, nil,
		goose.WithGoMigrations(ms...),
		goose.WithLocker(locker),
		goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()),
	)
	if err != nil {
		return nil, fmt.Errorf("migrations: provider: %w", err)
	}
	return p, nil
}
