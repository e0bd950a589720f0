package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/migrations"
	"github.com/paykit/paykit/mysql"
)

// schema returns SHOW CREATE TABLE of every table of db but goose's, by name.
func schema(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name NOT LIKE 'goose%' ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	out := map[string]string{}
	for _, n := range names {
		var name, ddl string
		if err := db.QueryRow("SHOW CREATE TABLE `"+n+"`").Scan(&name, &ddl); err != nil {
			t.Fatal(err)
		}
		out[n] = ddl
	}
	return out
}

func sameSchema(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d tables, want %d", what, len(got), len(want))
	}
	for n, ddl := range want {
		if got[n] != ddl {
			t.Errorf("%s: table %s is\n%s\nwant\n%s", what, n, got[n], ddl)
		}
	}
}

// TestRunnerBuildsTheSchemaGooseBuilds: the runner's statement splitting is faithful:
// the schema it builds is the one goose's own SQL runner builds from the same files.
func TestRunnerBuildsTheSchemaGooseBuilds(t *testing.T) {
	ctx := context.Background()
	ref, _ := testenv.EmptyMySQL(t)
	// goose is given the files as SplitFS writes them: a statement batched by a key range
	// run once over every key, and on TiDB, which refuses some of the files'
	// multi-clause ALTERs, those split one ALTER per clause, as the runner applies them there.
	split, err := migrations.SplitFS(onTiDB(t, ref))
	if err != nil {
		t.Fatal(err)
	}
	files := fs.FS(split)
	p, err := goose.NewProvider(goose.DialectMySQL, ref, files,
		goose.WithDisableGlobalRegistry(true), goose.WithLogger(goose.NopLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	db, _ := testenv.MySQL(t)
	sameSchema(t, "runner vs goose", schema(t, db), schema(t, ref))
}

func onTiDB(t *testing.T, db *sql.DB) bool {
	t.Helper()
	tidb, err := migrations.IsTiDB(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return tidb
}

// multiStatement returns the versions of the files with several Up statements and their
// statements, read the way goose reads them.
func multiStatement(t *testing.T) map[int64][]string {
	t.Helper()
	names, _ := fs.Glob(migrations.FS, "*.sql")
	out := map[int64][]string{}
	for _, name := range names {
		raw, _ := fs.ReadFile(migrations.FS, name)
		up := strings.SplitN(strings.SplitN(string(raw), "-- +goose Down", 2)[0], "-- +goose Up", 2)[1]
		var stmts []string
		for _, s := range strings.Split(up, ";\n") {
			var lines []string
			for _, l := range strings.Split(s, "\n") {
				if tl := strings.TrimSpace(l); tl != "" && !strings.HasPrefix(tl, "--") {
					lines = append(lines, l)
				}
			}
			if len(lines) > 0 {
				stmts = append(stmts, strings.TrimSuffix(strings.Join(lines, "\n"), ";"))
			}
		}
		if len(stmts) > 1 {
			var v int64
			fmt.Sscanf(name, "%d_", &v)
			out[v] = stmts
		}
	}
	return out
}

// TestInterruptedMigrationCompletesWhenRunAgain stops every file that holds several
// statements after each of its statements, as a crash or a lock timeout would (MySQL
// commits each DDL at once, so what ran stays), and runs Up again: it completes, and
// the schema is the one a clean run builds. Before, the second run failed on "table
// exists" or "duplicate column" and the version never moved.
func TestInterruptedMigrationCompletesWhenRunAgain(t *testing.T) {
	ctx := context.Background()
	ref, _ := testenv.MySQL(t)
	want := schema(t, ref)
	multi := multiStatement(t)
	if len(multi) == 0 {
		t.Fatal("no file with several statements: nothing to interrupt")
	}
	versions := make([]int64, 0, len(multi))
	for v := range multi {
		versions = append(versions, v)
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	for _, v := range versions {
		stmts := multi[v]
		for k := 1; k < len(stmts); k++ {
			t.Run(fmt.Sprintf("%04d_after_%d_of_%d", v, k, len(stmts)), func(t *testing.T) {
				db, _ := testenv.EmptyMySQL(t)
				if err := migrations.UpTo(ctx, db, v-1, migrations.Options{}); err != nil {
					t.Fatal(err)
				}
				for _, s := range stmts[:k] {
					if _, err := db.ExecContext(ctx, s); err != nil {
						t.Fatalf("by hand: %v\n%s", err, s)
					}
				}
				if err := migrations.Up(ctx, db); err != nil {
					t.Fatalf("Up after an interruption: %v", err)
				}
				if got, _ := migrations.Version(ctx, db); got != lastVersion(t) {
					t.Fatalf("version %d, want %d", got, lastVersion(t))
				}
				sameSchema(t, "after the interruption", schema(t, db), want)
			})
		}
	}
}

func lastVersion(t *testing.T) int64 {
	names, _ := fs.Glob(migrations.FS, "*.sql")
	var v int64
	fmt.Sscanf(names[len(names)-1], "%d_", &v)
	return v
}

// TestMigratingALiveDatabase runs the migrations after payments exists (0003) while a
// writer inserts and updates payments without pause and a long transaction holds a read
// snapshot of payments for longer than a write may wait. A DDL on payments cannot get
// its metadata lock while the snapshot is open, and every write queued behind it waits
// too: with a short lock_wait_timeout the DDL gives up, the writes go on, and it is
// retried until the reader is done. No write waits more than the bound, and the chain
// ends at the last version. Before, the first ALTER TABLE payments waited for the reader
// (lock_wait_timeout defaulted to a day) and every write stalled behind it.
func TestMigratingALiveDatabase(t *testing.T) {
	ctx := context.Background()
	db, dsn := testenv.EmptyMySQL(t)
	if err := migrations.UpTo(ctx, db, 3, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	app, err := mysql.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()

	const (
		lockWait  = time.Second
		readerFor = 4 * time.Second
		bound     = 2 * time.Second
	)
	// The long read: a snapshot of payments held open (a plain transaction: TiDB takes
	// READ ONLY only with its no-op functions enabled).
	reader, err := app.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, "SELECT COUNT(*) FROM payments").Scan(&n); err != nil {
		t.Fatal(err)
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		time.Sleep(readerFor)
		_ = reader.Commit()
	}()

	// The writer: one insert and one update at a time, each timed.
	stop := make(chan struct{})
	var worst atomic.Int64
	var writes atomic.Int64
	var werr error
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			now := time.Now().UTC()
			no := fmt.Sprintf("P%08d", i)
			start := time.Now()
			_, err := app.ExecContext(ctx, `INSERT INTO payments (payment_no, tenant_id, order_id, amount_fen, currency, subject,
				status, expire_at, created_at, updated_at) VALUES (?, 't1', ?, 100, 'CNY', 's', 0, ?, ?, ?)`, no, no, now, now, now)
			if err == nil {
				_, err = app.ExecContext(ctx, "UPDATE payments SET status = 2, updated_at = ? WHERE payment_no = ?", now, no)
			}
			if err != nil {
				werr = err
				return
			}
			if d := time.Since(start); d.Nanoseconds() > worst.Load() {
				worst.Store(d.Nanoseconds())
			}
			writes.Add(1)
		}
	})

	time.Sleep(200 * time.Millisecond) // the writer is running
	started := time.Now()
	err = migrations.UpWith(ctx, db, migrations.Options{LockWait: lockWait, RetryFor: time.Minute})
	took := time.Since(started)
	time.Sleep(200 * time.Millisecond) // writes after the chain
	close(stop)
	wg.Wait()
	<-readerDone
	if err != nil {
		t.Fatalf("Up on a live database: %v", err)
	}
	if werr != nil {
		t.Fatalf("writer: %v", werr)
	}
	if v, _ := migrations.Version(ctx, db); v != lastVersion(t) {
		t.Fatalf("version %d, want %d", v, lastVersion(t))
	}
	w := time.Duration(worst.Load())
	t.Logf("chain took %v (the reader held its snapshot %v); %d writes, the slowest %v", took.Round(time.Millisecond), readerFor, writes.Load(), w.Round(time.Millisecond))
	if took < readerFor-time.Second {
		t.Fatalf("the chain took %v: it never waited for the reader, so the test proved nothing", took)
	}
	if w > bound {
		t.Fatalf("a write waited %v behind a migration, more than %v", w, bound)
	}
}

// TestDownRefusesToDestroyRecords: rolling back past the refunds table while it holds a
// refund, or past the tenants' sealed credentials while a tenant has some, is refused
// unless forced; with nothing to lose, or forced, it runs.
func TestDownRefusesToDestroyRecords(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.MySQL(t)
	now := time.Now().UTC()
	if _, err := db.ExecContext(ctx, `INSERT INTO refunds (refund_no, tenant_id, payment_no, out_request_no, amount_fen,
		created_at, updated_at) VALUES ('r1', 't1', 'P1', 'o1', 100, ?, ?)`, now, now); err != nil {
		t.Fatal(err)
	}
	err := migrations.DownTo(ctx, db, 12, migrations.Options{})
	if !errors.Is(err, migrations.ErrDestroysData) || !strings.Contains(err.Error(), "refunds") {
		t.Fatalf("DownTo(12) with a refund: %v, want ErrDestroysData", err)
	}
	if _, err := db.ExecContext(ctx, "SELECT COUNT(*) FROM refunds"); err != nil {
		t.Fatalf("refunds is gone after a refused down: %v", err)
	}
	if err := migrations.DownTo(ctx, db, 12, migrations.Options{Force: true}); err != nil {
		t.Fatalf("forced DownTo(12): %v", err)
	}
	if v, _ := migrations.Version(ctx, db); v != 12 {
		t.Fatalf("version %d after the forced down, want 12", v)
	}
}

// TestInterruptedDropCompletesWhenRunAgain: a DROP that committed before its version was
// recorded is found done when run again, on the way up (0022 drops a key) and on the way
// down (0013's down drops refunds, then a column; its guard finds no table to protect).
func TestInterruptedDropCompletesWhenRunAgain(t *testing.T) {
	ctx := context.Background()
	up, _ := testenv.EmptyMySQL(t)
	if err := migrations.UpTo(ctx, up, 21, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := up.ExecContext(ctx, "ALTER TABLE benefit_grants DROP KEY uk_benefit_grants"); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, up); err != nil {
		t.Fatalf("Up after 0022's drop ran by itself: %v", err)
	}
	if v, _ := migrations.Version(ctx, up); v != lastVersion(t) {
		t.Fatalf("version %d, want %d", v, lastVersion(t))
	}

	down, _ := testenv.MySQL(t)
	if err := migrations.DownTo(ctx, down, 13, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := down.ExecContext(ctx, "DROP TABLE refunds"); err != nil {
		t.Fatal(err)
	}
	if err := migrations.DownTo(ctx, down, 12, migrations.Options{}); err != nil {
		t.Fatalf("DownTo(12) after 0013's first down statement ran by itself: %v", err)
	}
	if v, _ := migrations.Version(ctx, down); v != 12 {
		t.Fatalf("version %d, want 12", v)
	}
}
