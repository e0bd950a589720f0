package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/alipaysim/simtest"
	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/internal/config"
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
		code, err := auditAndPrint(ctx, aud, p, asJSON, &out)
		if err != nil {
			t.Fatal(err)
		}
		return code, out.String()
	}

	code, text := run(false)
	if code != auditClean || !strings.Contains(text, "findings: 0 (lost=0 double=0") || !strings.HasSuffix(text, "no findings\n") {
		t.Fatalf("clean: exit %d, output:\n%s", code, text)
	}
	if code, js := run(true); code != auditClean || js != "" {
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
	if code != auditFindings || len(lines) != 5 {
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
	if code != auditFindings || strings.Join(got, ", ") != "lost PLOST CLOSED, stuck_pending PSTUCK PENDING" {
		t.Fatalf("json: exit %d, findings %v", code, got)
	}

	var out bytes.Buffer
	failing := &audit.Auditor{Store: failingStore{}, Gateway: gw, Workflows: notRunning{}}
	if code, err := auditAndPrint(ctx, failing, p, false, &out); code != auditFailed || err == nil || out.Len() != 0 {
		t.Fatalf("unreadable store: exit %d, err %v, output %q; want exit 2, the error and no report", code, err, out.String())
	}
}

func TestRunAudit_ExitsTwoWhenItCannotAudit(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	cfg, err := config.Load(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.MySQLDSN = "root@tcp(127.0.0.1:1)/paykit"
	tests := []struct {
		name string
		args []string
		// parses is true for the one case that gets past the flags and fails to connect.
		parses bool
	}{
		{name: "bad duration", args: []string{"-since", "yesterday"}},
		{name: "window backwards", args: []string{"-since", "1h", "-until", "2h"}},
		{name: "rfc3339 backwards", args: []string{"-since", "2026-01-02T00:00:00Z", "-until", "2026-01-01T00:00:00Z"}},
		{name: "window too long", args: []string{"-since", "1000h"}},
		{name: "negative duration", args: []string{"-until", "-1h"}},
		{name: "zero sla", args: []string{"-grant-sla", "0s"}},
		{name: "zero grace", args: []string{"-pending-grace", "0"}},
		{name: "unknown flag", args: []string{"-limit", "5"}},
		{name: "extra arguments", args: []string{"now"}},
		{name: "mysql unreachable", parses: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := parseAuditFlags(tc.args, time.Now(), io.Discard); (err == nil) != tc.parses {
				t.Fatalf("parse: %v", err)
			}
			if code := runAudit(context.Background(), cfg, tc.args, io.Discard, io.Discard, logger); code != auditFailed {
				t.Fatalf("exit %d, want %d", code, auditFailed)
			}
		})
	}
}

func TestParseAuditFlags(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p, asJSON, err := parseAuditFlags(nil, now, io.Discard)
	if err != nil || asJSON || !p.Since.Equal(now.Add(-24*time.Hour)) || !p.Until.Equal(now) ||
		p.GrantSLA != 10*time.Minute || p.WebhookSLA != time.Hour || p.PendingGrace != 5*time.Minute {
		t.Fatalf("defaults: %+v json=%v err=%v", p, asJSON, err)
	}
	p, asJSON, err = parseAuditFlags([]string{"-since", "2026-02-01T00:00:00Z", "-until", "2h", "-json",
		"-grant-sla", "1m", "-webhook-sla", "2m", "-pending-grace", "3m"}, now, io.Discard)
	if err != nil || !asJSON || !p.Since.Equal(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)) || !p.Until.Equal(now.Add(-2*time.Hour)) ||
		p.GrantSLA != time.Minute || p.WebhookSLA != 2*time.Minute || p.PendingGrace != 3*time.Minute {
		t.Fatalf("flags: %+v json=%v err=%v", p, asJSON, err)
	}
}

func TestAuditSchedule_Config(t *testing.T) {
	load := func(vars map[string]string) (config.Config, error) {
		return config.Load(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	}
	cfg, err := load(nil)
	if err != nil || cfg.AuditEvery != 24*time.Hour {
		t.Fatalf("default PAYKIT_AUDIT_EVERY: %s, %v; want 24h", cfg.AuditEvery, err)
	}
	// The window ends the payment TTL (15 min) plus the webhook SLA (1 h) back: a payment
	// created at its end and paid just before it expires is past its webhook SLA.
	if wc := workerConfig(cfg, nil); wc.AuditEvery != 24*time.Hour || wc.AuditLag != time.Hour+15*time.Minute {
		t.Fatalf("worker config: every %s, lag %s; want 24h and 1h15m", wc.AuditEvery, wc.AuditLag)
	}
	cfg, err = load(map[string]string{"PAYKIT_AUDIT_EVERY": "12h", "PAYKIT_PAYMENT_TTL": "2h"})
	if err != nil || cfg.AuditEvery != 12*time.Hour {
		t.Fatalf("PAYKIT_AUDIT_EVERY=12h: %s, %v", cfg.AuditEvery, err)
	}
	if wc := workerConfig(cfg, nil); wc.AuditLag != 3*time.Hour {
		t.Fatalf("lag with a 2h payment TTL: %s, want 3h (expiry plus the webhook SLA)", wc.AuditLag)
	}
	if _, err := load(map[string]string{"PAYKIT_AUDIT_EVERY": "daily"}); err == nil || !strings.Contains(err.Error(), "PAYKIT_AUDIT_EVERY") {
		t.Fatalf("PAYKIT_AUDIT_EVERY=daily: %v, want a configuration error naming it", err)
	}
}
