package statement_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/statement"
)

// benchDay is the day of generated bills.
var benchDay = time.Date(2026, 12, 1, 0, 0, 0, 0, statement.China)

// benchRow is line i of a generated bill: nine payments in ten, then a refund of a
// tenth of the payment before it. Payment i is "B<i>" of 100 + i%1000 fen.
func benchRow(i int) alipaysim.BillRow {
	at := benchDay.Add(time.Duration(i%86400) * time.Second)
	if i%10 == 9 {
		p := i - 1
		return alipaysim.BillRow{TradeNo: fmt.Sprintf("2026120122%018d", p), OutTradeNo: fmt.Sprintf("B%09d", p), Type: alipaysim.BillTypeRefund,
			Subject: "会员年费", CreatedAt: at, FinishedAt: at, Buyer: "sim***@sandbox.test", AmountFen: -benchRefundFen(p), ReceivedFen: -benchRefundFen(p),
			OutRequestNo: fmt.Sprintf("R%09d", p), FeeFen: 0}
	}
	return alipaysim.BillRow{TradeNo: fmt.Sprintf("2026120122%018d", i), OutTradeNo: fmt.Sprintf("B%09d", i), Type: alipaysim.BillTypeTrade,
		Subject: "会员年费", CreatedAt: at, FinishedAt: at, Buyer: "sim***@sandbox.test", AmountFen: benchAmount(i), ReceivedFen: benchAmount(i), FeeFen: -1}
}

func benchAmount(i int) int64    { return 100 + int64(i%1000) }
func benchRefundFen(i int) int64 { return benchAmount(i) / 10 }

// writeBenchBill writes a bill of n lines to a file in dir.
func writeBenchBill(tb testing.TB, dir string, n int) string {
	tb.Helper()
	path := filepath.Join(dir, fmt.Sprintf("bill-%d.zip", n))
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	if err := alipaysim.WriteBill(bw, alipaysim.BillHeader{Account: "20880000000000010156", Date: benchDay, ExportedAt: benchDay.AddDate(0, 0, 1)},
		alipaysim.BillRowsFunc(n, benchRow)); err != nil {
		tb.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// fileBills serves a bill file over a local URL.
type fileBills struct{ url string }

func (b fileBills) BillDownloadURL(context.Context, string) (string, error) { return b.url, nil }

// ruleStore answers every lookup from the generation rule and keeps nothing, so the
// memory measured is the reconciler's own.
type ruleStore struct {
	lookups   atomic.Int64
	anomalies atomic.Int64
}

func (s *ruleStore) LockStatement(ctx context.Context, _, _ string) (context.Context, func(), error) {
	return ctx, func() {}, nil
}
func (s *ruleStore) ClearBillLines(context.Context, string, string) error { return nil }
func (s *ruleStore) PurgeStatementReports(context.Context, string, string, int) (int64, error) {
	return 0, nil
}
func (s *ruleStore) PurgeStatementLines(context.Context, string, int) (int64, error) {
	return 0, nil
}
func (s *ruleStore) StageBillLines(context.Context, string, string, []payment.BillLine) error {
	return nil
}

func (s *ruleStore) PaymentsByNo(_ context.Context, nos []string) (map[string]payment.Payment, error) {
	s.lookups.Add(1)
	out := make(map[string]payment.Payment, len(nos))
	for _, no := range nos {
		var i int
		if _, err := fmt.Sscanf(no, "B%09d", &i); err == nil {
			out[no] = payment.Payment{PaymentNo: no, TenantID: "t", Status: payment.StatusPaid, Amount: payment.Amount(benchAmount(i)), AlipayAppID: "app"}
		}
	}
	return out, nil
}

func (s *ruleStore) RefundsByOutRequestNo(_ context.Context, nos []string) (map[string]payment.Refund, error) {
	out := make(map[string]payment.Refund, len(nos))
	for _, no := range nos {
		var i int
		if _, err := fmt.Sscanf(no, "R%09d", &i); err == nil {
			out[no] = payment.Refund{OutRequestNo: no, Status: payment.RefundSucceeded, Amount: payment.Amount(benchRefundFen(i))}
		}
	}
	return out, nil
}

func (s *ruleStore) EachPaymentNotInBill(context.Context, payment.StatementScope, func(payment.Payment) error) error {
	return nil
}

func (s *ruleStore) EachRefundNotInBill(context.Context, payment.StatementScope, func(payment.Refund) error) error {
	return nil
}

func (s *ruleStore) EachDuplicateBillLine(context.Context, string, string, func(payment.BillLine, int) error) error {
	return nil
}

func (s *ruleStore) LocalStatementTotals(context.Context, payment.StatementScope) (payment.StatementTotals, error) {
	return payment.StatementTotals{}, nil
}

func (s *ruleStore) SaveStatementReport(_ context.Context, r payment.StatementReport) (payment.StatementReport, error) {
	return r, nil
}

func (s *ruleStore) GetStatementReport(context.Context, string, string) (payment.StatementReport, error) {
	return payment.StatementReport{}, payment.ErrNotFound
}

func (s *ruleStore) RecordAnomaly(context.Context, payment.Anomaly) error {
	s.anomalies.Add(1)
	return nil
}

// peakHeap runs fn while sampling the live heap and returns the highest value seen
// above the heap before fn.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var (
		peak atomic.Uint64
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	fn()
	close(stop)
	wg.Wait()
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// TestReconcileMemoryDoesNotGrowWithTheBill reconciles generated bills of 10,000 and
// 100,000 lines (PAYKIT_STATEMENT_BILL_LINES sets the larger: 2000000 is a day of a
// merchant at 23 payments a second); the heap high-water mark of the larger may not
// exceed the smaller's by more than a fixed bound, because the bill is read as a stream
// from a temporary file and matched in fixed-size batches.
func TestReconcileMemoryDoesNotGrowWithTheBill(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a 100,000-line bill")
	}
	dir := t.TempDir()
	small, large := 10_000, 100_000
	if raceEnabled {
		small, large = 5_000, 50_000
	}
	if s := os.Getenv("PAYKIT_STATEMENT_BILL_LINES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= small {
			t.Fatalf("PAYKIT_STATEMENT_BILL_LINES=%q: want a number of lines above %d", s, small)
		}
		large = n
	}
	peaks := map[int]uint64{}
	for _, n := range []int{small, large} {
		url := startFileServer(t, writeBenchBill(t, dir, n))
		st := &ruleStore{}
		rec := &statement.Reconciler{Store: st, Anomalies: st, Retention: st, TempDir: dir, Logger: slog.New(slog.DiscardHandler)}
		var (
			rep payment.StatementReport
			err error
		)
		start := time.Now()
		peaks[n] = peakHeap(func() {
			rep, err = rec.Run(context.Background(), statement.Params{App: statement.App{ID: "app", Bills: fileBills{url}}, BillDate: "2026-12-01"})
		})
		if err != nil {
			t.Fatal(err)
		}
		if rep.BillLines != n || rep.Discrepancies != 0 || st.anomalies.Load() != 0 {
			t.Fatalf("%d lines: report %+v, %d anomalies", n, rep, st.anomalies.Load())
		}
		if want := int64((n + statement.DefaultBatch - 1) / statement.DefaultBatch); st.lookups.Load() != want {
			t.Errorf("%d lines: %d payment lookups, want %d batches", n, st.lookups.Load(), want)
		}
		t.Logf("%d lines in %s: peak heap +%.1f MiB", n, time.Since(start).Round(time.Millisecond), float64(peaks[n])/(1<<20))
	}
	const slack = 8 << 20
	if peaks[large] > peaks[small]+slack {
		t.Fatalf("peak heap grows with the bill: %d B for %d lines, %d B for %d", peaks[small], small, peaks[large], large)
	}
}

// startFileServer serves path at a local URL for the test's life.
func startFileServer(tb testing.TB, path string) string {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, path) }))
	tb.Cleanup(srv.Close)
	return srv.URL + "/bill.zip"
}
