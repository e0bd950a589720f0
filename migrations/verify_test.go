package migrations_test

import (
	"context"
	"database/sql"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/migrations"
)

// keyOf describes a key of db's table as the runner's errors do: "UNIQUE KEY (a, b)",
// "KEY (a)", "PRIMARY KEY (a)", or "" if there is no such key.
func keyOf(t *testing.T, db *sql.DB, table, key string) string {
	t.Helper()
	rows, err := db.Query(`SELECT NON_UNIQUE, COLUMN_NAME FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME = ? ORDER BY SEQ_IN_INDEX`, table, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []string
	kind := "KEY"
	for rows.Next() {
		var nonUnique, col string
		if err := rows.Scan(&nonUnique, &col); err != nil {
			t.Fatal(err)
		}
		if nonUnique == "0" {
			kind = "UNIQUE KEY"
		}
		cols = append(cols, col)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cols) == 0 {
		return ""
	}
	if key == "PRIMARY" {
		kind = "PRIMARY KEY"
	}
	return kind + " (" + strings.Join(cols, ", ") + ")"
}

// columnOf returns COLUMN_TYPE of db's table's column, or "" if there is none.
func columnOf(t *testing.T, db *sql.DB, table, column string) string {
	t.Helper()
	var typ string
	err := db.QueryRow(`SELECT COLUMN_TYPE FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?`, table, column).Scan(&typ)
	if err == sql.ErrNoRows {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return typ
}

func version(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	v, err := migrations.Version(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// upStops runs Up and wants it to stop at version at with an error holding every one of
// want.
func upStops(t *testing.T, db *sql.DB, at int64, want ...string) {
	t.Helper()
	err := migrations.Up(context.Background(), db)
	if err == nil {
		t.Fatalf("Up went through to version %d; want it to stop at %d with an error naming %q", version(t, db), at, want)
	}
	t.Logf("Up stopped: %v", err)
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Up's error does not name %q:\n%v", w, err)
		}
	}
	if v := version(t, db); v != at {
		t.Fatalf("version %d after the stop, want %d", v, at)
	}
}

// upCompletes runs Up and wants it at the last version with the schema a clean run builds.
func upCompletes(t *testing.T, db *sql.DB, want map[string]string) {
	t.Helper()
	if err := migrations.Up(context.Background(), db); err != nil {
		t.Fatalf("Up: %v", err)
	}
	if v := version(t, db); v != lastVersion(t) {
		t.Fatalf("version %d, want %d", v, lastVersion(t))
	}
	sameSchema(t, "after Up", sortedLines(schema(t, db)), sortedLines(want))
}

// sortedLines is each table's SHOW CREATE TABLE with its lines sorted: a key built ahead
// of the migration that adds it is listed before keys built since, which changes nothing.
func sortedLines(s map[string]string) map[string]string {
	out := map[string]string{}
	for n, ddl := range s {
		lines := strings.Split(ddl, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimSuffix(strings.TrimSpace(l), ",")
		}
		sort.Strings(lines)
		out[n] = strings.Join(lines, "\n")
	}
	return out
}

// TestPrebuiltKeyIsVerified: a key a DBA built ahead of the migration that adds it, under
// the migration's name, is taken as the migration's only if it is the same key. A plain
// key where the migration adds a unique one stops the runner with an error naming both,
// before anything that relies on the unique key runs (0022 drops benefit_grants' old
// unique key, which only holds one grant per payment while 0021's key does). Before, the
// runner skipped any ADD that failed on "duplicate key name", 0022 ran, and benefit_grants
// ended with no unique key: a payment could be granted twice.
func TestPrebuiltKeyIsVerified(t *testing.T) {
	ctx := context.Background()
	ref, _ := testenv.MySQL(t)
	want := schema(t, ref)
	for _, c := range []struct {
		name     string
		version  int64 // the migration adding the key
		table    string
		key      string
		cols     string
		oldTable string // a unique key the table keeps while the runner is stopped
		oldKey   string
	}{
		{"0021_benefit_grants", 21, "benefit_grants", "uk_benefit_grants_payment", "tenant_id, payment_no",
			"benefit_grants", "uk_benefit_grants"},
		{"0034_feed_seq", 34, "payment_events", "uk_payment_events_tenant_feed_seq", "tenant_id, feed_seq",
			"payment_events", "uk_payment_events_event_id"},
	} {
		t.Run(c.name+"/plain_key_stops_the_runner", func(t *testing.T) {
			db, _ := testenv.EmptyMySQL(t)
			if err := migrations.UpTo(ctx, db, c.version-1, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, "ALTER TABLE "+c.table+" ADD KEY "+c.key+" ("+c.cols+")"); err != nil {
				t.Fatal(err)
			}
			oldKey := keyOf(t, db, c.oldTable, c.oldKey)
			upStops(t, db, c.version-1, c.key, c.table,
				"exists as KEY ("+c.cols+")", "the migration adds UNIQUE KEY ("+c.cols+")")
			if got := keyOf(t, db, c.table, c.key); got != "KEY ("+c.cols+")" {
				t.Errorf("the pre-built key is now %q, want it left as KEY (%s)", got, c.cols)
			}
			if got := keyOf(t, db, c.oldTable, c.oldKey); got != oldKey || !strings.HasPrefix(got, "UNIQUE KEY") {
				t.Errorf("%s.%s is %q after the stop, want %q", c.oldTable, c.oldKey, got, oldKey)
			}
			// Fixed by hand, the chain completes.
			if _, err := db.ExecContext(ctx, "ALTER TABLE "+c.table+" DROP KEY "+c.key); err != nil {
				t.Fatal(err)
			}
			upCompletes(t, db, want)
		})
		t.Run(c.name+"/same_unique_key_is_taken", func(t *testing.T) {
			db, _ := testenv.EmptyMySQL(t)
			if err := migrations.UpTo(ctx, db, c.version-1, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, "ALTER TABLE "+c.table+" ADD UNIQUE KEY "+c.key+" ("+c.cols+")"); err != nil {
				t.Fatal(err)
			}
			upCompletes(t, db, want)
		})
	}
	t.Run("0021_benefit_grants/other_columns_stop_the_runner", func(t *testing.T) {
		db, _ := testenv.EmptyMySQL(t)
		if err := migrations.UpTo(ctx, db, 20, migrations.Options{}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "ALTER TABLE benefit_grants ADD UNIQUE KEY uk_benefit_grants_payment (payment_no, tenant_id)"); err != nil {
			t.Fatal(err)
		}
		upStops(t, db, 20, "exists as UNIQUE KEY (payment_no, tenant_id)", "the migration adds UNIQUE KEY (tenant_id, payment_no)")
	})
	t.Run("0016_tenants/other_prefix_length_stops_the_runner", func(t *testing.T) {
		db, _ := testenv.EmptyMySQL(t)
		if err := migrations.UpTo(ctx, db, 15, migrations.Options{}); err != nil {
			t.Fatal(err)
		}
		// Two statements: TiDB does not let one ALTER key a column it adds.
		for _, q := range []string{`ALTER TABLE tenants ADD COLUMN alipay_credentials TEXT NULL AFTER alipay_seller_id`,
			`ALTER TABLE tenants ADD KEY idx_tenants_alipay_app (alipay_app_id, alipay_credentials(16))`} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		upStops(t, db, 15, "key idx_tenants_alipay_app on tenants exists as KEY (alipay_app_id, alipay_credentials(16))",
			"the migration adds KEY (alipay_app_id, alipay_credentials(8))")
	})
}

// TestPrebuiltColumnIsVerified: a column added ahead of the migration that adds it is
// taken as the migration's only if it has the migration's type, nullability, DEFAULT, ON
// UPDATE and collation (the table's, which the migration's column takes). Before, the
// DEFAULT, ON UPDATE and collation were not compared: payment_events.dead pre-built with
// DEFAULT 1 was taken, and every event the outbox wrote was dead on insert.
func TestPrebuiltColumnIsVerified(t *testing.T) {
	ctx := context.Background()
	ref, _ := testenv.MySQL(t)
	want := schema(t, ref)
	for _, c := range []struct {
		name    string
		version int64 // the last applied before the column is built ahead
		ahead   string
		want    []string // what the error names; nil: the column is taken
	}{
		{"other_type_stops_the_runner", 8, "ALTER TABLE payments ADD COLUMN method INT NOT NULL DEFAULT 0 AFTER subject",
			[]string{"column method on payments", "VARCHAR(8) NOT NULL", "exists as INT"}},
		{"nullable_stops_the_runner", 39, "ALTER TABLE channel_notifications ADD COLUMN refund TINYINT(1) NULL",
			[]string{"column refund on channel_notifications", "TINYINT(1) NOT NULL", "TINYINT(1) NULL"}},
		{"other_default_stops_the_runner", 10, "ALTER TABLE payment_events ADD COLUMN dead TINYINT(1) NOT NULL DEFAULT 1",
			[]string{"column dead on payment_events", "exists as TINYINT(1) NOT NULL DEFAULT 1", "the migration adds TINYINT(1) NOT NULL DEFAULT 0"}},
		{"no_default_stops_the_runner", 10, "ALTER TABLE payment_events ADD COLUMN dead TINYINT(1) NOT NULL",
			[]string{"column dead on payment_events", "exists as TINYINT(1) NOT NULL but", "the migration adds TINYINT(1) NOT NULL DEFAULT 0"}},
		{"other_string_default_stops_the_runner", 8, "ALTER TABLE payments ADD COLUMN method VARCHAR(8) NOT NULL DEFAULT 'wap' AFTER subject",
			[]string{"column method on payments", "DEFAULT 'wap'", "the migration adds VARCHAR(8) NOT NULL DEFAULT 'page'"}},
		{"other_collation_stops_the_runner", 8,
			"ALTER TABLE payments ADD COLUMN method VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL DEFAULT 'page' AFTER subject",
			[]string{"column method on payments", "COLLATE utf8mb4_general_ci", "the migration adds VARCHAR(8) NOT NULL DEFAULT 'page' COLLATE utf8mb4_bin"}},
		{"no_on_update_stops_the_runner", 26, "ALTER TABLE payment_events ADD COLUMN changed_at DATETIME(6) NULL DEFAULT NULL AFTER delivered_at",
			[]string{"column changed_at on payment_events", "the migration adds DATETIME(6) NULL ON UPDATE CURRENT_TIMESTAMP(6)"}},
		{"same_column_is_taken", 8, "ALTER TABLE payments ADD COLUMN method VARCHAR(8) NOT NULL DEFAULT 'page' AFTER subject", nil},
		{"same_column_with_its_on_update_is_taken", 26,
			"ALTER TABLE payment_events ADD COLUMN changed_at DATETIME(6) NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP(6) AFTER delivered_at", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, _ := testenv.EmptyMySQL(t)
			if err := migrations.UpTo(ctx, db, c.version, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, c.ahead); err != nil {
				t.Fatal(err)
			}
			if c.want == nil {
				upCompletes(t, db, want)
				return
			}
			upStops(t, db, c.version, c.want...)
		})
	}
}

// TestPrebuiltTableIsVerified: a table created ahead of the migration that creates it is
// taken as the migration's only if it has the migration's columns, of its types and
// DEFAULTs, its keys, and its ENGINE and collation.
func TestPrebuiltTableIsVerified(t *testing.T) {
	ctx := context.Background()
	ref, _ := testenv.MySQL(t)
	want := schema(t, ref)
	for _, c := range []struct {
		name   string
		create string
		want   []string // what the error names; nil: the table is taken
	}{
		{"other_column_type", `CREATE TABLE tenant_feed_locks (tenant_id VARCHAR(64) NOT NULL, events INT NOT NULL DEFAULT 0,
			PRIMARY KEY (tenant_id))`, []string{"table tenant_feed_locks", "exists with column events INT", "the migration creates column events BIGINT NOT NULL"}},
		{"missing_column", `CREATE TABLE tenant_feed_locks (tenant_id VARCHAR(64) NOT NULL, PRIMARY KEY (tenant_id))`,
			[]string{"table tenant_feed_locks", "no column events", "the migration creates column events BIGINT NOT NULL"}},
		{"missing_primary_key", `CREATE TABLE tenant_feed_locks (tenant_id VARCHAR(64) NOT NULL, events BIGINT NOT NULL DEFAULT 0,
			KEY k (tenant_id))`, []string{"table tenant_feed_locks", "no key PRIMARY", "the migration creates PRIMARY KEY (tenant_id)"}},
		{"other_default", `CREATE TABLE tenant_feed_locks (tenant_id VARCHAR(64) NOT NULL, events BIGINT NOT NULL DEFAULT 5,
			PRIMARY KEY (tenant_id)) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
			[]string{"table tenant_feed_locks", "exists with column events BIGINT", "NOT NULL DEFAULT 5 but", "the migration creates column events BIGINT NOT NULL DEFAULT 0"}},
		{"other_collation", `CREATE TABLE tenant_feed_locks (tenant_id VARCHAR(64) NOT NULL, events BIGINT NOT NULL DEFAULT 0,
			PRIMARY KEY (tenant_id)) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_general_ci`,
			[]string{"table tenant_feed_locks", "COLLATE utf8mb4_general_ci", "the migration creates", "COLLATE utf8mb4_bin"}},
		{"other_column_collation", `CREATE TABLE tenant_feed_locks (tenant_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL,
			events BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (tenant_id)) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
			[]string{"table tenant_feed_locks", "exists with column tenant_id VARCHAR(64) NOT NULL COLLATE utf8mb4_general_ci",
				"the migration creates column tenant_id VARCHAR(64) NOT NULL COLLATE utf8mb4_bin"}},
		{"other_engine", `CREATE TABLE tenant_feed_locks (tenant_id VARCHAR(64) NOT NULL, events BIGINT NOT NULL DEFAULT 0,
			PRIMARY KEY (tenant_id)) ENGINE = MyISAM DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
			[]string{"table tenant_feed_locks", "ENGINE MyISAM", "the migration creates it ENGINE InnoDB"}},
		{"same_table", `CREATE TABLE tenant_feed_locks (tenant_id VARCHAR(64) NOT NULL, events BIGINT NOT NULL DEFAULT 0,
			PRIMARY KEY (tenant_id)) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, _ := testenv.EmptyMySQL(t)
			if err := migrations.UpTo(ctx, db, 19, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			if c.name == "other_engine" && onTiDB(t, db) {
				t.Skip("TiDB takes ENGINE = MyISAM and makes the table its own")
			}
			if _, err := db.ExecContext(ctx, c.create); err != nil {
				t.Fatal(err)
			}
			if c.want == nil {
				upCompletes(t, db, want)
				return
			}
			upStops(t, db, 19, c.want...)
		})
	}
}

// TestMultiClauseAlterAppliesTheMissingClauses: an ALTER of several clauses one of which
// is already there (a DBA applied it ahead, or a TiDB run applied the clauses one by one
// and was interrupted) applies the others. Before, MariaDB and MySQL refused the whole
// statement on the one clause found, and the runner skipped the whole statement: 0023's
// columns were never added. A clause found with another definition stops the runner and
// applies none of the statement (on MySQL and MariaDB; TiDB is given one clause at a
// time). On the way down, a DROP clause of a key already dropped
// no longer skips the statement's other DROPs.
func TestMultiClauseAlterAppliesTheMissingClauses(t *testing.T) {
	ctx := context.Background()
	ref, _ := testenv.MySQL(t)
	want := schema(t, ref)
	for _, c := range []struct {
		name    string
		version int64
		ahead   string
	}{
		{"0023_last_key", 23, "ALTER TABLE channel_notifications ADD KEY idx_channel_notifications_received (received_at)"},
		{"0023_first_column", 23, "ALTER TABLE channel_notifications ADD COLUMN dispatch_due_at DATETIME(6) NULL"},
		{"0011_first_column", 11, "ALTER TABLE payment_events ADD COLUMN next_attempt_at DATETIME(6) NULL AFTER last_error"},
		{"0025_key_with_a_modify", 25, "ALTER TABLE payments ADD KEY idx_payments_updated (updated_at)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, _ := testenv.EmptyMySQL(t)
			if err := migrations.UpTo(ctx, db, c.version-1, migrations.Options{}); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, c.ahead); err != nil {
				t.Fatal(err)
			}
			upCompletes(t, db, want)
		})
	}
	t.Run("0023_other_column_stops_the_runner", func(t *testing.T) {
		db, _ := testenv.EmptyMySQL(t)
		if err := migrations.UpTo(ctx, db, 22, migrations.Options{}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "ALTER TABLE channel_notifications ADD COLUMN dispatch_attempts BIGINT NOT NULL DEFAULT 0"); err != nil {
			t.Fatal(err)
		}
		upStops(t, db, 22, "column dispatch_attempts on channel_notifications", "INT NOT NULL", "BIGINT")
		notAdded := []string{"dispatch_due_at", "settled_at"}
		if onTiDB(t, db) {
			// TiDB is given the clauses one at a time: the one before the mismatch is in.
			notAdded = notAdded[1:]
		}
		for _, col := range notAdded {
			if got := columnOf(t, db, "channel_notifications", col); got != "" {
				t.Errorf("column %s was added (%s) by a statement the runner stopped at", col, got)
			}
		}
		if got := keyOf(t, db, "channel_notifications", "idx_channel_notifications_due"); got != "" {
			t.Errorf("key idx_channel_notifications_due was added (%s) by a statement the runner stopped at", got)
		}
	})
	t.Run("0027_down_key_dropped_ahead", func(t *testing.T) {
		db, _ := testenv.MySQL(t)
		if _, err := db.ExecContext(ctx, "ALTER TABLE payment_events DROP KEY idx_payment_events_changed"); err != nil {
			t.Fatal(err)
		}
		if err := migrations.DownTo(ctx, db, 26, migrations.Options{}); err != nil {
			t.Fatal(err)
		}
		if got := columnOf(t, db, "payment_events", "changed_at"); got != "" {
			t.Fatalf("payment_events.changed_at (%s) is still there after 0027's down", got)
		}
		upCompletes(t, db, want)
	})
}

// TestEveryFileRunAgainIsFoundApplied runs each file's Up statements again right after the
// file is applied: every table, column and key it built is found as it defines it (type,
// nullability, DEFAULT, ON UPDATE, collation, ENGINE), so the runner's comparison refuses
// no schema a migration built itself, on the server the test runs against.
func TestEveryFileRunAgainIsFoundApplied(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.EmptyMySQL(t)
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		v, err := strconv.ParseInt(strings.SplitN(name, "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if err := migrations.UpTo(ctx, db, v, migrations.Options{}); err != nil {
			t.Fatal(err)
		}
		text, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := migrations.RunFile(ctx, db, name, string(text)); err != nil {
			t.Errorf("%s run again once applied: %v", name, err)
		}
	}
}
