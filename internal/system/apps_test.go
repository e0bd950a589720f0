package system

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/alipaysim/simtest"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/secrets"
)

// appConfig is a deployment whose default app is appID, with the simulator's test keys
// and the keyring keys ("" for none).
func appConfig(t *testing.T, dsn, appID, seller, keys string) config.Config {
	t.Helper()
	cfg, err := config.Load(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	ks := simtest.Keys(t)
	cfg.MySQLDSN, cfg.AlipayAppID, cfg.AlipaySellerID, cfg.SecretsKeys = dsn, appID, seller, keys
	cfg.AlipayAppPrivateKey, cfg.AlipayPublicKey = ks.AppPrivateKeyPEM, ks.AlipayPublicKeyPEM
	return cfg
}

func insertPayment(t *testing.T, db *sql.DB, no, appID string) {
	t.Helper()
	now := time.Now().UTC()
	if _, err := db.Exec(`INSERT IGNORE INTO tenants (id, name, api_key_hash, created_at, updated_at) VALUES ('t1', 't1', 'h', ?, ?)`, now, now); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO payments (payment_no, tenant_id, order_id, amount_fen, currency, subject, status, expire_at, created_at, updated_at, alipay_app_id)
VALUES (?, 't1', ?, 100, 'CNY', 's', 1, ?, ?, ?, ?)`, no, "o"+no, now, now, now, appID); err != nil {
		t.Fatal(err)
	}
}

func paymentApp(t *testing.T, db *sql.DB, no string) string {
	t.Helper()
	var app string
	if err := db.QueryRow(`SELECT alipay_app_id FROM payments WHERE payment_no = ?`, no).Scan(&app); err != nil {
		t.Fatal(err)
	}
	return app
}

// Changing the deployment's default app (ALIPAY_APP_ID) strands none of the payments
// opened on the earlier one: its keys were kept by the processes that ran on it, so the
// payment's app still resolves (queries, closes, refunds) and its notifications still
// verify; the rows from before payments recorded their app are written with the app they
// were opened on, once, and never with a later default app.
func TestChangingTheDefaultAppKeepsItsPayments(t *testing.T) {
	db, dsn := testenv.MySQL(t)
	ctx := context.Background()
	store := mysql.NewStore(db)
	key, err := secrets.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	const oldApp, newApp = "2021000000000101", "2021000000000102"
	insertPayment(t, db, "P0", "") // recorded before payments named their app
	old := appConfig(t, dsn, oldApp, "2088000000000101", key)
	kr, err := old.SecretsKeyring()
	if err != nil {
		t.Fatal(err)
	}
	if err := KeepDefaultApp(ctx, old, store, kr, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if got := paymentApp(t, db, "P0"); got != oldApp {
		t.Fatalf("a payment from before payments named their app reads %q after the first start, want %s", got, oldApp)
	}
	insertPayment(t, db, "P1", oldApp)

	next := appConfig(t, dsn, newApp, "2088000000000102", key)
	var log bytes.Buffer
	if err := KeepDefaultApp(ctx, next, store, kr, slog.New(slog.NewTextHandler(&log, nil))); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "not kept") {
		t.Fatalf("keys kept, yet the start reports them lost: %s", log.String())
	}
	if got := paymentApp(t, db, "P0"); got != oldApp {
		t.Fatalf("P0 reads %q after the default app changed, want %s", got, oldApp)
	}
	gws, err := NewAlipayApps(next, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, no := range []string{"P0", "P1"} {
		app, err := gws.ForPayment(ctx, "t1", paymentApp(t, db, no))
		if err != nil || app.AppID != oldApp || app.SellerID != "2088000000000101" || app.Gateway == nil {
			t.Fatalf("payment %s on the earlier default app resolves to %+v, %v; want app %s with its seller", no, app, err, oldApp)
		}
	}
	if _, err := gws.ForApp(ctx, oldApp); err != nil {
		t.Fatalf("a notification for the earlier default app finds no key to verify it: %v", err)
	}
	if app, err := gws.For(ctx, "t1"); err != nil || app.AppID != newApp {
		t.Fatalf("a new payment of a tenant on the default app opens on %+v, %v; want %s", app, err, newApp)
	}
	apps, err := store.KeptAlipayAppIDs(ctx, time.Now().Add(-time.Hour))
	if err != nil || !strings.Contains(strings.Join(apps, ","), oldApp) {
		t.Fatalf("the statements' kept apps %v, %v: want the earlier default app %s reconciled", apps, err, oldApp)
	}
}

// A deployment without PAYKIT_SECRETS_KEYS cannot keep its default app's keys: after the
// app changes, every start says which app's payments are stranded and what to do, and
// resolving such a payment names the cause instead of "not found".
func TestAnEarlierDefaultAppWithoutKeysIsReported(t *testing.T) {
	db, dsn := testenv.MySQL(t)
	ctx := context.Background()
	store := mysql.NewStore(db)
	const oldApp, newApp = "2021000000000201", "2021000000000202"
	insertPayment(t, db, "P0", oldApp)
	if err := KeepDefaultApp(ctx, appConfig(t, dsn, oldApp, "2088000000000201", ""), store, nil, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	next := appConfig(t, dsn, newApp, "2088000000000202", "")
	var log bytes.Buffer
	if err := KeepDefaultApp(ctx, next, store, nil, slog.New(slog.NewTextHandler(&log, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), oldApp) || !strings.Contains(log.String(), "PAYKIT_SECRETS_KEYS") {
		t.Fatalf("start log %q: want an error naming %s and PAYKIT_SECRETS_KEYS", log.String(), oldApp)
	}
	gws, err := NewAlipayApps(next, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gws.ForPayment(ctx, "t1", oldApp); err == nil || !strings.Contains(err.Error(), "keys were not kept") {
		t.Fatalf("a payment of the earlier app resolves with %v; want an error saying its keys were not kept", err)
	}
	if apps, err := store.KeptAlipayAppIDs(ctx, time.Now().Add(-time.Hour)); err != nil || len(apps) != 0 {
		t.Fatalf("kept apps %v, %v: an app without keys has no bill to fetch and is not listed", apps, err)
	}
}

func insertRefund(t *testing.T, db *sql.DB, no, paymentNo, appID string) {
	t.Helper()
	now := time.Now().UTC()
	if _, err := db.Exec(`INSERT INTO refunds (refund_no, tenant_id, payment_no, out_request_no, amount_fen, status, created_at, updated_at, alipay_app_id)
VALUES (?, 't1', ?, ?, 10, 0, ?, ?, ?)`, no, paymentNo, "or"+no, now, now, appID); err != nil {
		t.Fatal(err)
	}
}

func refundApp(t *testing.T, db *sql.DB, no string) string {
	t.Helper()
	var app string
	if err := db.QueryRow(`SELECT alipay_app_id FROM refunds WHERE refund_no = ?`, no).Scan(&app); err != nil {
		t.Fatal(err)
	}
	return app
}

// A start killed after it recorded the deployment's first app and before the payments
// from before payments named their app were written with it (or part way through
// writing them) leaves the work to the next start, whichever app that one runs on: the
// rows get the first app, the one they were opened on, never a later default that would
// take them over once ALIPAY_APP_ID changes.
func TestAnInterruptedBackfillResumesWithTheFirstApp(t *testing.T) {
	tests := []struct {
		name   string
		nextOn string // the app of the start after the interrupted one
		starts int    // processes starting at once after it
	}{
		{"same app", "2021000000000301", 1},
		{"default app changed meanwhile", "2021000000000302", 1},
		{"several processes at once", "2021000000000302", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, dsn := testenv.MySQL(t)
			ctx := context.Background()
			store := mysql.NewStore(db)
			const firstApp = "2021000000000301"
			insertPayment(t, db, "P0", "")
			insertPayment(t, db, "P1", "")
			insertRefund(t, db, "R1", "P1", "")
			// The interrupted start: the app recorded in its own transaction, then the
			// process killed after the first of the rows was written.
			first, err := store.KeepDeploymentApp(ctx, firstApp, "2088000000000301", "")
			if err != nil || !first {
				t.Fatalf("KeepDeploymentApp = %v, %v; want the first app recorded", first, err)
			}
			if _, err := db.Exec(`UPDATE payments SET alipay_app_id = ? WHERE payment_no = 'P0'`, firstApp); err != nil {
				t.Fatal(err)
			}

			next := appConfig(t, dsn, tt.nextOn, "2088000000000302", "")
			errs := make([]error, tt.starts)
			testenv.Parallel(tt.starts, func(i int) {
				errs[i] = KeepDefaultApp(ctx, next, store, nil, slog.New(slog.DiscardHandler))
			})
			for i, err := range errs {
				if err != nil {
					t.Fatalf("start %d: %v", i, err)
				}
			}
			for _, no := range []string{"P0", "P1"} {
				if got := paymentApp(t, db, no); got != firstApp {
					t.Errorf("payment %s reads %q after the next start, want the first app %s", no, got, firstApp)
				}
			}
			if got := refundApp(t, db, "R1"); got != firstApp {
				t.Errorf("refund R1 reads %q after the next start, want the first app %s", got, firstApp)
			}

			// Done is recorded: a later start walks the payments no more.
			var log bytes.Buffer
			if err := KeepDefaultApp(ctx, next, store, nil, slog.New(slog.NewTextHandler(&log, nil))); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(log.String(), "older_rows_written") {
				t.Errorf("a start after the backfill finished ran it again: %s", log.String())
			}
		})
	}
}
