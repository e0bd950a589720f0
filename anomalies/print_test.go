package anomalies_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/anomalies"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

func TestPrintAnomalies(t *testing.T) {
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	now := time.Now()
	long := strings.Repeat("支付宝报告已支付，但本地已关闭。", 20)
	for _, a := range []payment.Anomaly{
		{Kind: "paid_after_close", TenantID: "t1", PaymentNo: "P1", TradeNo: "2026T1", Amount: 1990, Detail: long, CreatedAt: now.Add(-time.Hour)},
		{Kind: "refund_succeeded_after_fail", TenantID: "t1", PaymentNo: "P1", Subject: "P1-R2", TradeNo: "2026T1", Amount: 300,
			Detail: "alipay confirms refund r2 that is FAILED locally", CreatedAt: now.Add(-2 * time.Hour)},
		{Kind: "amount_mismatch", TenantID: "t2", PaymentNo: "P2", TradeNo: "2026T2", Amount: 5, Detail: "paid 0.05, expected 9.90", CreatedAt: now.Add(-30 * 24 * time.Hour)},
	} {
		if err := st.RecordAnomaly(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	// Each recorded once, at its created_at (the store stamps last_seen_at with its clock).
	if _, err := db.ExecContext(ctx, "UPDATE payment_anomalies SET last_seen_at = created_at"); err != nil {
		t.Fatal(err)
	}

	var table bytes.Buffer
	if err := anomalies.Print(ctx, &table, st, now.Add(-7*24*time.Hour), 100, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "CREATED (UTC)") || !strings.Contains(lines[0], "SUBJECT") {
		t.Fatalf("table:\n%s\nwant a header and the two anomalies of the last week", table.String())
	}
	for _, want := range []string{"paid_after_close", "t1", "P1", " - ", "2026T1", "19.90", "..."} {
		if !strings.Contains(lines[1], want) {
			t.Fatalf("row %q lacks %q", lines[1], want)
		}
	}
	for _, want := range []string{"refund_succeeded_after_fail", "P1", "P1-R2", "3.00"} {
		if !strings.Contains(lines[2], want) {
			t.Fatalf("row %q lacks %q", lines[2], want)
		}
	}
	if !strings.Contains(lines[1], "支付宝") || strings.ContainsRune(lines[1], '\uFFFD') {
		t.Fatalf("detail was not cut on a character boundary: %q", lines[1])
	}

	var js bytes.Buffer
	if err := anomalies.Print(ctx, &js, st, now.Add(-60*24*time.Hour), 100, true); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(js.String()), "\n") {
		var a struct {
			Kind      string `json:"kind"`
			Subject   string `json:"subject"`
			AmountFen int64  `json:"amount_fen"`
		}
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("json line %q: %v", line, err)
		}
		kinds = append(kinds, a.Kind+"/"+a.Subject)
	}
	if strings.Join(kinds, ",") != "paid_after_close/,refund_succeeded_after_fail/P1-R2,amount_mismatch/" {
		t.Fatalf("json kinds %v, want newest first", kinds)
	}

	var none bytes.Buffer
	if err := anomalies.Print(ctx, &none, st, now.Add(time.Minute), 100, false); err != nil || !strings.HasPrefix(none.String(), "no anomalies since") {
		t.Fatalf("empty: %q %v", none.String(), err)
	}
}

// An operator resolves an anomaly with a note; the list shows it resolved (the table's
// STATE, resolved_at and resolution in JSON) and the open ones open, and resolving it
// again keeps the first resolution.
func TestResolveAnomaly(t *testing.T) {
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	for _, a := range []payment.Anomaly{
		{Kind: "refund_succeeded_after_fail", TenantID: "t1", PaymentNo: "P1", Subject: "P1-R1", Amount: 300, Detail: "r1"},
		{Kind: "refund_succeeded_after_fail", TenantID: "t1", PaymentNo: "P1", Subject: "P1-R2", Amount: 300, Detail: "r2"},
	} {
		if err := st.RecordAnomaly(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := anomalies.Resolve(ctx, &out, st, "refund_succeeded_after_fail", "P1", "P1-R1", "refunded_fen corrected, ticket OPS-7"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), " resolved at ") || !strings.Contains(out.String(), "OPS-7") {
		t.Fatalf("resolve said %q", out.String())
	}
	out.Reset()
	if err := anomalies.Resolve(ctx, &out, st, "refund_succeeded_after_fail", "P1", "P1-R1", "another note"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "already resolved") || !strings.Contains(out.String(), "OPS-7") {
		t.Fatalf("resolving again said %q; want the first resolution", out.String())
	}
	if err := anomalies.Resolve(ctx, &out, st, "refund_succeeded_after_fail", "P1", "P1-R9", "x"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("resolving an anomaly never recorded: %v", err)
	}

	var table bytes.Buffer
	if err := anomalies.Print(ctx, &table, st, time.Now().Add(-time.Hour), 100, false); err != nil {
		t.Fatal(err)
	}
	state := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(table.String()), "\n")[1:] {
		for _, s := range []string{"P1-R1", "P1-R2"} {
			if strings.Contains(line, s) {
				state[s] = map[bool]string{true: "resolved", false: "open"}[strings.Contains(line, " resolved ")]
			}
		}
	}
	if state["P1-R1"] != "resolved" || state["P1-R2"] != "open" {
		t.Fatalf("table states %v:\n%s", state, table.String())
	}
	var js bytes.Buffer
	if err := anomalies.Print(ctx, &js, st, time.Now().Add(-time.Hour), 100, true); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(js.String()), "\n") {
		var a struct {
			Subject    string     `json:"subject"`
			ResolvedAt *time.Time `json:"resolved_at"`
			Resolution string     `json:"resolution"`
		}
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatal(err)
		}
		if resolved := a.ResolvedAt != nil && a.Resolution != ""; resolved != (a.Subject == "P1-R1") {
			t.Fatalf("json %s: resolved=%v", line, resolved)
		}
	}
}

// An anomaly recorded hours ago and recorded again since is listed by `-since 1h`, with
// when it was first recorded and when it was last seen. Before, the list filtered on
// created_at and printed "no anomalies" for it.
func TestPrintListsAnAnomalySeenAgain(t *testing.T) {
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	created := time.Now().Add(-3 * time.Hour).UTC()
	a := payment.Anomaly{Kind: "amount_mismatch", TenantID: "t1", PaymentNo: "P1", TradeNo: "2026T1", Amount: 5, Detail: "paid 0.05", CreatedAt: created}
	if err := st.RecordAnomaly(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "UPDATE payment_anomalies SET last_seen_at = created_at"); err != nil {
		t.Fatal(err)
	}
	a.CreatedAt = time.Now().UTC()
	if err := st.RecordAnomaly(ctx, a); err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := anomalies.Print(ctx, &table, st, time.Now().Add(-time.Hour), 100, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "LAST SEEN (UTC)") {
		t.Fatalf("table:\n%s\nwant a header with LAST SEEN and the anomaly seen again", table.String())
	}
	for _, want := range []string{"amount_mismatch", "P1", created.Format("2006-01-02 15:04:05"), a.CreatedAt.Format("2006-01-02 15:04")} {
		if !strings.Contains(lines[1], want) {
			t.Fatalf("row %q lacks %q", lines[1], want)
		}
	}
}
