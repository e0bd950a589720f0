package system

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"testing"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/migrations"
	"github.com/paykit/paykit/mysql"
)

// `paykit migrate` creates a missing database and brings it to the last version; with
// -down-to it rolls back, and migrating again comes back up.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	db, dsn := testenv.EmptyMySQL(t)
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// The database is dropped here and created by Migrate; testenv drops it again at the end.
	if _, err := db.ExecContext(ctx, "DROP DATABASE `"+c.DBName+"`"); err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{MySQLDSN: dsn}
	version := func() int64 {
		t.Helper()
		st, err := OpenStore(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer CloseStore(st)
		v, err := migrations.Version(ctx, st.DB())
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	names, _ := fs.Glob(migrations.FS, "*.sql")
	var last int64
	fmt.Sscanf(names[len(names)-1], "%d_", &last)

	if err := Migrate(ctx, cfg, logger); err != nil {
		t.Fatalf("migrate a missing database: %v", err)
	}
	if v := version(); v != last {
		t.Fatalf("version %d after migrate, want %d", v, last)
	}
	if err := MigrateDown(ctx, cfg, 0, false, logger); err != nil {
		t.Fatalf("roll back an empty database: %v", err)
	}
	if v := version(); v != 0 {
		t.Fatalf("version %d after -down-to 0", v)
	}
	if err := Migrate(ctx, cfg, logger); err != nil || version() != last {
		t.Fatalf("migrate again: %v, version %d; want %d", err, version(), last)
	}
}
