package mysql_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

// The retention purge deletes the staged lines of the days before its date, of every
// app, at most limit at a time and oldest first, and keeps the lines of that day and
// after; it reads idx_statement_lines_bill_date, not the whole table.
func TestPurgeStatementLines(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	if key := explainKeys(t, db, mysql.QPurgeStatementLines, "2026-10-27", 5000)["statement_lines"]; key != "idx_statement_lines_bill_date" {
		t.Errorf("the purge reads %q, want idx_statement_lines_bill_date", key)
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
