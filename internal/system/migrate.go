package system

import (
	"context"
	"log/slog"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/migrations"
	"github.com/paykit/paykit/mysql"
)

// EnsureDatabase creates the database of PAYKIT_MYSQL_DSN if it is missing.
func EnsureDatabase(ctx context.Context, dsn string) error {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	return migrations.EnsureDatabase(ctx, c)
}

// Migrate creates the database if it is missing (CREATE DATABASE IF NOT EXISTS, so a
// user without that privilege on an existing database loses nothing) and applies the
// migrations.
func Migrate(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	if err := EnsureDatabase(ctx, cfg.MySQLDSN); err != nil {
		logger.Warn("could not create the database; migrating it if it exists", "err", err)
	}
	store, err := OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer CloseStore(store)
	if err := migrations.UpWith(ctx, store.DB(), migrateOptions(cfg, logger)); err != nil {
		return err
	}
	v, err := migrations.Version(ctx, store.DB())
	if err != nil {
		return err
	}
	logger.Info("migrations applied", "version", v)
	return nil
}

// MigrateDown rolls the schema back to version, refusing to drop tables and columns
// that hold payments, refunds or credentials unless force.
func MigrateDown(ctx context.Context, cfg config.Config, version int64, force bool, logger *slog.Logger) error {
	store, err := OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer CloseStore(store)
	o := migrateOptions(cfg, logger)
	o.Force = force
	if err := migrations.DownTo(ctx, store.DB(), version, o); err != nil {
		return err
	}
	logger.Info("migrations rolled back", "version", version)
	return nil
}

func migrateOptions(cfg config.Config, logger *slog.Logger) migrations.Options {
	return migrations.Options{LockWait: cfg.MigrateLockWait, Logger: logger}
}
