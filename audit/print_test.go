package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// notRunning is a WorkflowChecker for which no workflow runs.
type notRunning struct{}

func (notRunning) Running(context.Context, string) (bool, error) { return false, nil }

// failingStore cannot read anything.
type failingStore struct{}

func (failingStore) ChangedPage(_ context.Context, _ string, _, _ time.Time, after audit.Cursor, _ int) ([]audit.Record, audit.Cursor, error) {
	return nil, after, errors.New("connection refused")
}

func (failingStore) AuditRecords(context.Context, []string) ([]audit.Record, error) {
	return nil, errors.New("connection refused")
}

func (failingStore) AnomalyKinds(context.Context, string) ([]string, error) { return nil, nil }

func TestAuditCommand(t *testing.T) {
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	t.Cleanup(func() { _ = st.Close() })
	sim, srv := simtest.Start(t, nil)
	keys := simtest.Keys(t)
	gw, err := alipay.New(alipay.Config{
		AppID: simtest.AppID, SellerID: simtest.SellerID,
		AppPrivateKeyPEM: keys.AppPrivateKeyPEM, AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM,
		GatewayURL: srv.URL + alipaysim.GatewayPath, NotifyURL: "http://127.0.0.1:1/callbacks/alipay",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	aud := &audit.Auditor{Store: st, Gateway: gw, Workflows: notRunning{}}
	now := time.Now()
	p := audit.Params{Since: now.Add(-time.Hour), Until: now.Add(time.Minute)}
	run := func(asJSON bool) (int, string) {
		t.Helper()
		var out bytes.Buffer
		code, err := aud.RunAndPrint(ctx, &out, p, asJSON)
		if err != nil {
			t.Fatal(err)
		}
		return code, out.String()
	}

	code, text := run(false)
	if code != audit.ExitClean || !strings.Contains(text, "findings: 0 (lost=0 double=0") || !strings.HasSuffix(text, "no findings\n") {
		t.Fatalf("clean: exit %d, output:\n%s", code, text)
	}
	if code, js := run(true); code != audit.ExitClean || js != "" {
		t.Fatalf("clean json: exit %d, output %q", code, js)
	}

	// A payment paid at Alipay but closed locally, and one pending past its expiry with
	// no workflow.
	create := func(orderID, paymentNo string) {
		t.Helper()
		if _, _, err := st.CreatePendingPayment(ctx, payment.NewPayment{PaymentNo: paymentNo, TenantID: "t1", OrderID: orderID,
			Amount: 1990, Currency: "CNY", Subject: "audit", ExpireAt: now.Add(15 * time.Minute),
			WorkflowID: payment.WorkflowID("t1", orderID)}); err != nil {
			t.Fatal(err)
		}
	}
	create("o1", "PLOST")
	if _, err := gw.Precreate(ctx, payment.TradeRequest{PaymentNo: "PLOST", Subject: "audit", Amount: 1990, ExpireAt: now.Add(15 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Pay(simtest.AppID, "PLOST", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClosePayment(ctx, "PLOST", "expired"); err != nil {
		t.Fatal(err)
	}
	create("o2", "PSTUCK")
	if _, err := db.ExecContext(ctx, "UPDATE payments SET expire_at = ? WHERE payment_no = 'PSTUCK'", now.Add(-time.Hour).UTC()); err != nil {
		t.Fatal(err)
	}

	code, text = run(false)
	t.Logf("report:\n%s", text)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if code != audit.ExitFindings || len(lines) != 5 {
		t.Fatalf("findings: exit %d, output:\n%s\nwant exit 1, a header, the counts, a table header and 2 rows", code, text)
	}
	if !strings.HasPrefix(lines[0], "audit of payments changed "+p.Since.UTC().Format(time.RFC3339)) ||
		!strings.Contains(lines[0], "2 payments, 2 queried at Alipay") {
		t.Errorf("header %q", lines[0])
	}
	if !strings.Contains(lines[1], "findings: 2 (lost=1 double=0 missing_grant=0 undelivered_event=0 stuck_pending=1 ") {
		t.Errorf("counts %q", lines[1])
	}
	if !strings.HasPrefix(lines[2], "KIND") {
		t.Errorf("table header %q", lines[2])
	}
	for i, want := range [][]string{{"lost", "t1", "o1", "PLOST", "CLOSED", "19.90", "TRADE_SUCCESS"}, {"stuck_pending", "o2", "PSTUCK", "PENDING", "payment:t1:o2"}} {
		for _, w := range want {
			if !strings.Contains(lines[3+i], w) {
				t.Errorf("row %q lacks %q", lines[3+i], w)
			}
		}
	}

	code, js := run(true)
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(js), "\n") {
		var f struct {
			Kind            string `json:"kind"`
			PaymentNo       string `json:"payment_no"`
			OrderID         string `json:"order_id"`
			Status          string `json:"status"`
			AmountFen       int64  `json:"amount_fen"`
			AlipayAmountFen int64  `json:"alipay_amount_fen"`
			Detail          string `json:"detail"`
		}
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("json line %q: %v", line, err)
		}
		if f.AmountFen != 1990 || f.Detail == "" || f.OrderID == "" {
			t.Errorf("json finding %+v", f)
		}
		got = append(got, f.Kind+" "+f.PaymentNo+" "+f.Status)
	}
	if code != audit.ExitFindings || strings.Join(got, ", ") != "lost PLOST CLOSED, stuck_pending PSTUCK PENDING" {
		t.Fatalf("json: exit %d, findings %v", code, got)
	}

	var out bytes.Buffer
	failing := &audit.Auditor{Store: failingStore{}, Gateway: gw, Workflows: notRunning{}}
	if code, err := failing.RunAndPrint(ctx, &out, p, false); code != audit.ExitFailed || err == nil || out.Len() != 0 {
		t.Fatalf("unreadable store: exit %d, err %v, output %q; want exit 2, the error and no report", code, err, out.String())
	}
}
