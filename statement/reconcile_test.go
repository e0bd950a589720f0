package statement_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/alipaysim/simtest"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/statement"
)

// day is one test's world: a database, a simulator, the adapter and a tenant of the app.
type day struct {
	t      *testing.T
	ctx    context.Context
	db     *sql.DB
	store  *mysql.Store
	sim    *alipaysim.Simulator
	gw     *alipay.Gateway
	tenant string
	date   string
	rec    *statement.Reconciler
}

func newDay(t *testing.T) *day {
	t.Helper()
	db, _ := testenv.MySQL(t)
	sim, gw := simGateway(t)
	d := &day{t: t, ctx: context.Background(), db: db, store: mysql.NewStore(db), sim: sim, gw: gw, tenant: "stmt_tenant",
		date: time.Now().In(statement.China).Format(statement.DateLayout)}
	if err := d.store.UpsertTenant(d.ctx, payment.Tenant{ID: d.tenant, Name: "t", APIKeyHash: "h", AlipayAppID: simtest.AppID, AlipaySeller: simtest.SellerID}); err != nil {
		t.Fatal(err)
	}
	if err := sim.PublishBills("today"); err != nil {
		t.Fatal(err)
	}
	d.rec = &statement.Reconciler{Store: d.store, Anomalies: d.store, Retention: d.store, Batch: 3, TempDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}
	return d
}

func (d *day) pending(no string, fen payment.Amount, subject string) {
	d.t.Helper()
	_, _, err := d.store.CreatePendingPayment(d.ctx, payment.NewPayment{PaymentNo: no, TenantID: d.tenant, OrderID: "o" + no,
		Amount: fen, Currency: "CNY", Subject: subject, ExpireAt: time.Now().Add(time.Hour)})
	if err != nil {
		d.t.Fatal(err)
	}
}

// paidAtAlipay creates the trade at the simulator and pays it there.
func (d *day) paidAtAlipay(no string, fen payment.Amount, subject string) alipaysim.Trade {
	d.t.Helper()
	if _, err := d.gw.Precreate(d.ctx, payment.TradeRequest{PaymentNo: no, Subject: subject, Amount: fen, ExpireAt: time.Now().Add(time.Hour)}); err != nil {
		d.t.Fatal(err)
	}
	tr, err := d.sim.Pay("", no, "")
	if err != nil {
		d.t.Fatal(err)
	}
	return tr
}

// paid is a payment paid at Alipay and PAID locally.
func (d *day) paid(no string, fen payment.Amount) {
	d.t.Helper()
	d.pending(no, fen, "订单 "+no)
	tr := d.paidAtAlipay(no, fen, "订单 "+no)
	if _, err := d.store.MarkPaid(d.ctx, no, tr.TradeNo, tr.PaidAt); err != nil {
		d.t.Fatal(err)
	}
}

// paidDiscounted is a payment paid at Alipay with a merchant discount and a red packet
// (fen), and PAID locally for its full amount: the local amount is what the buyer was
// asked for, whatever the merchant gave back of it.
func (d *day) paidDiscounted(no string, fen, discount, redPacket payment.Amount) {
	d.t.Helper()
	d.pending(no, fen, "订单 "+no)
	if _, err := d.gw.Precreate(d.ctx, payment.TradeRequest{PaymentNo: no, Subject: "订单 " + no, Amount: fen, ExpireAt: time.Now().Add(time.Hour)}); err != nil {
		d.t.Fatal(err)
	}
	tr, err := d.sim.PayWith("", no, alipaysim.PayOptions{MerchantDiscountFen: int64(discount), RedPacketFen: int64(redPacket)})
	if err != nil {
		d.t.Fatal(err)
	}
	if tr.ReceiptFen != int64(fen-discount-redPacket) {
		d.t.Fatalf("%s: the merchant received %d fen, want %d", no, tr.ReceiptFen, fen-discount-redPacket)
	}
	if _, err := d.store.MarkPaid(d.ctx, no, tr.TradeNo, tr.PaidAt); err != nil {
		d.t.Fatal(err)
	}
}

// refunded refunds fen of a paid payment at Alipay and locally.
func (d *day) refunded(no, refundNo string, fen payment.Amount) {
	d.t.Helper()
	r, _, err := d.store.CreateRefund(d.ctx, payment.NewRefund{RefundNo: refundNo, TenantID: d.tenant, PaymentNo: no, Amount: fen})
	if err != nil {
		d.t.Fatal(err)
	}
	res, err := d.gw.Refund(d.ctx, payment.RefundRequest{PaymentNo: no, OutRequestNo: r.OutRequestNo, Amount: fen})
	if err != nil {
		d.t.Fatal(err)
	}
	if _, err := d.store.MarkRefundSucceeded(d.ctx, d.tenant, refundNo, res.TradeNo, time.Now()); err != nil {
		d.t.Fatal(err)
	}
}

func (d *day) run() payment.StatementReport {
	d.t.Helper()
	rep, err := d.rec.Run(d.ctx, statement.Params{App: statement.App{ID: simtest.AppID, Default: true, Bills: d.gw}, BillDate: d.date})
	if err != nil {
		d.t.Fatal(err)
	}
	return rep
}

func (d *day) anomalies() map[string][]string {
	d.t.Helper()
	all, err := d.store.ListAnomalies(d.ctx, time.Now().Add(-time.Hour), 1000)
	if err != nil {
		d.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, a := range all {
		out[a.Kind] = append(out[a.Kind], a.PaymentNo)
	}
	return out
}

// TestReconcileDay: a clean day with payments and partial and full refunds gives no
// discrepancy; three planted faults give exactly three of the right kinds; running the
// day again records nothing twice and updates the one report.
func TestReconcileDay(t *testing.T) {
	d := newDay(t)
	const n = 7
	var total int64
	for i := range n {
		fen := payment.Amount(100 * (i + 1))
		d.paid(fmt.Sprintf("STMP%d", i), fen)
		total += int64(fen)
	}
	d.refunded("STMP1", "r1a", 50)  // partial
	d.refunded("STMP1", "r1b", 100) // partial, twice on one payment
	d.refunded("STMP4", "r4", 500)  // full

	rep := d.run()
	if rep.Discrepancies != 0 || len(d.anomalies()) != 0 {
		t.Fatalf("clean day: %d discrepancies %v, anomalies %v", rep.Discrepancies, rep.ByKind, d.anomalies())
	}
	if rep.BillTradeCount != n || rep.LocalTradeCount != n || rep.BillTradeFen != total || rep.LocalTradeFen != total ||
		rep.BillRefundCount != 3 || rep.LocalRefundCount != 3 || rep.BillRefundFen != 650 || rep.LocalRefundFen != 650 ||
		rep.DiffFen != 0 || rep.BillLines != n+3 || rep.Status != payment.StatementReconciled {
		t.Fatalf("clean report %+v", rep)
	}

	// 1. Paid at Alipay, left pending locally (long: 长款).
	d.pending("STMF1", 880, "会员")
	d.paidAtAlipay("STMF1", 880, "会员")
	// 2. PAID locally with no trade at Alipay (short: 短款).
	d.pending("STMF2", 770, "ghost")
	if _, err := d.store.MarkPaid(d.ctx, "STMF2", "2026FAKE0001", time.Now()); err != nil {
		t.Fatal(err)
	}
	// 3. A bill line with a changed amount.
	if err := d.sim.CorruptBill(d.date, alipaysim.BillCorruption{Op: alipaysim.CorruptAmount, OutTradeNo: "STMP2", Amount: "3.01"}); err != nil {
		t.Fatal(err)
	}

	want := map[string][]string{
		payment.AnomalyStatementPaidNotLocal:   {"STMF1"},
		payment.AnomalyStatementLocalNotInBill: {"STMF2"},
		payment.AnomalyStatementAmountMismatch: {"STMP2"},
	}
	for runNo := 1; runNo <= 2; runNo++ {
		rep = d.run()
		if rep.Discrepancies != 3 {
			t.Fatalf("run %d: %d discrepancies %v, want 3", runNo, rep.Discrepancies, rep.ByKind)
		}
		got := d.anomalies()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("run %d: anomalies %v, want %v", runNo, got, want)
		}
		if rep.Runs != runNo+1 {
			t.Errorf("run %d: report runs %d, want %d (one row per app and day)", runNo, rep.Runs, runNo+1)
		}
	}
	// Bill: n payments with STMP2 at 301 instead of 300, plus STMF1 (880); local: n + STMF2 (770).
	if rep.BillTradeFen != total+1+880 || rep.LocalTradeFen != total+770 || rep.DiffFen != 1+880-770 {
		t.Errorf("faulty report %+v", rep)
	}
	reports, err := d.store.ListStatementReports(d.ctx, "", d.date, d.date)
	if err != nil || len(reports) != 1 {
		t.Fatalf("reports %v %v, want exactly one", reports, err)
	}
}

// TestReconcileDiscounts: a day of payments with merchant discounts and red packets, and
// their partial and full refunds, reconciles clean (订单金额 against the local amounts,
// 商家实收 against them less the line's discounts, the footer on 商家实收 and the summary
// on every column); a 商家实收 a fen off is one discrepancy of its own kind, for a
// payment line and for a refund line alike.
func TestReconcileDiscounts(t *testing.T) {
	d := newDay(t)
	d.paidDiscounted("STMD1", 10000, 1000, 500)
	d.paidDiscounted("STMD2", 999, 0, 99)
	d.paidDiscounted("STMD3", 500, 1, 0)
	d.paid("STMD4", 300)
	d.refunded("STMD1", "rd1", 3000) // gives back 300 + 150 of the discounts
	d.refunded("STMD1", "rd2", 7000) // full: the rest, 700 + 350
	d.refunded("STMD2", "rd3", 100)  // 9 of the red packet: the merchant gives back 91
	d.refunded("STMD3", "rd4", 500)

	rep := d.run()
	if rep.Discrepancies != 0 || len(d.anomalies()) != 0 {
		t.Fatalf("discounted day: %d discrepancies %v, anomalies %v", rep.Discrepancies, rep.ByKind, d.anomalies())
	}
	if rep.BillTradeCount != 4 || rep.BillTradeFen != 11799 || rep.LocalTradeFen != 11799 ||
		rep.BillRefundCount != 4 || rep.BillRefundFen != 10600 || rep.LocalRefundFen != 10600 || rep.DiffFen != 0 {
		t.Fatalf("discounted report %+v", rep)
	}

	rd3, err := d.store.GetRefund(d.ctx, d.tenant, "rd3")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.sim.CorruptBill(d.date, alipaysim.BillCorruption{Op: alipaysim.CorruptReceived, OutTradeNo: "STMD1", Amount: "84.99"}); err != nil {
		t.Fatal(err)
	}
	rep = d.run()
	want := map[string][]string{payment.AnomalyStatementDiscountMismatch: {"STMD1"}}
	if got := d.anomalies(); rep.Discrepancies != 1 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("商家实收 a fen short: %d discrepancies %v, anomalies %v, want %v", rep.Discrepancies, rep.ByKind, got, want)
	}
	if rep.DiffFen != 0 {
		t.Errorf("the bill's 订单金额 still match: diff %d fen", rep.DiffFen)
	}

	if err := d.sim.CorruptBill(d.date, alipaysim.BillCorruption{Op: alipaysim.CorruptReceived, OutTradeNo: "STMD2", OutRequestNo: rd3.OutRequestNo, Amount: "0.90"}); err != nil {
		t.Fatal(err)
	}
	rep = d.run()
	want[payment.AnomalyStatementRefundDiscountMismatch] = []string{rd3.OutRequestNo}
	if got := d.anomalies(); rep.Discrepancies != 2 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("a refund's 商家实收 a fen short too: %d discrepancies %v, anomalies %v, want %v", rep.Discrepancies, rep.ByKind, got, want)
	}
}

// TestReconcileRefundOneSide: a refund Alipay made that is not SUCCEEDED locally, and
// one that succeeded locally but is not in the bill, are each their own kind; a line of
// an out_trade_no this system never created is unknown, and a payment on two lines is a
// duplicate (the added line, another trade_no, is a trade mismatch too). A refund's
// anomalies are about its out_request_no.
func TestReconcileRefundOneSide(t *testing.T) {
	d := newDay(t)
	d.paid("STMR1", 1000)
	d.paid("STMR2", 1000)
	// Alipay refunded; the local refund stays pending.
	r, _, err := d.store.CreateRefund(d.ctx, payment.NewRefund{RefundNo: "ra", TenantID: d.tenant, PaymentNo: "STMR1", Amount: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.gw.Refund(d.ctx, payment.RefundRequest{PaymentNo: "STMR1", OutRequestNo: r.OutRequestNo, Amount: 100}); err != nil {
		t.Fatal(err)
	}
	// Succeeded locally; Alipay never saw it.
	r2, _, err := d.store.CreateRefund(d.ctx, payment.NewRefund{RefundNo: "rb", TenantID: d.tenant, PaymentNo: "STMR2", Amount: 200})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.store.MarkRefundSucceeded(d.ctx, d.tenant, "rb", "T", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := d.sim.CorruptBill(d.date, alipaysim.BillCorruption{Op: alipaysim.CorruptAdd, OutTradeNo: "NOTOURS1", Amount: "5.00"}); err != nil {
		t.Fatal(err)
	}
	// The same payment twice in the bill.
	if err := d.sim.CorruptBill(d.date, alipaysim.BillCorruption{Op: alipaysim.CorruptAdd, OutTradeNo: "STMR2", Amount: "10.00"}); err != nil {
		t.Fatal(err)
	}
	rep := d.run()
	want := map[string][]string{
		payment.AnomalyStatementDuplicateLine:   {"STMR2"},
		payment.AnomalyStatementRefundNotLocal:  {r.OutRequestNo},
		payment.AnomalyStatementRefundNotInBill: {r2.OutRequestNo},
		payment.AnomalyStatementUnknownTrade:    {"NOTOURS1"},
		payment.AnomalyStatementTradeMismatch:   {"STMR2"},
	}
	if got := d.anomalies(); fmt.Sprint(got) != fmt.Sprint(want) || rep.Discrepancies != 5 {
		t.Fatalf("anomalies %v (report %v), want %v", got, rep.ByKind, want)
	}
	// A refund line's anomaly is about its refund, as every anomaly about a refund is; a
	// payment line's about the payment as a whole.
	all, err := d.store.ListAnomalies(d.ctx, time.Now().Add(-time.Hour), 1000)
	if err != nil {
		t.Fatal(err)
	}
	subjects := map[string]string{}
	for _, a := range all {
		subjects[a.Kind] = a.Subject
	}
	wantSubjects := map[string]string{
		payment.AnomalyStatementDuplicateLine:   "",
		payment.AnomalyStatementRefundNotLocal:  r.OutRequestNo,
		payment.AnomalyStatementRefundNotInBill: r2.OutRequestNo,
		payment.AnomalyStatementUnknownTrade:    "",
		payment.AnomalyStatementTradeMismatch:   "",
	}
	if fmt.Sprint(subjects) != fmt.Sprint(wantSubjects) {
		t.Fatalf("subjects %v, want %v", subjects, wantSubjects)
	}
}

// TestReconcileNotYetPublished: today before publication is ErrBillNotAvailable, and
// nothing is written.
func TestReconcileNotYetPublished(t *testing.T) {
	d := newDay(t)
	if err := d.sim.PublishBills(""); err != nil {
		t.Fatal(err)
	}
	_, err := d.rec.Run(d.ctx, statement.Params{App: statement.App{ID: simtest.AppID, Default: true, Bills: d.gw}, BillDate: d.date})
	if !statement.IsNotAvailable(err) {
		t.Fatalf("err %v, want not available", err)
	}
	if _, err := d.store.GetStatementReport(d.ctx, simtest.AppID, d.date); err == nil {
		t.Fatal("a report was written for a day without a bill")
	}
}

// TestReconcileOneRunPerDay: while a run of an app's day holds its lock, another run of
// the same day is refused (ECONFLICT, retried by its activity) and changes nothing.
func TestReconcileOneRunPerDay(t *testing.T) {
	d := newDay(t)
	d.paid("STMO1", 100)
	_, unlock, err := d.store.LockStatement(d.ctx, simtest.AppID, d.date)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.rec.Run(d.ctx, statement.Params{App: statement.App{ID: simtest.AppID, Default: true, Bills: d.gw}, BillDate: d.date})
	if payment.ErrorCode(err) != payment.ECONFLICT {
		t.Fatalf("second run: %v, want ECONFLICT", err)
	}
	unlock()
	if rep := d.run(); rep.Discrepancies != 0 || rep.Runs != 1 {
		t.Fatalf("after the lock: %+v", rep)
	}
}

// TestReconcileNoBill: a day Alipay never published is reconciled as empty, so every
// local PAID payment and succeeded refund of it shows as absent from the bill.
func TestReconcileNoBill(t *testing.T) {
	d := newDay(t)
	d.paid("STMN1", 100)
	d.refunded("STMN1", "rn", 10)
	rep, err := d.rec.Run(d.ctx, statement.Params{App: statement.App{ID: simtest.AppID, Default: true}, BillDate: d.date, NoBill: true})
	if err != nil {
		t.Fatal(err)
	}
	got := d.anomalies()
	if rep.Status != payment.StatementNoBill || rep.Discrepancies != 2 || len(got[payment.AnomalyStatementLocalNotInBill]) != 1 ||
		len(got[payment.AnomalyStatementRefundNotInBill]) != 1 || rep.DiffFen != -90 {
		t.Fatalf("no bill: %+v, anomalies %v", rep, got)
	}
}

// TestReconcilePurgesOldLines: once a day is reconciled, its run deletes the staged lines
// of every app's days older than the retention, and keeps the younger ones and its own.
func TestReconcilePurgesOldLines(t *testing.T) {
	d := newDay(t)
	d.paid("STMK1", 100)
	today, _, err := statement.DayRange(d.date)
	if err != nil {
		t.Fatal(err)
	}
	old := today.AddDate(0, 0, -36).Format(statement.DateLayout)
	kept := today.AddDate(0, 0, -34).Format(statement.DateLayout)
	for _, s := range []struct{ app, date string }{{simtest.AppID, old}, {"other-app", old}, {simtest.AppID, kept}, {"other-app", kept}} {
		lines := []payment.BillLine{{LineNo: 1, Kind: payment.BillLineTrade, OutTradeNo: "X1", Amount: 1}, {LineNo: 2, Kind: payment.BillLineTrade, OutTradeNo: "X2", Amount: 1}}
		if err := d.store.StageBillLines(d.ctx, s.app, s.date, lines); err != nil {
			t.Fatal(err)
		}
	}
	d.rec.Now = func() time.Time { return today.Add(12 * time.Hour) }
	if rep := d.run(); rep.Discrepancies != 0 {
		t.Fatalf("report %+v", rep)
	}
	count := func(date string) int {
		t.Helper()
		var n int
		if err := d.db.QueryRowContext(d.ctx, `SELECT COUNT(*) FROM statement_lines WHERE bill_date = ?`, date).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if o, k, own := count(old), count(kept), count(d.date); o != 0 || k != 4 || own != 1 {
		t.Fatalf("after the run: %d lines of %s (want 0), %d of %s (want 4), %d of the day (want 1)", o, old, k, kept, own)
	}
}

// TestReconcilePurgeSkipsARunningDay: the purge after a run leaves alone the lines of an
// old day whose run (an operator re-running it) holds its lock, and takes the others.
func TestReconcilePurgeSkipsARunningDay(t *testing.T) {
	d := newDay(t)
	d.paid("STMK2", 100)
	today, _, err := statement.DayRange(d.date)
	if err != nil {
		t.Fatal(err)
	}
	held := today.AddDate(0, 0, -40).Format(statement.DateLayout)
	old := today.AddDate(0, 0, -39).Format(statement.DateLayout)
	for _, date := range []string{held, old} {
		lines := []payment.BillLine{{LineNo: 1, Kind: payment.BillLineTrade, OutTradeNo: "X1", Amount: 1}}
		if err := d.store.StageBillLines(d.ctx, simtest.AppID, date, lines); err != nil {
			t.Fatal(err)
		}
	}
	_, unlock, err := d.store.LockStatement(d.ctx, simtest.AppID, held)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	d.rec.Now = func() time.Time { return today.Add(12 * time.Hour) }
	d.run()
	count := func(date string) int {
		t.Helper()
		var n int
		if err := d.db.QueryRowContext(d.ctx, `SELECT COUNT(*) FROM statement_lines WHERE bill_date = ?`, date).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if h, o := count(held), count(old); h != 1 || o != 0 {
		t.Fatalf("after the run: %d lines of the held day %s (want 1), %d of %s (want 0)", h, held, o, old)
	}
}

// TestReconcileTradeMismatch: a bill line matches a local payment only when its
// out_trade_no, its trade_no and the app agree. A payment whose local trade_no is not the
// bill's is a trade mismatch (and, its own trade absent from the bill, not in the bill);
// the same bill read as another app's (a second charge of the same order numbers there)
// has every line, payments and refunds alike, a trade mismatch, none matched.
func TestReconcileTradeMismatch(t *testing.T) {
	d := newDay(t)
	d.paid("STMT1", 100)
	d.refunded("STMT1", "rt1", 10)
	d.pending("STMT2", 200, "会员")
	tr := d.paidAtAlipay("STMT2", 200, "会员")
	if _, err := d.store.MarkPaid(d.ctx, "STMT2", "2026OTHERTRADE0001", tr.PaidAt); err != nil {
		t.Fatal(err)
	}
	rt1, err := d.store.GetRefund(d.ctx, d.tenant, "rt1")
	if err != nil {
		t.Fatal(err)
	}
	sorted := func(m map[string][]string) string {
		for _, v := range m {
			slices.Sort(v)
		}
		return fmt.Sprint(m)
	}

	rep := d.run()
	want := map[string][]string{
		payment.AnomalyStatementTradeMismatch:  {"STMT2"},
		payment.AnomalyStatementLocalNotInBill: {"STMT2"},
	}
	if got := d.anomalies(); sorted(got) != sorted(want) || rep.Discrepancies != 2 {
		t.Fatalf("a local trade_no other than the bill's: anomalies %v (report %v), want %v", got, rep.ByKind, want)
	}

	other := statement.App{ID: "2021000000009999", Bills: d.gw}
	rep, err = d.rec.Run(d.ctx, statement.Params{App: other, BillDate: d.date})
	if err != nil {
		t.Fatal(err)
	}
	if rep.ByKind[payment.AnomalyStatementTradeMismatch] != 3 || rep.Discrepancies != 3 {
		t.Fatalf("the bill as another app's: %v, want its 3 lines trade mismatches", rep.ByKind)
	}
	want[payment.AnomalyStatementTradeMismatch] = []string{"STMT1", "STMT2", rt1.OutRequestNo}
	if got := d.anomalies(); sorted(got) != sorted(want) {
		t.Fatalf("the bill as another app's: anomalies %v, want %v", got, want)
	}
}

// TestReconcileMalformedBillRecordsNothing: a bill whose lines disagree with its footer,
// or with its summary file, is refused as malformed before any of its lines is matched:
// lines that would each be an anomaly (out_trade_nos paykit never created), more than a
// batch of them, record none, and no report is written.
func TestReconcileMalformedBillRecordsNothing(t *testing.T) {
	at := benchDay.Add(10 * time.Hour)
	var rows []alipaysim.BillRow
	for i := range 4 {
		rows = append(rows, alipaysim.BillRow{TradeNo: fmt.Sprintf("20261201220000000000000000%02d", i), OutTradeNo: fmt.Sprintf("NOTOURSM%d", i),
			Type: alipaysim.BillTypeTrade, Subject: "x", CreatedAt: at, FinishedAt: at, AmountFen: 100, ReceivedFen: 100})
	}
	for _, c := range []struct{ name, suffix, old, new string }{
		{"footer", "业务明细.csv", "#交易合计：4笔", "#交易合计：5笔"},
		{"summary", "业务明细(汇总).csv", ",合计,4,0,4.00,", ",合计,4,0,4.01,"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDay(t)
			path := writeBillZip(t, edit(t, simBillEntries(t, rows...), c.suffix, c.old, c.new))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, path) }))
			defer srv.Close()
			_, err := d.rec.Run(d.ctx, statement.Params{App: statement.App{ID: simtest.AppID, Default: true, Bills: fileBills{srv.URL}}, BillDate: d.date})
			if !errors.Is(err, statement.ErrMalformedBill) {
				t.Fatalf("run: %v, want a malformed bill", err)
			}
			if got := d.anomalies(); len(got) != 0 {
				t.Fatalf("a bill refused as malformed left anomalies %v", got)
			}
			if _, err := d.store.GetStatementReport(d.ctx, simtest.AppID, d.date); err == nil {
				t.Fatal("a report was written for a malformed bill")
			}
		})
	}
}

// TestReconcileQuietDay: Alipay has no bill for a day (isp.bill_not_exist). Once the day
// is QuietAfter past its end with no payment paid and no refund succeeded on the app
// locally, it is a quiet day: reconciled at once with status quiet and no discrepancy,
// not waited for until the give-up time. Before that time, or with local money on the
// day, it is still a bill not yet published.
func TestReconcileQuietDay(t *testing.T) {
	d := newDay(t)
	if err := d.sim.PublishBills(""); err != nil {
		t.Fatal(err)
	}
	_, dayEnd, err := statement.DayRange(d.date)
	if err != nil {
		t.Fatal(err)
	}
	run := func(at time.Time) (payment.StatementReport, error) {
		d.rec.Now = func() time.Time { return at }
		return d.rec.Run(d.ctx, statement.Params{App: statement.App{ID: simtest.AppID, Default: true, Bills: d.gw}, BillDate: d.date})
	}
	if _, err := run(dayEnd.Add(statement.DefaultQuietAfter - time.Minute)); !statement.IsNotAvailable(err) {
		t.Fatalf("before the quiet time: %v, want the bill not yet published", err)
	}
	rep, err := run(dayEnd.Add(statement.DefaultQuietAfter))
	if err != nil || rep.Status != payment.StatementQuiet || rep.Discrepancies != 0 || rep.LocalTradeCount != 0 {
		t.Fatalf("a day without trades: %+v, %v; want it reconciled quiet with nothing found", rep, err)
	}
	// Money on the day locally: its bill must come, so it keeps waiting.
	d.paid("STMQ1", 100)
	if _, err := run(dayEnd.Add(statement.DefaultQuietAfter + time.Hour)); !statement.IsNotAvailable(err) {
		t.Fatalf("a day with a local PAID payment and no bill: %v, want the bill still waited for", err)
	}
}

// TestReconcilePurgesOldReports: a run deletes its own app's reports older than
// statement.ReportRetention (400 days), keeps the younger ones, and leaves other apps'
// reports to their own runs.
func TestReconcilePurgesOldReports(t *testing.T) {
	d := newDay(t)
	today, _, err := statement.DayRange(d.date)
	if err != nil {
		t.Fatal(err)
	}
	old := today.AddDate(0, 0, -401).Format(statement.DateLayout)
	kept := today.AddDate(0, 0, -399).Format(statement.DateLayout)
	for _, s := range []struct{ app, date string }{{simtest.AppID, old}, {"other-app", old}, {simtest.AppID, kept}} {
		if _, err := d.store.SaveStatementReport(d.ctx, payment.StatementReport{AppID: s.app, BillDate: s.date, Status: payment.StatementReconciled,
			StartedAt: today, FinishedAt: today, ByKind: map[string]int{}}); err != nil {
			t.Fatal(err)
		}
	}
	d.rec.Now = func() time.Time { return today.Add(12 * time.Hour) }
	d.run()
	has := func(app, date string) bool {
		_, err := d.store.GetStatementReport(d.ctx, app, date)
		return err == nil
	}
	if has(simtest.AppID, old) || !has(simtest.AppID, kept) || !has("other-app", old) || !has(simtest.AppID, d.date) {
		t.Fatalf("after the run: old %v (want gone), kept %v, other app's old %v, the day's own %v (want all there)",
			has(simtest.AppID, old), has(simtest.AppID, kept), has("other-app", old), has(simtest.AppID, d.date))
	}
}
