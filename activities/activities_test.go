package activities_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/alipaysim/simtest"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/redis"
	"github.com/paykit/paykit/webhook"
)

const (
	testAppID    = simtest.AppID
	testSellerID = simtest.SellerID
	testSecret   = "whsec_activities_test"
)

func TestMain(m *testing.M) {
	// The Redis-down test makes go-redis log every failed dial; keep test output readable.
	goredis.SetLogger(redis.SlogLogger{Logger: slog.New(slog.DiscardHandler)})
	os.Exit(m.Run())
}

// delivery is one webhook as the merchant received it.
type delivery struct {
	eventID, signature string
	body               []byte
	header             http.Header
}

// merchant is a tenant's webhook endpoint. status chooses the HTTP status it answers.
type merchant struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []delivery
	status int
}

func newMerchant(tb testing.TB) *merchant {
	tb.Helper()
	m := &merchant{status: http.StatusOK}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		defer m.mu.Unlock()
		m.got = append(m.got, delivery{eventID: r.Header.Get(activities.EventIDHeader),
			signature: r.Header.Get(activities.SignatureHeader), body: body, header: r.Header.Clone()})
		w.WriteHeader(m.status)
	}))
	tb.Cleanup(m.srv.Close)
	return m
}

func (m *merchant) answer(status int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status = status
}

func (m *merchant) deliveries() []delivery {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]delivery(nil), m.got...)
}

// fixture is the activities wired to a fresh database, a Redis prefix, an embedded
// simulator behind real HTTP and a merchant endpoint: everything the worker has except
// Temporal itself, which the test activity environment stands in for.
type fixture struct {
	acts     *activities.Activities
	store    *mysql.Store
	db       *sql.DB
	sim      *alipaysim.Simulator
	merchant *merchant
	env      *testsuite.TestActivityEnvironment
	tenantID string
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	ctx := context.Background()
	db, _ := testenv.MySQL(tb)
	st := mysql.NewStore(db)
	rdb, prefix := testenv.Redis(tb)

	keys := simtest.Keys(tb)
	sim, srv := simtest.Start(tb, nil)
	gw, err := alipay.New(alipay.Config{
		AppID: testAppID, SellerID: testSellerID,
		AppPrivateKeyPEM: keys.AppPrivateKeyPEM, AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM,
		GatewayURL: srv.URL + alipaysim.GatewayPath, NotifyURL: "http://127.0.0.1:1/callbacks/alipay",
		Timeout: 5 * time.Second,
	})
	if err != nil {
		tb.Fatal(err)
	}

	m := newMerchant(tb)
	f := &fixture{store: st, db: db, sim: sim, merchant: m, tenantID: "t_" + randomHex(4)}
	if err := st.UpsertTenant(ctx, payment.Tenant{
		ID: f.tenantID, Name: "activities test", APIKeyHash: randomHex(32), NotifyURL: m.srv.URL + "/webhooks",
		WebhookSecret: testSecret, AlipayAppID: testAppID, AlipaySeller: testSellerID, CreatedAt: time.Now(),
	}); err != nil {
		tb.Fatal(err)
	}
	f.acts = &activities.Activities{
		Store: storesOf(st), Gateway: gw, HTTP: &http.Client{Timeout: 5 * time.Second},
		Locker: redis.OrderLocker{Client: redis.New(rdb, prefix), TTL: 10 * time.Second, Wait: 200 * time.Millisecond},
		Logger: slog.New(slog.DiscardHandler), Benefit: "vip_month",
	}
	var suite testsuite.WorkflowTestSuite
	f.env = suite.NewTestActivityEnvironment()
	f.env.RegisterActivity(f.acts)
	return f
}

// local runs fn as the worker runs it, as a local activity, and decodes its result.
func (f *fixture) local(tb testing.TB, out any, fn any, args ...any) error {
	tb.Helper()
	v, err := f.env.ExecuteLocalActivity(fn, args...)
	if err == nil && out != nil {
		if derr := v.Get(out); derr != nil {
			tb.Fatalf("decode result: %v", derr)
		}
	}
	return err
}

// remote runs fn as a regular activity and decodes its result.
func (f *fixture) remote(tb testing.TB, out any, fn any, args ...any) error {
	tb.Helper()
	v, err := f.env.ExecuteActivity(fn, args...)
	if err == nil && out != nil && v.HasValue() {
		if derr := v.Get(out); derr != nil {
			tb.Fatalf("decode result: %v", derr)
		}
	}
	return err
}

func (f *fixture) count(tb testing.TB, query string, args ...any) int {
	tb.Helper()
	var n int
	if err := f.db.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return n
}

func (f *fixture) createInput(orderID string) activities.CreatePaymentInput {
	return activities.CreatePaymentInput{
		PaymentNo: "P" + randomHex(10), TenantID: f.tenantID, OrderID: orderID,
		Amount: 12_34, Currency: "CNY", Subject: "VIP 1 month",
		ExpireAt: time.Now().Add(15 * time.Minute), WorkflowID: payment.WorkflowID(f.tenantID, orderID),
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// applicationError asserts err carries a Temporal application error of errType and
// the given retryability.
func applicationError(tb testing.TB, err error, errType string, nonRetryable bool) {
	tb.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		tb.Fatalf("error %v (%T) is not an application error", err, err)
	}
	if ae.Type() != errType || ae.NonRetryable() != nonRetryable {
		tb.Fatalf("application error type=%q nonRetryable=%v, want %q and %v (%v)",
			ae.Type(), ae.NonRetryable(), errType, nonRetryable, err)
	}
}

// TestSuccessPath_EveryActivityRunTwice runs the success path with every activity
// executed twice in a row, as Temporal does when a worker dies after the side effect but
// before reporting it. The second run of each must change nothing.
func TestSuccessPath_EveryActivityRunTwice(t *testing.T) {
	f := newFixture(t)
	in := f.createInput("order-1")

	var c1, c2 activities.CreatePaymentResult
	if err := f.local(t, &c1, f.acts.CreatePayment, in); err != nil {
		t.Fatal(err)
	}
	if err := f.local(t, &c2, f.acts.CreatePayment, in); err != nil {
		t.Fatal(err)
	}
	if c1.Existed || !c2.Existed || c2.Payment.PaymentNo != in.PaymentNo || c2.Payment.Status != payment.StatusPending {
		t.Fatalf("create twice: first existed=%v, second existed=%v payment %+v", c1.Existed, c2.Existed, c2.Payment)
	}
	// A retry of a run that lost its result may carry a different payment_no: the
	// active-order index still hands back the one pending payment.
	other := in
	other.PaymentNo = "P" + randomHex(10)
	var c3 activities.CreatePaymentResult
	if err := f.local(t, &c3, f.acts.CreatePayment, other); err != nil {
		t.Fatal(err)
	}
	if !c3.Existed || c3.Payment.PaymentNo != in.PaymentNo {
		t.Fatalf("create with another payment_no: existed=%v payment_no=%s, want the existing %s", c3.Existed, c3.Payment.PaymentNo, in.PaymentNo)
	}
	if n := f.count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ?", f.tenantID, in.OrderID); n != 1 {
		t.Fatalf("payments rows = %d, want 1", n)
	}

	open := activities.OpenTradeInput{PaymentNo: in.PaymentNo, Subject: in.Subject, Amount: in.Amount,
		ExpireAt: in.ExpireAt, Method: payment.MethodQR}
	var o1, o2 activities.OpenTradeResult
	if err := f.remote(t, &o1, f.acts.OpenTrade, open); err != nil {
		t.Fatal(err)
	}
	if err := f.remote(t, &o2, f.acts.OpenTrade, open); err != nil {
		t.Fatal(err)
	}
	if o1.QRCode == "" || o1.QRCode != o2.QRCode {
		t.Fatalf("precreate twice: QR codes %q and %q, want one non-empty code", o1.QRCode, o2.QRCode)
	}
	if n := len(f.sim.Trades()); n != 1 {
		t.Fatalf("simulator holds %d trades, want 1", n)
	}

	var waiting payment.Trade
	if err := f.remote(t, &waiting, f.acts.QueryTrade, in.PaymentNo); err != nil {
		t.Fatal(err)
	}
	if waiting.State != payment.TradeWaiting {
		t.Fatalf("query before paying: %v, want WAITING", waiting.State)
	}
	if _, err := f.sim.Pay(testAppID, in.PaymentNo, "2088102100000001"); err != nil {
		t.Fatal(err)
	}
	var paid payment.Trade
	if err := f.remote(t, &paid, f.acts.QueryTrade, in.PaymentNo); err != nil {
		t.Fatal(err)
	}
	if paid.State != payment.TradePaid || paid.TradeNo == "" || paid.Amount != in.Amount {
		t.Fatalf("query after paying: %+v", paid)
	}

	mark := activities.MarkPaidInput{PaymentNo: in.PaymentNo, TenantID: f.tenantID, OrderID: in.OrderID,
		TradeNo: paid.TradeNo, PaidAt: paid.PaidAt}
	var m1, m2 payment.Transition
	if err := f.local(t, &m1, f.acts.MarkPaid, mark); err != nil {
		t.Fatal(err)
	}
	if err := f.local(t, &m2, f.acts.MarkPaid, mark); err != nil {
		t.Fatal(err)
	}
	if !m1.Changed || m1.EventID == "" || m2.Changed || m2.Payment.Status != payment.StatusPaid || m2.Payment.TradeNo != paid.TradeNo {
		t.Fatalf("mark paid twice: first %+v, second %+v", m1, m2)
	}
	if n := f.count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ?", in.PaymentNo); n != 1 {
		t.Fatalf("outbox events = %d, want 1", n)
	}

	// The expiry path arriving late must not undo the payment.
	var closed payment.CloseOutcome
	if err := f.remote(t, &closed, f.acts.CloseTrade, in.PaymentNo); err != nil {
		t.Fatal(err)
	}
	if closed != payment.CloseAlreadyPaid {
		t.Fatalf("close a paid trade: %v, want %v", closed, payment.CloseAlreadyPaid)
	}
	var cp payment.Transition
	if err := f.local(t, &cp, f.acts.ClosePayment, activities.ClosePaymentInput{PaymentNo: in.PaymentNo, Reason: "expired"}); err != nil {
		t.Fatal(err)
	}
	if cp.Changed || cp.Payment.Status != payment.StatusPaid {
		t.Fatalf("close a paid payment: %+v, want it unchanged and paid", cp)
	}

	grant := activities.GrantBenefitInput{TenantID: f.tenantID, PaymentNo: in.PaymentNo, OrderID: in.OrderID}
	var g1, g2 bool
	if err := f.local(t, &g1, f.acts.GrantBenefit, grant); err != nil {
		t.Fatal(err)
	}
	if err := f.local(t, &g2, f.acts.GrantBenefit, grant); err != nil {
		t.Fatal(err)
	}
	if !g1 || g2 {
		t.Fatalf("grant twice: created %v then %v, want true then false", g1, g2)
	}
	if n := f.count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", in.PaymentNo); n != 1 {
		t.Fatalf("grants = %d, want 1", n)
	}

	for range 2 {
		if err := f.remote(t, nil, f.acts.DeliverWebhook, m1.EventID); err != nil {
			t.Fatal(err)
		}
	}
	got := f.merchant.deliveries()
	if len(got) != 1 {
		t.Fatalf("merchant received %d webhooks, want 1 (a delivered event is not sent again)", len(got))
	}
	if got[0].eventID != m1.EventID || webhook.Verify(got[0].signature, got[0].body, testSecret, webhook.DefaultTolerance) != nil {
		t.Fatalf("webhook event id %q signature %q: want %q and a valid signature", got[0].eventID, got[0].signature, m1.EventID)
	}
	t.Logf("each activity ran twice: 1 payment, 1 trade, 1 paid transition, 1 event, 1 grant, %d webhook", len(got))
}

// TestErrors_BusinessRefusalsStopAndInfrastructureFailuresRetry checks how each kind of
// failure is reported to Temporal.
func TestErrors_BusinessRefusalsStopAndInfrastructureFailuresRetry(t *testing.T) {
	f := newFixture(t)

	t.Run("invalid payment is not retried", func(t *testing.T) {
		in := f.createInput("order-bad")
		in.Amount = 0
		err := f.local(t, nil, f.acts.CreatePayment, in)
		applicationError(t, err, activities.ErrTypeInvalid, true)
		if n := f.count(t, "SELECT COUNT(*) FROM payments WHERE order_id = 'order-bad'"); n != 0 {
			t.Fatalf("a refused payment wrote %d rows", n)
		}
	})

	t.Run("a payment for a paid order is refused, not retried", func(t *testing.T) {
		first := f.createInput("order-paid")
		if err := f.local(t, nil, f.acts.CreatePayment, first); err != nil {
			t.Fatal(err)
		}
		if err := f.local(t, nil, f.acts.MarkPaid, activities.MarkPaidInput{PaymentNo: first.PaymentNo, TenantID: f.tenantID,
			OrderID: first.OrderID, TradeNo: "2026120122001400000000000009"}); err != nil {
			t.Fatal(err)
		}
		err := f.local(t, nil, f.acts.CreatePayment, f.createInput("order-paid"))
		applicationError(t, err, activities.ErrTypeOrderPaid, true)
		if n := f.count(t, "SELECT COUNT(*) FROM payments WHERE order_id = 'order-paid'"); n != 1 {
			t.Fatalf("payments for the paid order = %d, want 1", n)
		}
	})

	t.Run("granting an unpaid payment is not retried", func(t *testing.T) {
		in := f.createInput("order-unpaid")
		if err := f.local(t, nil, f.acts.CreatePayment, in); err != nil {
			t.Fatal(err)
		}
		err := f.local(t, nil, f.acts.GrantBenefit, activities.GrantBenefitInput{TenantID: f.tenantID, PaymentNo: in.PaymentNo, OrderID: in.OrderID})
		applicationError(t, err, activities.ErrTypeInvalid, true)
	})

	t.Run("unknown webhook event is not retried", func(t *testing.T) {
		err := f.remote(t, nil, f.acts.DeliverWebhook, "evt_does_not_exist")
		applicationError(t, err, activities.ErrTypeInvalid, true)
	})

	t.Run("alipay system error is retried", func(t *testing.T) {
		if err := f.sim.InjectGatewayFault(alipaysim.GatewayFault{Mode: alipaysim.FaultSystemError, Count: 1, Method: "alipay.trade.query"}); err != nil {
			t.Fatal(err)
		}
		err := f.remote(t, nil, f.acts.QueryTrade, "P"+randomHex(10))
		var ae *temporal.ApplicationError
		if err == nil || (errors.As(err, &ae) && ae.NonRetryable()) {
			t.Fatalf("ACQ.SYSTEM_ERROR gave %v, want a retryable error", err)
		}
		var nx payment.Trade
		if err := f.remote(t, &nx, f.acts.QueryTrade, "P"+randomHex(10)); err != nil || nx.State != payment.TradeNotExist {
			t.Fatalf("query after the fault: %+v %v, want NOT_EXIST and no error", nx, err)
		}
	})

	t.Run("merchant down is retried and delivered later", func(t *testing.T) {
		in := f.createInput("order-webhook")
		if err := f.local(t, nil, f.acts.CreatePayment, in); err != nil {
			t.Fatal(err)
		}
		var tr payment.Transition
		if err := f.local(t, &tr, f.acts.MarkPaid, activities.MarkPaidInput{PaymentNo: in.PaymentNo, TenantID: f.tenantID,
			OrderID: in.OrderID, TradeNo: "2026120122001400000000000001"}); err != nil {
			t.Fatal(err)
		}
		f.merchant.answer(http.StatusServiceUnavailable)
		err := f.remote(t, nil, f.acts.DeliverWebhook, tr.EventID)
		var ae *temporal.ApplicationError
		if err == nil || (errors.As(err, &ae) && ae.NonRetryable()) {
			t.Fatalf("merchant 503 gave %v, want a retryable error", err)
		}
		ev, gerr := f.store.GetEvent(context.Background(), tr.EventID)
		if gerr != nil || ev.Delivered || ev.Attempts != 1 || ev.LastError == "" {
			t.Fatalf("event after a failed delivery: %+v %v, want undelivered with 1 attempt and the error", ev, gerr)
		}
		f.merchant.answer(http.StatusOK)
		if err := f.remote(t, nil, f.acts.DeliverWebhook, tr.EventID); err != nil {
			t.Fatal(err)
		}
		if ev, _ := f.store.GetEvent(context.Background(), tr.EventID); !ev.Delivered {
			t.Fatalf("event not marked delivered after the merchant recovered: %+v", ev)
		}
	})
}

// TestMarkPaid_LockContentionRereadsTheStatus follows the seed: a caller that cannot get
// the order lock waits briefly, then re-reads the status instead of failing.
func TestMarkPaid_LockContentionRereadsTheStatus(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	in := f.createInput("order-locked")
	if err := f.local(t, nil, f.acts.CreatePayment, in); err != nil {
		t.Fatal(err)
	}
	release, ok, err := f.acts.Locker.LockOrder(ctx, f.tenantID, in.OrderID)
	if err != nil || !ok {
		t.Fatalf("hold the order lock: %v %v", ok, err)
	}
	defer release(ctx)
	mark := activities.MarkPaidInput{PaymentNo: in.PaymentNo, TenantID: f.tenantID, OrderID: in.OrderID, TradeNo: "2026120122001400000000000002"}

	// Still pending behind someone else's lock: a retryable "busy", nothing written.
	start := time.Now()
	err = f.local(t, nil, f.acts.MarkPaid, mark)
	applicationError(t, err, activities.ErrTypeLockBusy, false)
	t.Logf("busy lock: MarkPaid answered %q after %v", activities.ErrTypeLockBusy, time.Since(start).Round(time.Millisecond))
	if n := f.count(t, "SELECT COUNT(*) FROM payments WHERE payment_no = ? AND status = 0", in.PaymentNo); n != 1 {
		t.Fatal("payment changed while the lock was held by another")
	}

	// The holder finishes the payment: the waiter's re-read is the answer.
	if _, err := f.store.MarkPaid(ctx, in.PaymentNo, mark.TradeNo, time.Now()); err != nil {
		t.Fatal(err)
	}
	var tr payment.Transition
	if err := f.local(t, &tr, f.acts.MarkPaid, mark); err != nil {
		t.Fatalf("MarkPaid after the holder paid: %v, want the paid payment", err)
	}
	if tr.Changed || tr.Payment.Status != payment.StatusPaid {
		t.Fatalf("re-read after contention: %+v, want paid and unchanged", tr)
	}
	// The answer names the payment's outbox event, so the workflow still delivers the
	// webhook: the holder may be a worker that died right after its commit, leaving the
	// lock held until its TTL, and the run's retry lands here.
	if tr.EventID == "" {
		t.Fatalf("re-read after contention: %+v, want the payment.paid event id", tr)
	}
	if n := f.count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ?", in.PaymentNo); n != 1 {
		t.Fatalf("outbox events = %d, want 1", n)
	}
}

// TestMarkPaid_RedisDownStillExactlyOnce takes the lock away entirely: MySQL's row lock
// and compare-and-set alone keep 20 concurrent confirmations to one.
func TestMarkPaid_RedisDownStillExactlyOnce(t *testing.T) {
	f := newFixture(t)
	opt, err := redis.Options("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	down := redis.New(rdb, "down:")
	f.acts.Locker = redis.OrderLocker{Client: down, TTL: time.Second, Wait: 50 * time.Millisecond}

	in := f.createInput("order-noredis")
	if err := f.local(t, nil, f.acts.CreatePayment, in); err != nil {
		t.Fatal(err)
	}
	mark := activities.MarkPaidInput{PaymentNo: in.PaymentNo, TenantID: f.tenantID, OrderID: in.OrderID, TradeNo: "2026120122001400000000000003"}
	const n = 20
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		changed int
		errs    []error
	)
	for range n {
		wg.Go(func() {
			tr, err := f.acts.MarkPaid(context.Background(), mark)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			if tr.Changed {
				changed++
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 || changed != 1 {
		t.Fatalf("%d MarkPaid calls with Redis down: %d changed, errors %v; want exactly 1 change and no errors", n, changed, errs)
	}
	if c := f.count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ?", in.PaymentNo); c != 1 {
		t.Fatalf("outbox events = %d, want 1", c)
	}
	t.Logf("Redis down: %d concurrent MarkPaid calls, %d change, 1 event", n, changed)
}

// storesOf gives every noun of the activities' Stores the one MariaDB store.
func storesOf(st *mysql.Store) activities.Stores {
	return activities.Stores{
		Payments: st, PaymentTransitions: st, PayLinks: st, QuerySchedule: st, Refunds: st, RefundTransitions: st,
		Outbox: st, EventFeed: st, Grants: st, IdempotencyKeys: st, Tenants: st, Anomalies: st,
		NotificationRecords: st, EventRetention: st, AnomalyRetention: st,
	}
}

// The worker refuses activities with a noun of the store left nil (internal/system
// panics on it), so that no activity panics on its first call instead.
func TestStoresCheckNamesTheNounLeftNil(t *testing.T) {
	st := storesOf(mysql.NewStore(nil))
	if err := st.Check(); err != nil {
		t.Fatalf("every noun set: %v", err)
	}
	st.Grants = nil
	if err := st.Check(); err == nil || !strings.Contains(err.Error(), "Stores.Grants is not set") {
		t.Fatalf("Grants left nil: %v", err)
	}
}
