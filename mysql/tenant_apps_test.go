package mysql_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/migrations"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

// A payment records the app it is opened on, a refund copies its payment's, and both
// read back with it. Before, neither was recorded.
func TestPaymentAndRefundRecordTheirAlipayApp(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	np := newPayment("t1", "o1", "PAPP1")
	np.AlipayAppID = "2021A"
	p, _, err := st.CreatePendingPayment(ctx, np)
	if err != nil {
		t.Fatal(err)
	}
	if p.AlipayAppID != "2021A" {
		t.Fatalf("created payment's app = %q", p.AlipayAppID)
	}
	if got, err := st.GetPayment(ctx, "PAPP1"); err != nil || got.AlipayAppID != "2021A" {
		t.Fatalf("stored payment's app = %q, %v", got.AlipayAppID, err)
	}
	if _, err := st.MarkPaid(ctx, "PAPP1", "TAPP1", time.Now()); err != nil {
		t.Fatal(err)
	}
	r, _, err := st.CreateRefund(ctx, payment.NewRefund{RefundNo: "R1", TenantID: "t1", PaymentNo: "PAPP1", Amount: 100})
	if err != nil {
		t.Fatal(err)
	}
	if r.AlipayAppID != "2021A" {
		t.Fatalf("created refund's app = %q, want its payment's", r.AlipayAppID)
	}
	if got, err := st.GetRefund(ctx, "t1", "R1"); err != nil || got.AlipayAppID != "2021A" {
		t.Fatalf("stored refund's app = %q, %v", got.AlipayAppID, err)
	}
	// Without an app given, the column's default "" (the default app, as migration 0029 says).
	if p, err := st.GetPayment(ctx, createPending(t, st, "t1", "o2", "PAPP2").PaymentNo); err != nil || p.AlipayAppID != "" {
		t.Fatalf("a payment recorded without its app reads %q, %v", p.AlipayAppID, err)
	}
}

// A tenant moved to another app keeps the old app's seller and sealed keys, in the
// transaction that moves it; so does one whose keys are cleared (back to the default
// app). An update that leaves the app as it is (new keys, another webhook) keeps nothing,
// and keeps what was kept. A tenant on the default app has nothing to keep.
func TestTenantKeepsTheAppsItLeaves(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	hash := api.HashAPIKey("sk_test_mover_0123456789")
	upsert := func(app, seller, sealed string) {
		t.Helper()
		if err := st.UpsertTenant(ctx, payment.Tenant{ID: "mover", APIKeyHash: hash, AlipayAppID: app, AlipaySeller: seller,
			AlipayCredentialsSealed: sealed}); err != nil {
			t.Fatal(err)
		}
	}
	kept := func(app string) payment.KeptAlipayApp {
		t.Helper()
		k, err := st.KeptAlipayApp(ctx, "mover", app)
		if err != nil {
			t.Fatalf("kept app %s: %v", app, err)
		}
		return k
	}
	upsert("2021default", "2088default", "")
	upsert("2021A", "2088A", "sealed-a")
	if n := count(t, db, `SELECT COUNT(*) FROM tenant_alipay_apps`); n != 0 {
		t.Fatalf("%d kept apps after leaving the default app, want 0", n)
	}
	upsert("2021A", "2088A", "sealed-a2") // new keys for the same app: not a move
	upsert("2021A", "2088A", "")          // a re-run that names no keys
	if n := count(t, db, `SELECT COUNT(*) FROM tenant_alipay_apps`); n != 0 {
		t.Fatalf("%d kept apps without a move, want 0", n)
	}
	upsert("2021B", "2088B", "sealed-b")
	if k := kept("2021A"); k.SellerID != "2088A" || k.CredentialsSealed != "sealed-a2" || k.LeftAt.IsZero() {
		t.Fatalf("kept A = %+v, want seller 2088A and the keys it had", k)
	}
	upsert("2021B", "2088B", "") // a re-run with fewer flags
	if k := kept("2021A"); k.CredentialsSealed != "sealed-a2" {
		t.Fatalf("a re-run changed kept A: %+v", k)
	}
	if err := st.SetTenantAlipayCredentials(ctx, "mover", ""); err != nil {
		t.Fatal(err)
	}
	upsert("2021default", "2088default", "")
	if k := kept("2021B"); k.SellerID != "2088B" || k.CredentialsSealed != "sealed-b" {
		t.Fatalf("kept B = %+v", k)
	}
	if _, err := st.KeptAlipayApp(ctx, "mover", "2021default"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("the default app kept: %v", err)
	}
	if ks, err := st.KeptAlipayAppsByApp(ctx, "2021A"); err != nil || len(ks) != 1 || ks[0].TenantID != "mover" {
		t.Fatalf("kept apps of 2021A: %+v, %v", ks, err)
	}
	ids, err := st.KeptAlipayAppIDs(ctx, time.Now().Add(-time.Hour))
	if err != nil || len(ids) != 2 || ids[0] != "2021A" || ids[1] != "2021B" {
		t.Fatalf("kept app ids: %v, %v", ids, err)
	}
	if ids, _ := st.KeptAlipayAppIDs(ctx, time.Now().Add(time.Hour)); len(ids) != 0 {
		t.Fatalf("kept app ids left since later: %v", ids)
	}
	if err := st.SetTenantAlipayCredentials(ctx, "nobody", ""); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("clearing an unknown tenant: %v", err)
	}
	// Re-sealed kept keys are swapped only while they are what was read.
	if ok, err := st.SwapKeptAlipayCredentials(ctx, "mover", "2021A", "stale", "resealed"); err != nil || ok {
		t.Fatalf("swap of stale keys: %v, %v", ok, err)
	}
	if ok, err := st.SwapKeptAlipayCredentials(ctx, "mover", "2021A", "sealed-a2", "resealed"); err != nil || !ok || kept("2021A").CredentialsSealed != "resealed" {
		t.Fatalf("swap: %v, %v", ok, err)
	}
	if ks, err := st.KeptAlipayApps(ctx, "mover", "2021A"); err != nil || len(ks) != 1 || ks[0].AppID != "2021B" {
		t.Fatalf("kept apps after (mover, 2021A): %+v, %v", ks, err)
	}
}

// The statements scope a day's payments and refunds by the app they were opened on:
// a tenant that moved from A to B has its older payments in A's totals, its newer ones
// in B's; the default app's are those that recorded its id or none. Before, every
// payment of the tenant counted for its current app.
func TestStatementTotalsFollowThePaymentsApp(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: "mover", APIKeyHash: api.HashAPIKey("sk_test_mover_0123456789"),
		AlipayAppID: "2021B", AlipaySeller: "2088B", AlipayCredentialsSealed: "sealed-b"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, app := range []string{"2021A", "2021A", "2021B", "", "2021default", "2021other-deployment"} {
		np := newPayment("mover", "o"+string(rune('a'+i)), "PST"+string(rune('A'+i)))
		np.AlipayAppID = app
		if _, _, err := st.CreatePendingPayment(ctx, np); err != nil {
			t.Fatal(err)
		}
		if _, err := st.MarkPaid(ctx, np.PaymentNo, "T"+np.PaymentNo, now); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		app        string
		defaultApp bool
		want       int
	}{{"2021A", false, 2}, {"2021B", false, 1}, {"2021default", true, 2}} {
		sc := payment.StatementScope{AppID: c.app, DefaultApp: c.defaultApp, From: now.Add(-time.Minute), To: now.Add(time.Minute)}
		tot, err := st.LocalStatementTotals(ctx, sc)
		if err != nil {
			t.Fatal(err)
		}
		var notInBill int
		if err := st.EachPaymentNotInBill(ctx, sc, func(payment.Payment) error { notInBill++; return nil }); err != nil {
			t.Fatal(err)
		}
		if tot.Trades != c.want || notInBill != c.want {
			t.Fatalf("app %s: %d trades, %d not in the bill; want %d", c.app, tot.Trades, notInBill, c.want)
		}
	}
}

// Migration 0032 fills in the app of the payments and refunds recorded before 0029: a
// tenant with its own keys gets its app, every other stays on the default app (""); run
// again it changes nothing.
func TestMigrationBackfillsThePaymentsApp(t *testing.T) {
	db, _ := testenv.EmptyMySQL(t)
	ctx := context.Background()
	if err := migrations.UpTo(ctx, db, 31, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	// Tenants, payments and refunds written the way the store wrote them at 0031: today's
	// store prepares statements on columns that later migrations add, which TiDB refuses
	// on the old schema.
	for _, q := range []string{
		`INSERT INTO tenants (id, api_key_hash, alipay_app_id, alipay_seller_id, alipay_credentials, created_at, updated_at) VALUES
			('own', SHA2('sk_test_own_0123456789ab', 256), '2021own', '2088own', 'sealed', NOW(6), NOW(6)),
			('plain', SHA2('sk_test_plain_0123456789', 256), '2021default', '2088default', NULL, NOW(6), NOW(6))`,
		`INSERT INTO payments (payment_no, tenant_id, order_id, amount_fen, currency, subject, status, trade_no, expire_at, paid_at, created_at, updated_at) VALUES
			('PBown', 'own', 'o1', 100, 'CNY', 's', 1, 'TBown', NOW(6), NOW(6), NOW(6), NOW(6)),
			('PBplain', 'plain', 'o1', 100, 'CNY', 's', 1, 'TBplain', NOW(6), NOW(6), NOW(6), NOW(6))`,
		`INSERT INTO refunds (refund_no, tenant_id, payment_no, out_request_no, amount_fen, status, created_at, updated_at) VALUES
			('Rown', 'own', 'PBown', 'ORown', 10, 0, NOW(6), NOW(6)),
			('Rplain', 'plain', 'PBplain', 'ORplain', 10, 0, NOW(6), NOW(6))`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	st := mysql.NewStore(db)
	t.Cleanup(func() { _ = st.Close() })
	for tn, want := range map[string]string{"own": "2021own", "plain": ""} {
		p, err := st.GetPayment(ctx, "PB"+tn)
		if err != nil || p.AlipayAppID != want {
			t.Fatalf("%s's payment after the backfill: %q, %v; want %q", tn, p.AlipayAppID, err, want)
		}
		r, err := st.GetRefund(ctx, tn, "R"+tn)
		if err != nil || r.AlipayAppID != want {
			t.Fatalf("%s's refund after the backfill: %q, %v; want %q", tn, r.AlipayAppID, err, want)
		}
	}
}
