package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/migrations"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

// The retention purge deletes the staged lines of the days before its date, of every
// app, at most limit at a time and oldest first, and keeps the lines of that day and
// after; it finds the old days through idx_statement_lines_bill_date and deletes each
// one's lines through the primary key, not by reading the whole table.
func TestPurgeStatementLines(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	for _, q := range []struct {
		name, query string
		args        []any
	}{
		{"first day", mysql.QOldStatementDay, []any{"2026-10-27"}},
		{"next day", mysql.QOldStatementDayAfter, []any{"2026-10-27", "2026-10-01", "2026-10-01", "A"}},
	} {
		if key := explainKeys(t, db, q.query, q.args...)["statement_lines"]; key != "idx_statement_lines_bill_date" {
			t.Errorf("the purge's %s reads %q, want idx_statement_lines_bill_date", q.name, key)
		}
	}
	if key := explainKeys(t, db, mysql.QPurgeStatementDay, "A", "2026-10-01", 5000)["statement_lines"]; key != "PRIMARY" {
		// TiDB keeps the composite primary key as the table's own order (clustered): a
		// range of it is a TableRangeScan, with no index named.
		plan := explainPlan(t, db, mysql.QPurgeStatementDay, "A", "2026-10-01", 5000)
		if tidb, err := migrations.IsTiDB(ctx, db); err != nil || !tidb || !strings.Contains(plan, "TableRangeScan") || strings.Contains(plan, "TableFullScan") {
			t.Errorf("the purge's delete reads %q, want PRIMARY (or on TiDB a range of the clustered primary key):\n%s", key, plan)
		}
	}
	stage := func(app, date string, n int) {
		t.Helper()
		lines := make([]payment.BillLine, n)
		for i := range lines {
			lines[i] = payment.BillLine{LineNo: i + 1, Kind: payment.BillLineTrade, OutTradeNo: fmt.Sprintf("P%s%d", date, i), Amount: 100}
		}
		if err := st.StageBillLines(ctx, app, date, lines); err != nil {
			t.Fatal(err)
		}
	}
	stage("A", "2026-10-01", 3)
	stage("B", "2026-10-01", 2)
	stage("A", "2026-10-20", 4)
	stage("A", "2026-10-27", 2) // the cut-off day itself
	stage("B", "2026-11-30", 5)
	lines := func(where string) int {
		return count(t, db, "SELECT COUNT(*) FROM statement_lines WHERE "+where)
	}

	n, err := st.PurgeStatementLines(ctx, "2026-10-27", 4)
	if err != nil || n != 4 {
		t.Fatalf("first batch: %d, %v; want 4", n, err)
	}
	if got := lines("bill_date = '2026-10-01'"); got != 1 {
		t.Fatalf("after a batch of 4, %d lines of the oldest day left, want 1 (oldest first)", got)
	}
	var total int64 = n
	for {
		n, err := st.PurgeStatementLines(ctx, "2026-10-27", 4)
		if err != nil {
			t.Fatal(err)
		}
		total += n
		if n < 4 {
			break
		}
	}
	if total != 9 {
		t.Errorf("purged %d lines, want the 9 before 2026-10-27", total)
	}
	if got := lines("bill_date < '2026-10-27'"); got != 0 {
		t.Errorf("%d old lines left", got)
	}
	if a, b := lines("app_id = 'A' AND bill_date = '2026-10-27'"), lines("app_id = 'B' AND bill_date = '2026-11-30'"); a != 2 || b != 5 {
		t.Errorf("kept %d lines of the cut-off day and %d of a later one, want 2 and 5", a, b)
	}
}

// A day whose statement lock another run holds (a re-run of an old day, which has just
// staged its lines and is about to match the local side against them) is skipped by the
// purge, whatever its age; the purge takes the other days' lines, and the held day's
// once its run let go of it.
func TestPurgeStatementLinesSkipsLockedDays(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	stage := func(app, date string, n int) {
		t.Helper()
		lines := make([]payment.BillLine, n)
		for i := range lines {
			lines[i] = payment.BillLine{LineNo: i + 1, Kind: payment.BillLineTrade, OutTradeNo: fmt.Sprintf("P%s%d", date, i), Amount: 100}
		}
		if err := st.StageBillLines(ctx, app, date, lines); err != nil {
			t.Fatal(err)
		}
	}
	stage("A", "2026-10-01", 3) // the day another run holds
	stage("B", "2026-10-01", 2)
	stage("A", "2026-10-20", 4)
	stage("A", "2026-11-30", 5)
	lines := func(app, date string) int {
		return count(t, db, "SELECT COUNT(*) FROM statement_lines WHERE app_id = ? AND bill_date = ?", app, date)
	}
	_, unlock, err := st.LockStatement(ctx, "A", "2026-10-01")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for {
		n, err := st.PurgeStatementLines(ctx, "2026-10-27", 2)
		if err != nil {
			t.Fatal(err)
		}
		total += n
		if n < 2 {
			break
		}
	}
	if held, b, a, later := lines("A", "2026-10-01"), lines("B", "2026-10-01"), lines("A", "2026-10-20"), lines("A", "2026-11-30"); held != 3 || b != 0 || a != 0 || later != 5 || total != 6 {
		t.Fatalf("purged %d with A 2026-10-01 held: %d lines of the held day (want 3), %d and %d of the other old days (want 0), %d of a later one (want 5)",
			total, held, b, a, later)
	}
	// The run still holds its day: the purge took no lock it keeps.
	if _, _, err := st.LockStatement(ctx, "A", "2026-10-01"); payment.ErrorCode(err) != payment.ECONFLICT {
		t.Fatalf("a second lock of the held day: %v, want ECONFLICT", err)
	}
	unlock()
	if n, err := st.PurgeStatementLines(ctx, "2026-10-27", 10); err != nil || n != 3 {
		t.Fatalf("once the run let go: purged %d, %v; want the held day's 3", n, err)
	}
	// The purge let go of every day it took: a run of one starts.
	_, unlock, err = st.LockStatement(ctx, "B", "2026-10-01")
	if err != nil {
		t.Fatalf("a run of a purged day: %v", err)
	}
	unlock()
}

// A held statement lock is checked on its connection while it is held: it stays held
// through the checks, and once the connection is gone (killed here; a server's
// wait_timeout or restart does the same) the run's context is cancelled with
// ErrStatementLockLost, so the run stops instead of going on without the lock.
func TestStatementLockLostCancelsTheRun(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	mysql.SetStatementLockCheck(st, 50*time.Millisecond)
	held, unlock, err := st.LockStatement(ctx, "A", "2026-10-02")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	time.Sleep(300 * time.Millisecond)
	if err := held.Err(); err != nil {
		t.Fatalf("a lock still held: its context ended (%v, cause %v)", err, context.Cause(held))
	}
	owner := mysql.StatementLockConn(held)
	if owner == 0 {
		t.Fatal("no connection id in the lock's context")
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("KILL %d", owner)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Done():
		if !errors.Is(context.Cause(held), mysql.ErrStatementLockLost) {
			t.Fatalf("cancelled with %v, want ErrStatementLockLost", context.Cause(held))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lock's connection was killed and the run's context goes on")
	}
	// The day is free again: another run takes it, once the server has ended the killed
	// session (KILL returns before the session's thread has let go of its locks; the
	// client can see its connection gone first).
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, unlock2, err := st.LockStatement(ctx, "A", "2026-10-02")
		if err == nil {
			unlock2()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the loss: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A statement lock whose RELEASE_LOCK fails on a live connection (a server error, an
// interrupted query) is not handed back to the pool with the lock still on it: that
// connection is discarded, which frees the lock, so the day is not held until the idle
// connection happens to be closed.
func TestStatementLockReleaseFailureDiscardsTheConnection(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	mysql.SetStatementLockRelease(st, "SELECT RELEASE_LOCK(?) FROM no_such_table")
	_, unlock, err := st.LockStatement(ctx, "A", "2026-10-03")
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	// Another session takes the day's lock at once (on TiDB a busy GET_LOCK is an error).
	other, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var got sql.NullInt64
	err = other.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", mysql.StatementLockName("A", "2026-10-03")).Scan(&got)
	if err != nil || got.Int64 != 1 {
		t.Fatalf("after an unlock whose release failed, GET_LOCK from another session = %v, %v: the lock went back to the pool on its connection", got, err)
	}
	if _, err := other.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", mysql.StatementLockName("A", "2026-10-03")); err != nil {
		t.Fatal(err)
	}
}

// explainPlan is the whole EXPLAIN of a query, every row's columns joined.
func explainPlan(tb testing.TB, db *sql.DB, query string, args ...any) string {
	tb.Helper()
	var b strings.Builder
	explainRows(tb, db, query, args, func(_ []string, vals []sql.NullString) {
		for _, v := range vals {
			b.WriteString(v.String + " ")
		}
		b.WriteString("\n")
	})
	return b.String()
}
