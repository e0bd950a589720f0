package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/migrations"
)

// TestAPIKeysBackfill: 0039 gives every tenant's key its row in api_keys, over more
// tenants than one batch takes, and leaves a key that already has its row as it is.
func TestAPIKeysBackfill(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.EmptyMySQL(t)
	if err := migrations.UpTo(ctx, db, 38, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	const tenants = 2345 // over two batches of 1000
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for start := 0; start < tenants; start += 500 {
		var rows []string
		var args []any
		for i := start; i < min(start+500, tenants); i++ {
			rows = append(rows, "(?, ?, ?, ?)")
			args = append(args, fmt.Sprintf("t%05d", i), fmt.Sprintf("%064x", i), created, created)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO tenants (id, api_key_hash, created_at, updated_at) VALUES "+strings.Join(rows, ","), args...); err != nil {
			t.Fatal(err)
		}
	}
	revoked := created.Add(time.Hour)
	if _, err := db.ExecContext(ctx, `INSERT INTO api_keys (key_hash, tenant_id, created_at, revoked_at, updated_at) VALUES (?, 't00007', ?, ?, ?)`,
		fmt.Sprintf("%064x", 7), created, revoked, revoked); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	var n, mismatched, stillRevoked int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(k.tenant_id <> t.id OR k.created_at <> t.created_at), 0),
		COALESCE(SUM(k.revoked_at IS NOT NULL), 0) FROM api_keys k JOIN tenants t ON t.api_key_hash = k.key_hash`).Scan(&n, &mismatched, &stillRevoked); err != nil {
		t.Fatal(err)
	}
	if n != tenants || mismatched != 0 || stillRevoked != 1 {
		t.Fatalf("api_keys: %d rows of tenants' keys (want %d), %d with another tenant or time, %d revoked (want 1)", n, tenants, mismatched, stillRevoked)
	}
}
