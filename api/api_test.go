package api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/payment/paymenttest"
	"github.com/paykit/paykit/runs"
)

// fakeStore implements in memory every noun of api.Stores for handler tests; the real
// store is tested against MariaDB in mysql/ and end to end in e2e/.
type fakeStore struct {
	// Payments is the payments and their pay links (payment.Payments, payment.PayLinks),
	// shared with the checkout's tests; its Mu guards the whole fake, and Down fails
	// every call as a database that cannot be reached.
	paymenttest.Payments
	tenant    payment.Tenant
	notes     []payment.ChannelNotification
	purged    map[int64]bool // notifications PurgeNotifications deleted, by id
	idem      map[string]payment.IdempotencyRecord
	released  int
	takeovers int
	renewals  int
	renewErr  error                     // returned by RenewIdempotencyKey if set
	refunds   map[string]payment.Refund // by tenant/refund_no
	anomalies []payment.Anomaly         // recorded, in order
	// orderPayments is what ListOrderPayments lists (newest first); events the outbox.
	orderPayments []payment.Payment
	events        []payment.Event
	// feedHorizon is the highest position of an event the purge deleted (FeedHorizon).
	feedHorizon int64
	// tenantReads counts GetTenant calls, pings Ping calls.
	tenantReads int
	pings       int
}

// stores gives the fake as every noun the API uses.
func (f *fakeStore) stores() api.Stores {
	return api.Stores{
		Payments: f, PayLinks: f, Refunds: f, IdempotencyKeys: f, Notifications: f, Inbox: f,
		EventFeed: f, Tenants: f, APIKeys: f, Anomalies: f, Pinger: f,
	}
}

func (f *fakeStore) err() error {
	if f.Down {
		return errors.New("dial tcp 127.0.0.1:3306: connection refused")
	}
	return nil
}
func (f *fakeStore) Ping(context.Context) error {
	f.Mu.Lock()
	f.pings++
	f.Mu.Unlock()
	return f.err()
}
func (f *fakeStore) TenantByAPIKeyHash(_ context.Context, h string) (payment.Tenant, error) {
	if err := f.err(); err != nil {
		return payment.Tenant{}, err
	}
	if h != f.tenant.APIKeyHash {
		return payment.Tenant{}, payment.ErrNotFound
	}
	return f.tenant, nil
}
func (f *fakeStore) TenantAPIKey(ctx context.Context, h string) (payment.APIKey, payment.Tenant, error) {
	t, err := f.TenantByAPIKeyHash(ctx, h)
	return payment.APIKey{Hash: h, TenantID: t.ID}, t, err
}
func (f *fakeStore) APIKeysChangedSince(context.Context, time.Time, int) ([]payment.APIKey, error) {
	return nil, f.err()
}
func (f *fakeStore) GetTenant(context.Context, string) (payment.Tenant, error) {
	f.Mu.Lock()
	f.tenantReads++
	f.Mu.Unlock()
	return f.tenant, f.err()
}
func (f *fakeStore) ListOrderPayments(_ context.Context, tenantID, orderID string) ([]payment.Payment, error) {
	var ps []payment.Payment
	for _, p := range f.orderPayments {
		if p.TenantID == tenantID && p.OrderID == orderID {
			ps = append(ps, p)
		}
	}
	return ps, f.err()
}
func (f *fakeStore) RecordNotification(_ context.Context, n payment.ChannelNotification) (payment.ChannelNotification, bool, error) {
	if err := f.err(); err != nil {
		return n, false, err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if n.Verified && n.NotifyID != "" {
		for _, old := range f.notes {
			if old.Verified && old.NotifyID == n.NotifyID {
				return old, false, nil
			}
		}
	}
	if !n.Verified {
		n.DispatchDueAt = time.Time{}
	}
	n.ID = int64(len(f.notes) + 1)
	f.notes = append(f.notes, n)
	return n, true, nil
}
func (f *fakeStore) SetNotificationOutcome(_ context.Context, id int64, o string) error {
	if err := f.err(); err != nil {
		return err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.notes[id-1].Outcome = o
	return nil
}

// The inbox, in memory (payment.Inbox; mysql/inbox_test.go tests the real one).
func (f *fakeStore) SettleNotification(_ context.Context, id int64, o string) error {
	if err := f.err(); err != nil {
		return err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.notes[id-1].Outcome, f.notes[id-1].SettledAt, f.notes[id-1].DispatchDueAt = o, time.Now(), time.Time{}
	return nil
}
func (f *fakeStore) SettlePaidNotifications(_ context.Context, now time.Time) (int64, error) {
	if err := f.err(); err != nil {
		return 0, err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var n int64
	for i, note := range f.notes {
		p, ok := f.ByNo[note.PaymentNo]
		if !note.DispatchDueAt.IsZero() && !note.Refund && ok && p.Status == payment.StatusPaid && p.TradeNo == note.TradeNo && note.TradeNo != "" {
			f.notes[i].SettledAt, f.notes[i].DispatchDueAt = now, time.Time{}
			n++
		}
	}
	return n, nil
}
func (f *fakeStore) DueNotifications(_ context.Context, now time.Time, limit int) ([]payment.ChannelNotification, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var due []payment.ChannelNotification
	for _, note := range f.notes {
		if !note.DispatchDueAt.IsZero() && !note.DispatchDueAt.After(now) && len(due) < limit {
			due = append(due, note)
		}
	}
	return due, nil
}
func (f *fakeStore) ClaimNotificationDispatch(_ context.Context, id int64, attempts int, next time.Time) (bool, error) {
	if err := f.err(); err != nil {
		return false, err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	note := &f.notes[id-1]
	if note.DispatchDueAt.IsZero() || note.DispatchAttempts != attempts {
		return false, nil
	}
	note.DispatchAttempts, note.DispatchDueAt = attempts+1, next
	return true, nil
}
func (f *fakeStore) ArmNotification(_ context.Context, id int64, due time.Time) error {
	if err := f.err(); err != nil {
		return err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if note := &f.notes[id-1]; note.DispatchDueAt.IsZero() && note.SettledAt.IsZero() {
		note.DispatchDueAt = due
	}
	return nil
}

func (f *fakeStore) PurgeNotifications(_ context.Context, before time.Time, limit int) (int64, error) {
	if err := f.err(); err != nil {
		return 0, err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var n int64
	for _, note := range f.notes {
		if n < int64(limit) && !f.purged[note.ID] && note.ReceivedAt.Before(before) && (!note.Verified || !note.SettledAt.IsZero()) {
			if f.purged == nil {
				f.purged = map[int64]bool{}
			}
			f.purged[note.ID] = true
			n++
		}
	}
	return n, nil
}

// note returns a copy of the i-th recorded notification, once pred holds for it (the
// inbox hands notifications over in the background) or after 5 s.
func (f *fakeStore) note(t *testing.T, i int, pred func(payment.ChannelNotification) bool) payment.ChannelNotification {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.Mu.Lock()
		var n payment.ChannelNotification
		ok := i < len(f.notes)
		if ok {
			n = f.notes[i]
		}
		f.Mu.Unlock()
		if (ok && pred(n)) || time.Now().After(deadline) {
			return n
		}
		time.Sleep(2 * time.Millisecond)
	}
}
func (f *fakeStore) ReserveIdempotencyKey(_ context.Context, rec payment.IdempotencyRecord) (payment.ReserveOutcome, payment.IdempotencyRecord, error) {
	if err := f.err(); err != nil {
		return 0, rec, err
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	old, ok := f.idem[rec.Key]
	switch {
	case !ok:
		f.idem[rec.Key] = rec
		return payment.ReserveAcquired, rec, nil
	case old.Fingerprint != rec.Fingerprint:
		return payment.ReserveMismatch, old, nil
	case old.State == payment.IdempotencyCompleted:
		return payment.ReserveReplay, old, nil
	case old.LockedUntil.After(time.Now()):
		return payment.ReserveInFlight, old, nil
	default: // the holder's lock ran out: take the key over, as MySQL does
		old.LockVersion++
		old.LockedUntil = rec.LockedUntil
		f.idem[rec.Key] = old
		f.takeovers++
		return payment.ReserveAcquired, old, nil
	}
}
func (f *fakeStore) CompleteIdempotencyKey(_ context.Context, held payment.IdempotencyRecord, status int, body []byte) error {
	key := held.Key
	f.Mu.Lock()
	defer f.Mu.Unlock()
	rec := f.idem[key]
	if rec.State == payment.IdempotencyInFlight && rec.LockVersion != held.LockVersion {
		return payment.Errorf(payment.ECONFLICT, "taken over")
	}
	rec.State, rec.ResponseStatus, rec.ResponseBody = payment.IdempotencyCompleted, status, body
	f.idem[key] = rec
	return nil
}
func (f *fakeStore) RenewIdempotencyKey(_ context.Context, held payment.IdempotencyRecord) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.renewErr != nil {
		return f.renewErr
	}
	rec, ok := f.idem[held.Key]
	switch {
	case !ok:
		return payment.ErrNotFound
	case rec.LockVersion != held.LockVersion:
		return payment.Errorf(payment.ECONFLICT, "taken over")
	case rec.State == payment.IdempotencyInFlight && held.LockedUntil.After(rec.LockedUntil):
		rec.LockedUntil = held.LockedUntil
		f.idem[held.Key] = rec
	}
	f.renewals++
	return nil
}
func (f *fakeStore) PurgeExpiredIdempotencyKeys(_ context.Context, now time.Time) (int64, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var n int64
	for k, rec := range f.idem {
		if rec.ExpiresAt.Before(now) {
			delete(f.idem, k)
			n++
		}
	}
	return n, f.err()
}
func (f *fakeStore) ReleaseIdempotencyKey(_ context.Context, held payment.IdempotencyRecord) error {
	key := held.Key
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if rec, ok := f.idem[key]; ok && rec.State == payment.IdempotencyInFlight && rec.LockVersion == held.LockVersion {
		delete(f.idem, key)
	}
	f.released++
	return nil
}

type fakeGateway struct{ paymenttest.Gateway }

func (fakeGateway) DecodeNotification(_ context.Context, raw payment.RawNotification) (payment.Notification, error) {
	form, _ := url.ParseQuery(string(raw.Body))
	if form.Get("sign") != "good" {
		return payment.Notification{}, &payment.Error{Code: payment.EBADSIGNATURE, Message: "bad signature"}
	}
	amt, _ := payment.ParseYuan(form.Get("total_amount"))
	refunded, _ := payment.ParseYuan(form.Get("refund_fee"))
	return payment.Notification{NotifyID: form.Get("notify_id"), PaymentNo: form.Get("out_trade_no"), TradeNo: "T1",
		TradeStatus: "TRADE_SUCCESS", State: payment.TradePaid, TotalAmount: amt, AppID: "app", SellerID: "seller",
		OutBizNo: form.Get("out_biz_no"), RefundFee: refunded}, nil
}

type fakeOrch struct {
	mu        sync.Mutex
	checkouts int
	// errs answers the next checkouts in turn before err applies; updateIDs records them.
	errs      []error
	updateIDs []string
	lastIn    runs.PaymentInput
	err       error
	errOnce   error // returned by the next checkout only
	signalErr error
	pingErr   error
	pings     int // Ping calls
	block     chan struct{}
	delay     time.Duration // how long each checkout takes
	// refundStarts counts StartRefund calls; refundErr is what they answer.
	refundStarts int
	refundErr    error
	signals      int // Notify and NotifyOrRedrive calls
	// cancels counts CancelPayment calls; with cancelStore and cancelTo set, each moves
	// the payment to that status; cancelErr is what they answer.
	cancels     int
	cancelStore *fakeStore
	cancelTo    *payment.Status
	cancelErr   error
	// redeliveries counts RedeliverEvent calls, which answer redeliverResult, redeliverErr.
	redeliveries    int
	redeliverResult activities.RedeliverResult
	redeliverErr    error
	// opened are the direct checkout's starts; startErr and startRunning what they answer.
	opened       []runs.PaymentInput
	startErr     error
	startRunning bool
}

func (o *fakeOrch) StartRefund(context.Context, payment.Refund) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refundStarts++
	return o.refundErr
}

// StartOpened records the direct checkout's start; startErr is what it answers, and
// startRunning says that a run of the order is already running.
func (o *fakeOrch) StartOpened(_ context.Context, in runs.PaymentInput) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.startErr != nil {
		return false, o.startErr
	}
	if o.startRunning {
		return false, nil
	}
	o.opened = append(o.opened, in)
	return true, nil
}

func (o *fakeOrch) Checkout(_ context.Context, in runs.PaymentInput, updateID string) (runs.CheckoutResult, error) {
	o.mu.Lock()
	o.checkouts++
	o.updateIDs = append(o.updateIDs, updateID)
	o.lastIn = in
	block := o.block
	var next error
	if len(o.errs) > 0 {
		next, o.errs = o.errs[0], o.errs[1:]
	}
	if o.errOnce != nil {
		next, o.errOnce = o.errOnce, nil
	}
	o.mu.Unlock()
	if block != nil {
		<-block
	}
	time.Sleep(o.delay)
	if next != nil {
		return runs.CheckoutResult{}, next
	}
	if o.err != nil {
		return runs.CheckoutResult{}, o.err
	}
	return runs.CheckoutResult{PaymentNo: "P1", TenantID: in.TenantID, OrderID: in.OrderID, Amount: in.Amount,
		Currency: in.Currency, Subject: in.Subject, Status: payment.StatusPending, ExpireAt: time.Now().Add(time.Hour)}, nil
}
func (o *fakeOrch) Notify(context.Context, payment.Payment, runs.NotificationPayload) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.signals++
	return o.signalErr == nil, o.signalErr
}
func (o *fakeOrch) NotifyOrRedrive(context.Context, payment.Payment, runs.NotificationPayload) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.signals++
	return o.signalErr
}
func (o *fakeOrch) Ping(context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pings++
	return o.pingErr
}

// logBuffer collects what the server logs, safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// fakeCache is the Redis fast path in memory, with Redis's semantics for tokens.
type fakeCache struct {
	mu      sync.Mutex
	down    bool                 // token calls fail as with Redis unreachable
	pingErr error                // returned by Ping
	pings   int                  // Ping calls
	tokens  map[string]fakeToken // by tenant + ":" + token
	resp    map[string]payment.IdempotencyRecord
	ttls    map[string]time.Duration // the ttl of the last CacheResponse per key
	seq     int
}

// fakeToken is a checkout token: the order it was issued for and the request bound to it.
type fakeToken struct{ order, binder string }

func newFakeCache() *fakeCache {
	return &fakeCache{tokens: map[string]fakeToken{}, resp: map[string]payment.IdempotencyRecord{}, ttls: map[string]time.Duration{}}
}

func (f *fakeCache) IssueToken(_ context.Context, tenantID, orderID string, _ time.Duration, _ int) (string, time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	tok := fmt.Sprintf("%032x", f.seq)
	f.tokens[tenantID+":"+tok] = fakeToken{order: orderID}
	return tok, 0, nil
}

func (f *fakeCache) ClaimToken(_ context.Context, tenantID, token, orderID, binder string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return "", false, errors.New("dial tcp 127.0.0.1:6379: connection refused")
	}
	t, ok := f.tokens[tenantID+":"+token]
	switch {
	case !ok:
		return "", false, nil
	case t.order != "" && t.order != orderID:
		return t.order, false, nil
	case t.binder == "":
		t.binder = binder
		f.tokens[tenantID+":"+token] = t
		return t.order, true, nil
	case t.binder == binder:
		return t.order, true, nil
	default:
		return "", false, nil
	}
}

func (f *fakeCache) ReleaseToken(_ context.Context, tenantID, token, binder string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t, ok := f.tokens[tenantID+":"+token]; ok && t.binder == binder {
		t.binder = ""
		f.tokens[tenantID+":"+token] = t
	}
	return nil
}

func (f *fakeCache) CachedResponse(_ context.Context, tenantID, key string) (payment.IdempotencyRecord, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, ok := f.resp[tenantID+":"+key]
	return rec, ok, nil
}

func (f *fakeCache) CacheResponse(_ context.Context, rec payment.IdempotencyRecord, ttl time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resp[rec.TenantID+":"+rec.Key] = rec
	f.ttls[rec.TenantID+":"+rec.Key] = ttl
	return nil
}

func (f *fakeCache) NotificationDone(context.Context, string) (bool, error)            { return false, nil }
func (f *fakeCache) MarkNotificationDone(context.Context, string, time.Duration) error { return nil }
func (f *fakeCache) Ping(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pings++
	return f.pingErr
}

const key = "sk_test_unit_0123456789"

func newServer(t *testing.T) (*httptest.Server, *fakeStore, *fakeOrch) {
	t.Helper()
	return newServerWith(t, serverOptions{cfg: api.Config{BodyLimit: "1K"}})
}

// serverOptions are what a test may change in the server under test.
type serverOptions struct {
	cfg    api.Config
	cache  api.Cache // nil: no Redis
	logger *slog.Logger
	// gateways resolves the Alipay apps; nil: one fake app for every tenant.
	gateways payment.Gateways
}

func newServerWith(t *testing.T, o serverOptions) (*httptest.Server, *fakeStore, *fakeOrch) {
	t.Helper()
	srv, _, st, orch := newServers(t, o)
	return srv, st, orch
}

// newServers serves one API server on two listeners, as `paykit api` does: the public
// one and the admin one (AdminHandler).
func newServers(t *testing.T, o serverOptions) (public, admin *httptest.Server, _ *fakeStore, _ *fakeOrch) {
	t.Helper()
	st := &fakeStore{
		tenant: payment.Tenant{ID: "t1", APIKeyHash: api.HashAPIKey(key), AlipayAppID: "app", AlipaySeller: "seller"},
		Payments: paymenttest.Payments{ByNo: map[string]payment.Payment{
			"P1": {PaymentNo: "P1", TenantID: "t1", OrderID: "o1", Amount: 990, Status: payment.StatusPending, WorkflowID: "payment:t1:o1"}}},
		idem: map[string]payment.IdempotencyRecord{},
	}
	orch := &fakeOrch{}
	if o.gateways == nil {
		o.gateways = payment.SingleGateway{Gateway: fakeGateway{}}
	}
	// Every exchange a test makes is checked against the OpenAPI contract.
	s := api.New(o.cfg, st.stores(), o.gateways, orch, o.cache, o.logger, nil)
	public = httptest.NewServer(checked(t, s))
	t.Cleanup(public.Close)
	admin = httptest.NewServer(s.AdminHandler())
	t.Cleanup(admin.Close)
	return public, admin, st, orch
}

func post(t *testing.T, url, body string, h map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestErrorsAreProblemJSON(t *testing.T) {
	srv, _, _ := newServer(t)
	auth := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}
	tests := []struct {
		name string
		body string
		h    map[string]string
		want int
	}{
		{"no auth", `{}`, nil, 401},
		{"wrong key", `{}`, map[string]string{"Authorization": "Bearer nope"}, 401},
		{"body too large", `{"subject":"` + strings.Repeat("x", 2000) + `"}`, auth, 413},
		{"malformed json", `{`, auth, 400},
		{"amount as string", `{"order_id":"o","amount_fen":"9.90","subject":"s"}`, auth, 400},
		{"not declared as JSON", `{"order_id":"o","amount_fen":990,"subject":"s"}`, map[string]string{"Authorization": "Bearer " + key}, 415},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, srv.URL+"/v1/payments", tc.body, tc.h)
			if resp.StatusCode != tc.want || resp.Header.Get("Content-Type") != "application/problem+json" ||
				!strings.Contains(body, `"status":`) || resp.Header.Get("X-Request-Id") == "" {
				t.Fatalf("HTTP %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
		})
	}
}

func TestIdempotencyKeyInFlightAndRelease(t *testing.T) {
	srv, st, orch := newServer(t)
	h := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json", "Idempotency-Key": "unit-key-0001"}
	body := `{"order_id":"o1","amount_fen":990,"subject":"s"}`
	orch.block = make(chan struct{})
	done := make(chan int)
	go func() {
		resp, _ := post(t, srv.URL+"/v1/payments", body, h)
		done <- resp.StatusCode
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		orch.mu.Lock()
		n := orch.checkouts
		orch.mu.Unlock()
		if n == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, b := post(t, srv.URL+"/v1/payments", body, h)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(b, "in_flight") {
		t.Fatalf("concurrent: HTTP %d %s", resp.StatusCode, b)
	}
	close(orch.block)
	if code := <-done; code != http.StatusCreated {
		t.Fatalf("first: HTTP %d", code)
	}
	// A failure that is not the client's fault frees the key for a retry.
	orch.block = nil
	orch.err = &payment.Error{Code: payment.EUNAVAILABLE, Message: "temporal down"}
	h["Idempotency-Key"] = "unit-key-0002"
	if resp, b := post(t, srv.URL+"/v1/payments", body, h); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("unavailable: HTTP %d %s", resp.StatusCode, b)
	}
	if st.released != 1 {
		t.Fatalf("released = %d", st.released)
	}
	orch.err = nil
	if resp, b := post(t, srv.URL+"/v1/payments", body, h); resp.StatusCode != http.StatusCreated {
		t.Fatalf("retry after release: HTTP %d %s", resp.StatusCode, b)
	}
}

// cancelTo, if set, is the status CancelPayment moves the payment to in the fake store.
func (o *fakeOrch) CancelPayment(_ context.Context, p payment.Payment) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cancels++
	if o.cancelStore != nil && o.cancelTo != nil {
		o.cancelStore.Mu.Lock()
		q := o.cancelStore.ByNo[p.PaymentNo]
		q.Status = *o.cancelTo
		o.cancelStore.ByNo[p.PaymentNo] = q
		o.cancelStore.Mu.Unlock()
	}
	return o.cancelErr
}

func (o *fakeOrch) RedeliverEvent(_ context.Context, tenantID, eventID string) (activities.RedeliverResult, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.redeliveries++
	return o.redeliverResult, o.redeliverErr
}
