package activities_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

// noWorkflows is a WorkflowChecker for which no workflow runs.
type noWorkflows struct{}

func (noWorkflows) Running(context.Context, string) (bool, error) { return false, nil }

// syncBuffer is a log sink safe for the activity's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAudit_RunTwiceRecordsEachAnomalyOnce plants a lost payment and a missing grant,
// runs the audit activity twice, and checks that each is recorded as one anomaly while
// both runs report, log and count both.
func TestAudit_RunTwiceRecordsEachAnomalyOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var logs syncBuffer
	f.acts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	reg := prometheus.NewRegistry()
	f.acts.Metrics = activities.NewMetrics(reg)
	f.acts.Auditor = &audit.Auditor{Store: f.store, Gateway: f.acts.Gateway, Workflows: noWorkflows{}}

	create := func(orderID string) payment.Payment {
		t.Helper()
		in := f.createInput(orderID)
		p, _, err := f.store.CreatePendingPayment(ctx, payment.NewPayment{PaymentNo: in.PaymentNo, TenantID: in.TenantID,
			OrderID: in.OrderID, Amount: in.Amount, Currency: in.Currency, Subject: in.Subject, ExpireAt: in.ExpireAt, WorkflowID: in.WorkflowID})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.acts.Gateway.Open(ctx, payment.TradeRequest{PaymentNo: p.PaymentNo, Method: payment.MethodQR, Subject: p.Subject,
			Amount: p.Amount, ExpireAt: p.ExpireAt}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lost := create("lost")
	if _, err := f.sim.Pay(testAppID, lost.PaymentNo, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.ClosePayment(ctx, lost.PaymentNo, "expired"); err != nil {
		t.Fatal(err)
	}
	ungranted := create("ungranted")
	tr, err := f.sim.Pay(testAppID, ungranted.PaymentNo, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.MarkPaid(ctx, ungranted.PaymentNo, tr.TradeNo, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := f.store.MarkEventDelivered(ctx, mysql.EventID(ungranted.PaymentNo, payment.EventPaymentPaid)); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-30 * time.Minute).UTC()
	if _, err := f.db.ExecContext(ctx, "UPDATE payments SET paid_at = ?, updated_at = ? WHERE payment_no = ?", at, at, ungranted.PaymentNo); err != nil {
		t.Fatal(err)
	}

	req := activities.AuditRequest{Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Minute)}
	for run := 1; run <= 2; run++ {
		var res activities.AuditResult
		if err := f.remote(t, &res, f.acts.Audit, req); err != nil {
			t.Fatal(err)
		}
		if res.Payments != 2 || res.Queried != 2 || res.Findings != 2 ||
			res.ByKind[audit.KindLost] != 1 || res.ByKind[audit.KindMissingGrant] != 1 {
			t.Fatalf("run %d: %+v, want 2 payments queried, one lost and one missing grant", run, res)
		}
	}

	if n := f.count(t, "SELECT COUNT(*) FROM payment_anomalies"); n != 2 {
		t.Fatalf("anomalies after two runs = %d, want 2", n)
	}
	for kind, no := range map[string]string{"audit_lost": lost.PaymentNo, "audit_missing_grant": ungranted.PaymentNo} {
		if n := f.count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE kind = ? AND payment_no = ? AND tenant_id = ? AND detail LIKE 'order %'",
			kind, no, f.tenantID); n != 1 {
			t.Errorf("%s for %s: %d rows, want 1", kind, no, n)
		}
	}
	if n := strings.Count(logs.String(), "level=ERROR msg=\"audit finding: operator action required\""); n != 4 {
		t.Errorf("logged %d findings at error level over two runs, want 4:\n%s", n, logs.String())
	}
	// Every kind is there from the start; only the ones found are above 0.
	counted := map[string]map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		counted[mf.GetName()] = map[string]float64{}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetCounter().GetValue() > 0 {
				counted[mf.GetName()][m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	if c := counted["paykit_audit_findings_total"]; c[audit.KindLost] != 2 || c[audit.KindMissingGrant] != 2 || len(c) != 2 {
		t.Errorf("paykit_audit_findings_total %v, want lost and missing_grant counted once per run", c)
	}
	lostKind, missingKind := audit.AnomalyPrefix+audit.KindLost, audit.AnomalyPrefix+audit.KindMissingGrant
	if c := counted["paykit_payment_anomalies_recorded_total"]; c[lostKind] != 2 || c[missingKind] != 2 || len(c) != 2 {
		t.Errorf("paykit_payment_anomalies_recorded_total %v, want %s and %s counted once per run", c, lostKind, missingKind)
	}
}

func TestAudit_RefusesWithoutAuditorOrWindow(t *testing.T) {
	f := newFixture(t)
	err := f.remote(t, nil, f.acts.Audit, activities.AuditRequest{Since: time.Now().Add(-time.Hour), Until: time.Now()})
	applicationError(t, err, activities.ErrTypeInvalid, true)
	f.acts.Auditor = &audit.Auditor{Store: f.store, Gateway: f.acts.Gateway, Workflows: noWorkflows{}}
	err = f.remote(t, nil, f.acts.Audit, activities.AuditRequest{Since: time.Now(), Until: time.Now().Add(-time.Hour)})
	applicationError(t, err, activities.ErrTypeInvalid, true)
}

// TestAudit_MovesItsWatermarkOnlyFromWhereItStands: a scoped audit creates the
// watermark, a retried one finds it already moved and succeeds, one that read an older
// watermark fails without retrying; an attempt resumed past the window's end records
// nothing more and reports what the earlier attempts recorded.
func TestAudit_MovesItsWatermarkOnlyFromWhereItStands(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.acts.Auditor = &audit.Auditor{Store: f.store, Gateway: f.acts.Gateway, Workflows: noWorkflows{}}
	scope := "test-" + f.tenantID
	until := time.Now().Add(time.Minute).UTC().Truncate(time.Microsecond)
	req := activities.AuditRequest{Since: until.Add(-time.Hour), Until: until, TenantID: f.tenantID, Scope: scope}

	err := f.remote(t, nil, f.acts.Audit, req)
	applicationError(t, err, activities.ErrTypeInvalid, true) // no watermark store
	f.acts.Watermarks = f.store
	for attempt := 1; attempt <= 2; attempt++ {
		var res activities.AuditResult
		if err := f.remote(t, &res, f.acts.Audit, req); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		if res.Windows != 1 || !res.AuditedUntil.Equal(until) {
			t.Fatalf("attempt %d: %+v", attempt, res)
		}
		if at, err := f.store.AuditWatermark(ctx, scope); err != nil || !at.Equal(until) {
			t.Fatalf("attempt %d: watermark %s, %v; want %s", attempt, at, err, until)
		}
	}
	stale := req
	stale.Since, stale.Until, stale.WatermarkFrom = until.Add(-2*time.Hour), until.Add(time.Hour), until.Add(-2*time.Hour)
	err = f.remote(t, nil, f.acts.Audit, stale)
	applicationError(t, err, activities.ErrTypeAuditWatermarkMoved, true)

	// An attempt whose predecessor heartbeat the end of the window: nothing is read.
	next := activities.AuditRequest{Since: until, Until: until.Add(time.Hour), TenantID: f.tenantID, Scope: scope, WatermarkFrom: until}
	f.env.SetHeartbeatDetails(map[string]any{
		"cursor": audit.Cursor{Source: audit.SourceEnd},
		"done":   activities.AuditResult{Payments: 7, Findings: 2, ByKind: map[string]int{audit.KindLost: 2}},
	})
	var res activities.AuditResult
	if err := f.remote(t, &res, f.acts.Audit, next); err != nil {
		t.Fatal(err)
	}
	if res.Payments != 7 || res.Findings != 2 || res.ByKind[audit.KindLost] != 2 || res.Windows != 1 {
		t.Fatalf("resumed attempt: %+v, want the earlier attempts' counts", res)
	}
}

// flakyQueries is the simulator's gateway whose queries fail while down is set.
type flakyQueries struct {
	audit.Gateway
	down *atomic.Bool
}

func (g flakyQueries) Query(ctx context.Context, paymentNo string) (payment.Trade, error) {
	if g.down.Load() {
		return payment.Trade{}, errors.New("alipay: connection reset")
	}
	return g.Gateway.Query(ctx, paymentNo)
}

// The scheduled audit comes back to the payments it could not verify once its watermark
// has moved past them: each is checked again, later and later, until it can be (its
// findings then recorded as the window's would have been, and it leaves the list), or
// until audit.RecheckFor has passed, when the audit records that it gave up.
func TestAuditRecheck_ComesBackToWhatItCouldNotVerify(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var down atomic.Bool
	clock := time.Now().UTC()
	f.acts.Now = func() time.Time { return clock }
	f.acts.Watermarks, f.acts.AuditRetries = f.store, f.store
	f.acts.Auditor = &audit.Auditor{Store: f.store, Gateway: flakyQueries{Gateway: f.acts.Gateway, down: &down}, Workflows: noWorkflows{}}
	lost := func(orderID string) payment.Payment {
		t.Helper()
		in := f.createInput(orderID)
		p, _, err := f.store.CreatePendingPayment(ctx, payment.NewPayment{PaymentNo: in.PaymentNo, TenantID: in.TenantID,
			OrderID: in.OrderID, Amount: in.Amount, Currency: in.Currency, Subject: in.Subject, ExpireAt: in.ExpireAt, WorkflowID: in.WorkflowID})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.acts.Gateway.Open(ctx, payment.TradeRequest{PaymentNo: p.PaymentNo, Method: payment.MethodQR, Subject: p.Subject,
			Amount: p.Amount, ExpireAt: p.ExpireAt}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.sim.Pay(testAppID, p.PaymentNo, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.ClosePayment(ctx, p.PaymentNo, "expired"); err != nil {
			t.Fatal(err)
		}
		return p
	}
	recovers, abandoned := lost("recovers"), lost("abandoned")
	const scope = "paykit-audit-recheck-test"
	down.Store(true)
	var res activities.AuditResult
	if err := f.remote(t, &res, f.acts.Audit, activities.AuditRequest{Since: clock.Add(-time.Hour), Until: clock.Add(time.Minute), Scope: scope}); err != nil {
		t.Fatal(err)
	}
	if res.ByKind[audit.KindUnverifiable] != 2 || f.count(t, "SELECT COUNT(*) FROM audit_retries WHERE scope = ?", scope) != 2 {
		t.Fatalf("window with Alipay down: %+v, %d kept to check again; want both unverifiable and kept",
			res, f.count(t, "SELECT COUNT(*) FROM audit_retries WHERE scope = ?", scope))
	}
	recheck := func(t *testing.T) activities.AuditRecheckResult {
		t.Helper()
		var r activities.AuditRecheckResult
		if err := f.remote(t, &r, f.acts.AuditRecheck, activities.AuditRecheckRequest{Scope: scope}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := recheck(t); r.Checked != 0 {
		t.Fatalf("checked again at once: %+v; want none due before audit.RecheckAfter(0)", r)
	}
	clock = clock.Add(audit.RecheckAfter(0))
	if r := recheck(t); r.Checked != 2 || r.StillUnverifiable != 2 {
		t.Fatalf("Alipay still down an hour later: %+v; want both checked and still unverifiable", r)
	}
	if n := f.count(t, "SELECT COUNT(*) FROM audit_retries WHERE scope = ? AND attempts = 1 AND next_at > ?", scope, clock); n != 2 {
		t.Fatalf("%d rows rescheduled with one attempt, want 2", n)
	}
	// Alipay answers again for one of them: it is verified, and its finding recorded.
	down.Store(false)
	if _, err := f.db.ExecContext(ctx, "UPDATE audit_retries SET next_at = first_at WHERE payment_no = ?", recovers.PaymentNo); err != nil {
		t.Fatal(err)
	}
	if r := recheck(t); r.Checked != 1 || r.Verified != 1 || r.Findings != 1 {
		t.Fatalf("Alipay back: %+v; want the due payment verified with its one finding", r)
	}
	if n := f.count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE kind = 'audit_lost' AND payment_no = ?", recovers.PaymentNo); n != 1 {
		t.Fatalf("audit_lost of %s: %d rows, want 1", recovers.PaymentNo, n)
	}
	// The other stays unverifiable for a week: the audit gives up on it, and says so.
	down.Store(true)
	clock = clock.Add(audit.RecheckFor)
	if r := recheck(t); r.Checked != 1 || r.GaveUp != 1 {
		t.Fatalf("a week of Alipay down: %+v; want the audit to give up on %s", r, abandoned.PaymentNo)
	}
	if n := f.count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE kind = ? AND payment_no = ?", audit.AnomalyPrefix+audit.KindUnverifiableGaveUp, abandoned.PaymentNo); n != 1 {
		t.Fatalf("gave-up anomaly of %s: %d rows, want 1", abandoned.PaymentNo, n)
	}
	if n := f.count(t, "SELECT COUNT(*) FROM audit_retries WHERE scope = ?", scope); n != 0 {
		t.Fatalf("%d payments left to check again, want none", n)
	}
}
