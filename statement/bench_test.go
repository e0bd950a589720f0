package statement_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/statement"
)

// TestStatementBenchmark reconciles a generated bill of PAYKIT_STATEMENT_BENCH lines
// against as many local records in MariaDB, and reports lines per second, the heap
// high-water mark and the process's peak RSS during the run. scripts/statement-bench.sh
// runs it for 10,000 and 100,000 lines, each in a process of its own.
func TestStatementBenchmark(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PAYKIT_STATEMENT_BENCH"))
	if n <= 0 {
		t.Skip("set PAYKIT_STATEMENT_BENCH=<lines> (see scripts/statement-bench.sh)")
	}
	db, _ := testenv.MySQL(t)
	store := mysql.NewStore(db)
	ctx := context.Background()
	if err := store.UpsertTenant(ctx, payment.Tenant{ID: "bench", Name: "bench", APIKeyHash: "h", AlipayAppID: "app"}); err != nil {
		t.Fatal(err)
	}
	seedStart := time.Now()
	seedBench(t, db, n)
	dir := t.TempDir()
	url := startFileServer(t, writeBenchBill(t, dir, n))
	t.Logf("seeded %d local records and wrote the bill in %s", n, time.Since(seedStart).Round(time.Millisecond))

	rec := &statement.Reconciler{Store: store, Anomalies: store, Retention: store, TempDir: dir, Logger: slog.New(slog.DiscardHandler)}
	resetPeakRSS()
	var (
		rep payment.StatementReport
		err error
	)
	start := time.Now()
	heap := peakHeap(func() {
		rep, err = rec.Run(ctx, statement.Params{App: statement.App{ID: "app", Default: true, Bills: fileBills{url}}, BillDate: "2026-12-01"})
	})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if rep.BillLines != n || rep.Discrepancies != 0 || rep.DiffFen != 0 {
		t.Fatalf("report %+v", rep)
	}
	fmt.Printf("statement bench: %d lines in %s = %.0f lines/s, peak heap +%.1f MiB, peak RSS %s\n",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), float64(heap)/(1<<20), peakRSS())
	if took > 60*time.Second {
		t.Errorf("took %s, the target is under 60 s", took)
	}
}

// seedBench inserts the local side of the generated bill: payment i PAID that day, and
// the refund of every tenth line succeeded.
func seedBench(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	const batch = 1000
	ctx := context.Background()
	now := time.Now().UTC()
	for lo := 0; lo < n; lo += batch {
		var pays, refs strings.Builder
		var pargs, rargs []any
		for i := lo; i < min(lo+batch, n); i++ {
			row := benchRow(i)
			at := row.FinishedAt.UTC()
			if row.Type == "退款" {
				if refs.Len() > 0 {
					refs.WriteByte(',')
				}
				refs.WriteString("(?,?,?,?,?,1,?,?,?,?)")
				rargs = append(rargs, fmt.Sprintf("rn%d", i), "bench", row.OutTradeNo, row.OutRequestNo, -row.AmountFen, row.TradeNo, at, now, now)
				continue
			}
			if pays.Len() > 0 {
				pays.WriteByte(',')
			}
			pays.WriteString("(?,?,?,?,?,'CNY',?,1,?,?,?,?,?)")
			var refunded int64
			if i%10 == 8 {
				refunded = benchRefundFen(i)
			}
			pargs = append(pargs, row.OutTradeNo, "bench", "o"+row.OutTradeNo, row.AmountFen, refunded, row.Subject,
				row.TradeNo, at.Add(time.Hour), at, now, now)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO payments (payment_no, tenant_id, order_id, amount_fen, refunded_fen, currency, subject,
			status, trade_no, expire_at, paid_at, created_at, updated_at) VALUES `+pays.String(), pargs...); err != nil {
			t.Fatal(err)
		}
		if refs.Len() > 0 {
			if _, err := db.ExecContext(ctx, `INSERT INTO refunds (refund_no, tenant_id, payment_no, out_request_no, amount_fen, status,
				trade_no, refunded_at, created_at, updated_at) VALUES `+refs.String(), rargs...); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// resetPeakRSS resets the kernel's VmHWM of this process (Linux).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is VmHWM from /proc/self/status.
func peakRSS() string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
