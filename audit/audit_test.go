package audit_test

import (
	"context"
	"database/sql"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/alipaysim/simtest"
	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

const tenantID = "t_audit"

// env is a fresh database, a simulator behind real HTTP, the Alipay gateway pointed at
// it, and an auditor reading them with small pages.
type env struct {
	st  *mysql.Store
	db  *sql.DB
	sim *alipaysim.Simulator
	gw  payment.Gateway
	wf  *workflows
	aud *audit.Auditor
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	db, _ := testenv.MySQL(tb)
	st := mysql.NewStore(db)
	tb.Cleanup(func() { _ = st.Close() })
	sim, srv := simtest.Start(tb, nil)
	keys := simtest.Keys(tb)
	gw, err := alipay.New(alipay.Config{
		AppID: simtest.AppID, SellerID: simtest.SellerID,
		AppPrivateKeyPEM: keys.AppPrivateKeyPEM, AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM,
		GatewayURL: srv.URL + alipaysim.GatewayPath, NotifyURL: "http://127.0.0.1:1/callbacks/alipay",
		Timeout: 5 * time.Second,
	})
	if err != nil {
		tb.Fatal(err)
	}
	wf := &workflows{running: map[string]bool{}}
	return &env{st: st, db: db, sim: sim, gw: gw, wf: wf,
		aud: &audit.Auditor{Store: st, Gateway: gw, Workflows: wf, PageSize: 3}}
}

func (e *env) exec(tb testing.TB, query string, args ...any) {
	tb.Helper()
	if _, err := e.db.ExecContext(context.Background(), query, args...); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
}

// create inserts a pending payment of 9.90 CNY.
func (e *env) create(tb testing.TB, orderID, paymentNo string, repurchase bool) payment.Payment {
	tb.Helper()
	p, existed, err := e.st.CreatePendingPayment(context.Background(), payment.NewPayment{
		PaymentNo: paymentNo, TenantID: tenantID, OrderID: orderID, Amount: 990, Currency: "CNY",
		Subject: "audit " + orderID, Repurchase: repurchase, ExpireAt: time.Now().Add(15 * time.Minute),
		WorkflowID: payment.WorkflowID(tenantID, orderID),
	})
	if err != nil || existed {
		tb.Fatalf("create %s: existed=%v err=%v", paymentNo, existed, err)
	}
	return p
}

// payAtAlipay precreates the trade for amount and pays it as the buyer; it returns
// Alipay's trade_no.
func (e *env) payAtAlipay(tb testing.TB, paymentNo string, amount payment.Amount) string {
	tb.Helper()
	e.openTrade(tb, paymentNo, amount)
	tr, err := e.sim.Pay(simtest.AppID, paymentNo, "")
	if err != nil {
		tb.Fatalf("pay %s at the simulator: %v", paymentNo, err)
	}
	return tr.TradeNo
}

func (e *env) openTrade(tb testing.TB, paymentNo string, amount payment.Amount) {
	tb.Helper()
	if _, err := e.gw.Open(context.Background(), payment.TradeRequest{
		PaymentNo: paymentNo, Method: payment.MethodQR, Subject: "audit", Amount: amount, ExpireAt: time.Now().Add(15 * time.Minute),
	}); err != nil {
		tb.Fatalf("precreate %s: %v", paymentNo, err)
	}
}

func (e *env) markPaid(tb testing.TB, paymentNo, tradeNo string) {
	tb.Helper()
	if tr, err := e.st.MarkPaid(context.Background(), paymentNo, tradeNo, time.Time{}); err != nil || !tr.Changed {
		tb.Fatalf("mark paid %s: changed=%v err=%v", paymentNo, tr.Changed, err)
	}
}

func (e *env) grant(tb testing.TB, p payment.Payment) {
	tb.Helper()
	if _, err := e.st.GrantBenefit(context.Background(), payment.BenefitGrant{
		TenantID: p.TenantID, PaymentNo: p.PaymentNo, OrderID: p.OrderID, Benefit: "vip"}); err != nil {
		tb.Fatal(err)
	}
}

func (e *env) deliver(tb testing.TB, paymentNo string) {
	tb.Helper()
	if err := e.st.MarkEventDelivered(context.Background(), mysql.EventID(paymentNo, payment.EventPaymentPaid)); err != nil {
		tb.Fatal(err)
	}
}

// paidAgo moves a PAID payment's transition (and its creation) back by d.
func (e *env) paidAgo(tb testing.TB, paymentNo string, d time.Duration) {
	tb.Helper()
	at := time.Now().Add(-d).UTC()
	e.exec(tb, "UPDATE payments SET paid_at = ?, updated_at = ?, created_at = ? WHERE payment_no = ?",
		at, at, at.Add(-time.Minute), paymentNo)
}

// expiredAgo moves a pending payment's expiry back by d.
func (e *env) expiredAgo(tb testing.TB, paymentNo string, d time.Duration) {
	tb.Helper()
	e.exec(tb, "UPDATE payments SET expire_at = ? WHERE payment_no = ?", time.Now().Add(-d).UTC(), paymentNo)
}

// paid plants a payment that is PAID and consistent everywhere: the trade is paid at
// Alipay for the same amount, the benefit is granted and the event delivered, 2 h ago.
func (e *env) paid(tb testing.TB, orderID, paymentNo string, repurchase bool) payment.Payment {
	tb.Helper()
	p := e.create(tb, orderID, paymentNo, repurchase)
	e.markPaid(tb, paymentNo, e.payAtAlipay(tb, paymentNo, p.Amount))
	e.grant(tb, p)
	e.deliver(tb, paymentNo)
	e.paidAgo(tb, paymentNo, 2*time.Hour)
	return p
}

func (e *env) run(tb testing.TB) audit.Report {
	tb.Helper()
	rep, err := e.aud.Run(context.Background(), audit.Params{
		Since: time.Now().Add(-24 * time.Hour), Until: time.Now().Add(time.Minute),
		GrantSLA: 10 * time.Minute, WebhookSLA: time.Hour, PendingGrace: 5 * time.Minute,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return rep
}

// byKind maps each kind to the payment_nos reported with it, sorted.
func byKind(rep audit.Report) map[string][]string {
	m := map[string][]string{}
	for _, f := range rep.Findings {
		m[f.Kind] = append(m[f.Kind], f.PaymentNo)
	}
	for _, nos := range m {
		sort.Strings(nos)
	}
	return m
}

func finding(tb testing.TB, rep audit.Report, kind, paymentNo string) audit.Finding {
	tb.Helper()
	for _, f := range rep.Findings {
		if f.Kind == kind && f.PaymentNo == paymentNo {
			return f
		}
	}
	tb.Fatalf("no %s finding for %s", kind, paymentNo)
	return audit.Finding{}
}

// TestAudit_ReportsEachPlantedFindingOnce plants one case of every finding next to
// controls that look alike but are fine, and checks that each case is reported exactly
// once with its kind and nothing else is.
func TestAudit_ReportsEachPlantedFindingOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	// (a) Two PAID payments of one order, the second without the re-purchase opt-in (as
	// a bug that bypassed the store's refusal would leave them); and an order paid again
	// with the opt-in, which is fine.
	e.paid(t, "dup", "PDUP1", false)
	e.paid(t, "dup", "PDUP2", true)
	e.exec(t, "UPDATE payments SET repurchase = 0 WHERE payment_no = 'PDUP2'")
	e.paid(t, "rep", "PREP1", false)
	e.paid(t, "rep", "PREP2", true)

	// (b) Paid at Alipay, closed locally, already recorded by the callback path; and paid
	// at Alipay, still pending long after expiry under a running workflow.
	e.create(t, "lost", "PLOST", false)
	lostTradeNo := e.payAtAlipay(t, "PLOST", 990)
	if _, err := e.st.ClosePayment(ctx, "PLOST", "expired"); err != nil {
		t.Fatal(err)
	}
	if err := e.st.RecordAnomaly(ctx, payment.Anomaly{Kind: "paid_after_close", TenantID: tenantID, PaymentNo: "PLOST",
		TradeNo: lostTradeNo, Amount: 990, Detail: "alipay notified TRADE_SUCCESS"}); err != nil {
		t.Fatal(err)
	}
	lost2 := e.create(t, "lost2", "PLOST2", false)
	e.payAtAlipay(t, "PLOST2", 990)
	e.expiredAgo(t, "PLOST2", time.Hour)
	e.wf.set(lost2.WorkflowID)

	// (c) PAID 20 min ago without a grant; and PAID a minute ago without one (within SLA).
	p := e.create(t, "nogrant", "PNOGRANT", false)
	e.markPaid(t, p.PaymentNo, e.payAtAlipay(t, p.PaymentNo, p.Amount))
	e.deliver(t, p.PaymentNo)
	e.paidAgo(t, p.PaymentNo, 20*time.Minute)
	p = e.create(t, "grantsoon", "PGRANTSOON", false)
	e.markPaid(t, p.PaymentNo, e.payAtAlipay(t, p.PaymentNo, p.Amount))
	e.deliver(t, p.PaymentNo)
	e.paidAgo(t, p.PaymentNo, time.Minute)

	// (d) PAID 2 h ago with the event undelivered after failed attempts; the same with the
	// event dead (given up on: no one sends it again); PAID 2 h ago with no event row at
	// all; and PAID 10 min ago with the event not delivered yet (within SLA).
	p = e.create(t, "undelivered", "PUNDELIVERED", false)
	e.markPaid(t, p.PaymentNo, e.payAtAlipay(t, p.PaymentNo, p.Amount))
	e.grant(t, p)
	if _, _, err := e.st.MarkEventAttempt(ctx, mysql.EventID(p.PaymentNo, payment.EventPaymentPaid), "merchant answered HTTP 503", time.Now(), payment.EventRetry{}); err != nil {
		t.Fatal(err)
	}
	e.paidAgo(t, p.PaymentNo, 2*time.Hour)
	p = e.create(t, "dead", "PDEAD", false)
	e.markPaid(t, p.PaymentNo, e.payAtAlipay(t, p.PaymentNo, p.Amount))
	e.grant(t, p)
	if _, died, err := e.st.MarkEventAttempt(ctx, mysql.EventID(p.PaymentNo, payment.EventPaymentPaid), "merchant answered HTTP 410", time.Now(),
		payment.EventRetry{MaxAttempts: 1}); err != nil || !died {
		t.Fatalf("make PDEAD's event dead: died=%v %v", died, err)
	}
	e.paidAgo(t, p.PaymentNo, 2*time.Hour)
	e.paid(t, "noevent", "PNOEVENT", false)
	e.exec(t, "DELETE FROM payment_events WHERE payment_no = 'PNOEVENT'")
	p = e.create(t, "deliversoon", "PDELIVERSOON", false)
	e.markPaid(t, p.PaymentNo, e.payAtAlipay(t, p.PaymentNo, p.Amount))
	e.grant(t, p)
	e.paidAgo(t, p.PaymentNo, 10*time.Minute)

	// (e) Pending 10 min past expiry with no workflow; the same under a running workflow;
	// and pending before its expiry.
	e.create(t, "stuck", "PSTUCK", false)
	e.expiredAgo(t, "PSTUCK", 10*time.Minute)
	running := e.create(t, "running", "PRUNNING", false)
	e.expiredAgo(t, "PRUNNING", 10*time.Minute)
	e.wf.set(running.WorkflowID)
	e.create(t, "fresh", "PFRESH", false)

	// (f) PAID locally for 9.90 while Alipay's trade was paid for 19.90.
	p = e.create(t, "amount", "PAMOUNT", false)
	e.markPaid(t, p.PaymentNo, e.payAtAlipay(t, p.PaymentNo, 1990))
	e.grant(t, p)
	e.deliver(t, p.PaymentNo)
	e.paidAgo(t, p.PaymentNo, 2*time.Hour)

	// Fine: closed with the trade still open at Alipay, and closed before the cashier was
	// ever opened (no trade at all).
	e.create(t, "closed", "PCLOSED", false)
	e.openTrade(t, "PCLOSED", 990)
	if _, err := e.st.ClosePayment(ctx, "PCLOSED", "cancelled"); err != nil {
		t.Fatal(err)
	}
	e.create(t, "neveropened", "PNEVEROPENED", false)
	if _, err := e.st.ClosePayment(ctx, "PNEVEROPENED", "expired"); err != nil {
		t.Fatal(err)
	}

	// (g) A verified notification acknowledged 20 min ago and still unsettled, on a payment
	// in flight; one acknowledged a minute ago (within the SLA); and one settled long ago.
	e.create(t, "inbox", "PINBOX", false)
	e.create(t, "inboxsoon", "PINBOXSOON", false)
	for _, n := range []struct {
		no  string
		ago time.Duration
	}{{"PINBOX", 20 * time.Minute}, {"PINBOXSOON", time.Minute}, {"PREP1", 3 * time.Hour}} {
		at := time.Now().Add(-n.ago).UTC()
		rec := payment.ChannelNotification{Channel: "alipay", NotifyID: "N" + n.no, PaymentNo: n.no, TradeNo: "T" + n.no,
			Verified: true, ReceivedAt: at, DispatchDueAt: at.Add(30 * time.Second)}
		rec.KeepRaw("notify_id=N" + n.no)
		stored, _, err := e.st.RecordNotification(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		if n.no == "PREP1" {
			if err := e.st.SettleNotification(ctx, stored.ID, "already_paid"); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Outside the window: PAID with nothing else, created three days ago.
	e.create(t, "old", "POLD", false)
	e.markPaid(t, "POLD", "")
	old := time.Now().Add(-72 * time.Hour).UTC()
	e.exec(t, "UPDATE payments SET created_at = ?, updated_at = ? WHERE payment_no = 'POLD'", old, old)

	rep := e.run(t)
	want := map[string][]string{
		audit.KindDouble:                {"PDUP2"},
		audit.KindLost:                  {"PLOST", "PLOST2"},
		audit.KindMissingGrant:          {"PNOGRANT"},
		audit.KindUndeliveredEvent:      {"PDEAD", "PNOEVENT", "PUNDELIVERED"},
		audit.KindStuckPending:          {"PSTUCK"},
		audit.KindAmountMismatch:        {"PAMOUNT"},
		audit.KindUnsettledNotification: {"PINBOX"},
	}
	got := byKind(rep)
	if len(got) != len(want) {
		t.Errorf("kinds reported: %v, want %v", got, want)
	}
	for kind, nos := range want {
		if !slices.Equal(got[kind], nos) {
			t.Errorf("%s: %v, want %v", kind, got[kind], nos)
		}
	}
	for _, f := range rep.Findings {
		if f.TenantID != tenantID || f.OrderID == "" || f.AmountFen != 990 || f.Detail == "" {
			t.Errorf("finding lacks its identity or amount: %+v", f)
		}
	}
	if rep.Payments != 20 || rep.InFlight != 3 || rep.Queried != 17 {
		t.Errorf("report counted %d payments, %d in flight, %d queried; want 20, 3 and 17 (POLD is outside the window)",
			rep.Payments, rep.InFlight, rep.Queried)
	}

	if f := finding(t, rep, audit.KindDouble, "PDUP2"); !strings.Contains(f.Detail, "PDUP1") {
		t.Errorf("double detail does not name the first payment: %q", f.Detail)
	}
	if f := finding(t, rep, audit.KindLost, "PLOST"); !strings.Contains(f.Detail, "paid_after_close") ||
		f.TradeNo != lostTradeNo || f.AlipayAmountFen != 990 || f.Status != payment.StatusClosed {
		t.Errorf("lost finding should carry Alipay's trade and note the recorded anomaly: %+v", f)
	}
	if f := finding(t, rep, audit.KindLost, "PLOST2"); !strings.Contains(f.Detail, "no anomaly records it") {
		t.Errorf("lost detail without an anomaly: %q", f.Detail)
	}
	if f := finding(t, rep, audit.KindUndeliveredEvent, "PUNDELIVERED"); !strings.Contains(f.Detail, "HTTP 503") {
		t.Errorf("undelivered detail lacks the last error: %q", f.Detail)
	}
	if f := finding(t, rep, audit.KindUndeliveredEvent, "PDEAD"); !strings.Contains(f.Detail, "dead after 1 attempts") || !strings.Contains(f.Detail, "HTTP 410") {
		t.Errorf("dead event detail: %q", f.Detail)
	}
	if f := finding(t, rep, audit.KindUndeliveredEvent, "PNOEVENT"); !strings.Contains(f.Detail, "no payment.paid event row") {
		t.Errorf("missing event detail: %q", f.Detail)
	}
	if f := finding(t, rep, audit.KindAmountMismatch, "PAMOUNT"); f.AlipayAmountFen != 1990 || !strings.Contains(f.Detail, "19.90") {
		t.Errorf("amount mismatch finding: %+v", f)
	}
	if f := finding(t, rep, audit.KindUnsettledNotification, "PINBOX"); !strings.Contains(f.Detail, "20m") || f.Status != payment.StatusPending {
		t.Errorf("unsettled notification finding: %+v", f)
	}
	if f := finding(t, rep, audit.KindStuckPending, "PSTUCK"); !strings.Contains(f.Detail, payment.WorkflowID(tenantID, "stuck")) {
		t.Errorf("stuck detail does not name the workflow: %q", f.Detail)
	}
}

// TestAudit_CleanDatabaseHasNoFindings audits an empty database, then one holding only
// payments that are consistent everywhere.
func TestAudit_CleanDatabaseHasNoFindings(t *testing.T) {
	e := newEnv(t)
	if rep := e.run(t); len(rep.Findings) != 0 || rep.Payments != 0 {
		t.Fatalf("empty database: %+v", rep)
	}
	for _, no := range []string{"P1", "P2", "P3", "P4"} {
		e.paid(t, "order_"+no, no, false)
	}
	e.paid(t, "order_P1", "P1B", true)
	e.create(t, "closed", "PC", false)
	if _, err := e.st.ClosePayment(context.Background(), "PC", "expired"); err != nil {
		t.Fatal(err)
	}
	e.create(t, "pending", "PP", false)
	rep := e.run(t)
	if len(rep.Findings) != 0 || rep.Payments != 7 || rep.Queried != 6 {
		t.Fatalf("clean database: %d payments, %d queried, findings %+v; want 7, 6 and none",
			rep.Payments, rep.Queried, rep.Findings)
	}
}

// TestAudit_FailedChecksAreUnverifiable makes Alipay fail every query attempt for one
// payment and Temporal fail for another: each is reported as unverifiable, once.
func TestAudit_FailedChecksAreUnverifiable(t *testing.T) {
	e := newEnv(t)
	e.create(t, "closed", "PC", false)
	if _, err := e.st.ClosePayment(context.Background(), "PC", "expired"); err != nil {
		t.Fatal(err)
	}
	// Every attempt fails: 3 per query.
	if err := e.sim.InjectGatewayFault(alipaysim.GatewayFault{Mode: alipaysim.FaultSystemError, Count: 3, Method: "alipay.trade.query"}); err != nil {
		t.Fatal(err)
	}
	rep := e.run(t)
	if got := byKind(rep); len(got) != 1 || !slices.Equal(got[audit.KindUnverifiable], []string{"PC"}) {
		t.Fatalf("findings %v, want PC unverifiable", got)
	}
	if f := rep.Findings[0]; !strings.Contains(f.Detail, "ACQ.SYSTEM_ERROR") {
		t.Fatalf("unverifiable detail lacks Alipay's answer: %q", f.Detail)
	}

	// One failed attempt is retried and the payment verified.
	if err := e.sim.InjectGatewayFault(alipaysim.GatewayFault{Mode: alipaysim.FaultSystemError, Count: 1, Method: "alipay.trade.query"}); err != nil {
		t.Fatal(err)
	}
	if rep := e.run(t); len(rep.Findings) != 0 {
		t.Fatalf("after one failed attempt: %+v, want it retried and verified", rep.Findings)
	}

	e.create(t, "stuck", "PS", false)
	e.expiredAgo(t, "PS", time.Hour)
	e.wf.err = payment.Errorf(payment.EUNAVAILABLE, "workflow engine unavailable")
	rep = e.run(t)
	if got := byKind(rep); len(got) != 1 || !slices.Equal(got[audit.KindUnverifiable], []string{"PS"}) {
		t.Fatalf("findings %v, want PS unverifiable (and not stuck)", got)
	}
}

// TestAudit_AnEarlierPaymentPaidLateMakesTheLaterOneTheDouble: an order's first payment
// was closed and its second paid, both audited long ago. Then the first becomes PAID (a
// late PAID, here by hand). Only the first changed, yet the second is the second PAID
// payment without the opt-in: the run that audits the change reports it.
func TestAudit_AnEarlierPaymentPaidLateMakesTheLaterOneTheDouble(t *testing.T) {
	e := newEnv(t)
	e.create(t, "late", "PFIRST", false)
	first := e.payAtAlipay(t, "PFIRST", 990)
	if _, err := e.st.ClosePayment(context.Background(), "PFIRST", "expired"); err != nil {
		t.Fatal(err)
	}
	e.paid(t, "late", "PSECOND", false)
	old := time.Now().Add(-48 * time.Hour).UTC()
	e.exec(t, "UPDATE payments SET created_at = ?, updated_at = ? WHERE payment_no = 'PFIRST'", old, old)
	e.exec(t, "UPDATE payment_events SET changed_at = ?", old)
	window := audit.Params{Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Minute)}
	if rep, err := e.aud.Run(context.Background(), window); err != nil || rep.Payments != 0 {
		t.Fatalf("before the change: %d payments, %v; want none in the window", rep.Payments, err)
	}
	e.exec(t, "UPDATE payments SET status = 1, trade_no = ?, paid_at = ? WHERE payment_no = 'PFIRST'", first, time.Now().UTC())
	rep, err := e.aud.Run(context.Background(), window)
	if err != nil {
		t.Fatal(err)
	}
	if f := finding(t, rep, audit.KindDouble, "PSECOND"); !strings.Contains(f.Detail, "PFIRST") {
		t.Fatalf("double: %+v", f)
	}
	if rep.Payments != 2 {
		t.Fatalf("audited %d payments, want the changed one and the later PAID one", rep.Payments)
	}
}
