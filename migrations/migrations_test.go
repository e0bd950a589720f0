package migrations_test

import (
	"context"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/migrations"
	"github.com/paykit/paykit/mysql"
)

func TestUpAppliesEveryFileOnceUnderConcurrency(t *testing.T) {
	db, _ := testenv.EmptyMySQL(t)
	ctx := context.Background()

	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	const callers = 4
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() { errs[i] = migrations.Up(ctx, db) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("second Up: %v", err)
	}
	v, err := migrations.Version(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// Numbers may have gaps (one reserved by work not merged yet), so the version is the
	// highest number, and every file is applied once.
	var last int64
	for _, f := range files {
		n, err := strconv.ParseInt(strings.SplitN(f, "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration %s is not numbered: %v", f, err)
		}
		last = max(last, n)
	}
	if v != last {
		t.Fatalf("version = %d, want %d (the last file)", v, last)
	}
	var applied int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM goose_db_version WHERE version_id > 0").Scan(&applied); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d concurrent Up calls: %d files, %d applied rows", callers, len(files), applied)
	if applied != len(files) {
		t.Fatalf("applied rows = %d, want %d", applied, len(files))
	}
}

// TestActiveOrderIndex checks the generated column on the real server: one pending
// payment per (tenant, order), any number of finished ones.
func TestActiveOrderIndex(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	now := time.Now().UTC()
	insert := func(no string, status int) error {
		_, err := db.ExecContext(ctx, `INSERT INTO payments
			(payment_no, tenant_id, order_id, amount_fen, currency, subject, status, expire_at, created_at, updated_at)
			VALUES (?, 't1', 'o1', 100, 'CNY', 's', ?, ?, ?, ?)`, no, status, now, now, now)
		return err
	}
	tests := []struct {
		name    string
		no      string
		status  int
		wantDup bool
	}{
		{"first pending", "p1", 0, false},
		{"second pending collides", "p2", 0, true},
		{"paid history", "p3", 1, false},
		{"more paid history", "p4", 1, false},
		{"closed history", "p5", 2, false},
		{"failed history", "p6", 3, false},
		{"same payment_no collides", "p3", 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := insert(tt.no, tt.status)
			if got := mysql.IsDuplicate(err); got != tt.wantDup {
				t.Fatalf("insert %s status %d: err = %v, want duplicate %v", tt.no, tt.status, err, tt.wantDup)
			}
			if !tt.wantDup && err != nil {
				t.Fatal(err)
			}
		})
	}
	// Closing the pending one frees the slot for a new pending payment.
	if _, err := db.ExecContext(ctx, `UPDATE payments SET status = 2 WHERE payment_no = 'p1'`); err != nil {
		t.Fatal(err)
	}
	if err := insert("p7", 0); err != nil {
		t.Fatalf("pending after close: %v", err)
	}
	var active *string
	if err := db.QueryRowContext(ctx, `SELECT active_order_id FROM payments WHERE payment_no = 'p1'`).Scan(&active); err != nil {
		t.Fatal(err)
	}
	if active != nil {
		t.Fatalf("active_order_id of a closed payment = %q, want NULL", *active)
	}
}

// TestDownAndUpAgain checks that every Down section undoes its Up.
func TestDownAndUpAgain(t *testing.T) {
	db, _ := testenv.MySQL(t)
	ctx := context.Background()
	// With no records, no guard refuses.
	if err := migrations.DownTo(ctx, db, 0, migrations.Options{}); err != nil {
		t.Fatalf("down: %v", err)
	}
	var tables int
	if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name NOT LIKE 'goose%'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("%d tables left after down", tables)
	}
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
