package checkout_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/checkout"
	"github.com/paykit/paykit/payment"
)

const tenant = "t1"

type rig struct {
	st     *fakeStore
	orch   *fakeOrch
	tokens *fakeTokens
	co     *checkout.Checkout
}

// newRig builds a Checkout over fakes; directTTL zero leaves every checkout to the
// workflow's update. noFault marks which failures give the token back.
func newRig(tb testing.TB, directTTL time.Duration, gw fakeGateway) *rig {
	tb.Helper()
	r := &rig{st: newFakeStore(), orch: &fakeOrch{}, tokens: newFakeTokens("tok-o1", "o1", "tok-o2", "o2")}
	cfg := checkout.Config{DirectTTL: directTTL, NoFault: func(err error) bool {
		code := payment.ErrorCode(err)
		return code == payment.EUNAVAILABLE || code == payment.EFINISHING
	}}
	r.co = checkout.New(cfg, r.st.stores(), payment.SingleGateway{Gateway: gw, ID: "app1"}, r.orch, r.tokens,
		slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	return r
}

func coffee(order string) checkout.Request {
	return checkout.Request{OrderID: order, AmountFen: 990, Subject: "Coffee"}
}

// A request is checked before anything is read or started: the amount, the currency, the
// subject, the method, and the URLs each method allows; the defaults are CNY and page.
func TestRequestIsChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*checkout.Request)
		want string // the error code, "" for accepted
	}{
		{"defaults", func(*checkout.Request) {}, ""},
		{"zero amount", func(r *checkout.Request) { r.AmountFen = 0 }, payment.EINVALID},
		{"negative amount", func(r *checkout.Request) { r.AmountFen = -1 }, payment.EINVALID},
		{"other currency", func(r *checkout.Request) { r.Currency = "USD" }, payment.EINVALID},
		{"no subject", func(r *checkout.Request) { r.Subject = "" }, payment.EINVALID},
		{"subject too long", func(r *checkout.Request) { r.Subject = strings.Repeat("s", payment.MaxSubjectBytes+1) }, payment.EINVALID},
		{"no order id", func(r *checkout.Request) { r.OrderID = "" }, payment.EINVALID},
		{"unknown method", func(r *checkout.Request) { r.Method = "wechat" }, payment.EINVALID},
		{"wap with quit_url", func(r *checkout.Request) {
			r.Method, r.ReturnURL, r.QuitURL = payment.MethodWap, "https://shop/r", "https://shop/q"
		}, ""},
		{"app", func(r *checkout.Request) { r.Method = payment.MethodApp }, ""},
		{"qr", func(r *checkout.Request) { r.Method = payment.MethodQR }, ""},
		{"return_url http", func(r *checkout.Request) { r.ReturnURL = "http://shop/r" }, ""},
		{"return_url not http", func(r *checkout.Request) { r.ReturnURL = "ftp://shop/r" }, payment.EINVALID},
		{"return_url too long", func(r *checkout.Request) {
			r.ReturnURL = "https://shop/" + strings.Repeat("r", payment.MaxReturnURLBytes)
		}, payment.EINVALID},
		{"quit_url not http", func(r *checkout.Request) { r.Method, r.QuitURL = payment.MethodWap, "javascript:alert(1)" }, payment.EINVALID},
		{"quit_url too long", func(r *checkout.Request) {
			r.Method, r.QuitURL = payment.MethodWap, "https://shop/"+strings.Repeat("q", payment.MaxQuitURLBytes)
		}, payment.EINVALID},
		{"quit_url for page", func(r *checkout.Request) { r.QuitURL = "https://shop/q" }, payment.EINVALID},
		{"quit_url for app", func(r *checkout.Request) { r.Method, r.QuitURL = payment.MethodApp, "https://shop/q" }, payment.EINVALID},
		{"return_url for app", func(r *checkout.Request) { r.Method, r.ReturnURL = payment.MethodApp, "https://shop/r" }, payment.EINVALID},
		{"token too long", func(r *checkout.Request) { r.CheckoutToken = strings.Repeat("k", 129) }, payment.EINVALID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 0, fakeGateway{})
			req := coffee("o1")
			tc.edit(&req)
			res, err := r.co.Pay(context.Background(), tenant, req, "")
			if got := payment.ErrorCode(err); got != tc.want {
				t.Fatalf("code %q (%v), want %q", got, err, tc.want)
			}
			if tc.want != "" {
				if len(r.orch.updateIDs) != 0 || r.st.Creates != 0 {
					t.Fatalf("a refused request reached the workflow (%d) or the store (%d)", len(r.orch.updateIDs), r.st.Creates)
				}
				return
			}
			in := r.orch.lastIn
			if res.PaymentNo == "" || in.Currency != "CNY" || in.Method != req.Method.OrPage() || in.QuitURL != req.QuitURL ||
				in.ReturnURL != req.ReturnURL || in.Amount != 990 || in.TenantID != tenant {
				t.Fatalf("workflow input %+v, answer %+v", in, res)
			}
		})
	}
}

// A paid order is refused with its PAID payment, whatever the key, with no workflow
// checkout; a repurchase passes; the workflow's own order_already_paid carries the paid
// payment too; a failed paid-order read lets the checkout go on.
func TestPaidOrderIsRefusedWithThePaidPayment(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, 15*time.Minute, fakeGateway{})
	r.st.ByNo["PPAID"] = payment.Payment{PaymentNo: "PPAID", TenantID: tenant, OrderID: "paid1", Amount: 990, Status: payment.StatusPaid}
	for _, key := range []string{"", "paid-key-0001"} {
		_, err := r.co.Pay(ctx, tenant, coffee("paid1"), key)
		var pe *checkout.PaymentError
		if payment.ErrorCode(err) != payment.EORDERPAID || !errors.As(err, &pe) || pe.Payment.PaymentNo != "PPAID" {
			t.Fatalf("key %q: %v, want order_already_paid with PPAID", key, err)
		}
	}
	if len(r.orch.updateIDs) != 0 || len(r.orch.opened) != 0 || r.st.Creates != 0 {
		t.Fatalf("a paid order reached the workflow (%d updates, %d starts) or the store (%d)", len(r.orch.updateIDs), len(r.orch.opened), r.st.Creates)
	}

	again := coffee("paid1")
	again.Repurchase = true
	if _, err := r.co.Pay(ctx, tenant, again, ""); err != nil || len(r.orch.opened) != 1 || !r.orch.opened[0].Repurchase {
		t.Fatalf("repurchase: %v, starts %+v", err, r.orch.opened)
	}

	// The workflow's refusal (the store found the order paid) answers with the paid payment.
	r2 := newRig(t, 0, fakeGateway{})
	r2.st.ByNo["PPAID"] = r.st.ByNo["PPAID"]
	r2.orch.err = payment.Errorf(payment.EORDERPAID, "order paid1 is already paid")
	_, err := r2.co.Pay(ctx, tenant, again, "")
	var pe *checkout.PaymentError
	if payment.ErrorCode(err) != payment.EORDERPAID || !errors.As(err, &pe) || pe.Payment.PaymentNo != "PPAID" {
		t.Fatalf("refused by the workflow: %v", err)
	}

	// The read failing is not a refusal: the store below refuses a paid order anyway.
	r3 := newRig(t, 0, fakeGateway{})
	r3.st.StandingErr = errors.New("mysql down")
	if _, err := r3.co.Pay(ctx, tenant, coffee("o5"), ""); err != nil || len(r3.orch.updateIDs) != 1 {
		t.Fatalf("paid-order read failed: %v, %d updates", err, len(r3.orch.updateIDs))
	}
}

// A one-time token is spent by its first checkout; another request is told token_used
// with the order's payment, a retry with the same Idempotency-Key finds it still its
// own, a token of another order is unprocessable, a failure that is no fault of the
// client's gives it back, and with Redis down the checkout goes on without it.
func TestCheckoutTokenIsClaimedOnce(t *testing.T) {
	ctx := context.Background()
	withToken := func(order, token string) checkout.Request {
		req := coffee(order)
		req.CheckoutToken = token
		return req
	}
	t.Run("one use", func(t *testing.T) {
		r := newRig(t, 15*time.Minute, fakeGateway{})
		res, err := r.co.Pay(ctx, tenant, withToken("o1", "tok-o1"), "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.co.Pay(ctx, tenant, withToken("o1", "tok-o1"), "")
		var pe *checkout.PaymentError
		if payment.ErrorCode(err) != payment.ETOKENUSED || !errors.As(err, &pe) || pe.Payment.PaymentNo != res.PaymentNo {
			t.Fatalf("second use: %v, want token_used with %s", err, res.PaymentNo)
		}
	})
	t.Run("same key", func(t *testing.T) {
		r := newRig(t, 0, fakeGateway{})
		for i := range 2 {
			if _, err := r.co.Pay(ctx, tenant, withToken("o1", "tok-o1"), "key-0001"); err != nil {
				t.Fatalf("try %d with the same key: %v", i, err)
			}
		}
		if r.orch.updateIDs[0] != r.orch.updateIDs[1] {
			t.Fatalf("a retry with the key got another update id: %v", r.orch.updateIDs)
		}
		if _, err := r.co.Pay(ctx, tenant, withToken("o1", "tok-o1"), "key-0002"); payment.ErrorCode(err) != payment.ETOKENUSED {
			t.Fatalf("another key: %v, want token_used", err)
		}
	})
	t.Run("another order", func(t *testing.T) {
		r := newRig(t, 0, fakeGateway{})
		if _, err := r.co.Pay(ctx, tenant, withToken("o1", "tok-o2"), ""); payment.ErrorCode(err) != payment.EUNPROCESSABLE {
			t.Fatalf("%v, want unprocessable", err)
		}
		if len(r.orch.updateIDs) != 0 {
			t.Fatal("a token of another order reached the workflow")
		}
	})
	t.Run("released on no fault of the client's", func(t *testing.T) {
		r := newRig(t, 0, fakeGateway{})
		r.orch.errs = []error{payment.Errorf(payment.EUNAVAILABLE, "workflow engine unavailable")}
		if _, err := r.co.Pay(ctx, tenant, withToken("o1", "tok-o1"), ""); payment.ErrorCode(err) != payment.EUNAVAILABLE || r.tokens.released != 1 {
			t.Fatalf("%v, released %d", err, r.tokens.released)
		}
		if _, err := r.co.Pay(ctx, tenant, withToken("o1", "tok-o1"), ""); err != nil {
			t.Fatalf("retry after the release: %v", err)
		}
	})
	t.Run("kept on the client's fault", func(t *testing.T) {
		r := newRig(t, 0, fakeGateway{})
		r.orch.errs = []error{payment.Errorf(payment.ECHANNEL, "alipay refused the trade")}
		if _, err := r.co.Pay(ctx, tenant, withToken("o1", "tok-o1"), ""); payment.ErrorCode(err) != payment.ECHANNEL || r.tokens.released != 0 {
			t.Fatalf("%v, released %d", err, r.tokens.released)
		}
	})
	t.Run("redis down", func(t *testing.T) {
		r := newRig(t, 0, fakeGateway{})
		r.tokens.err = errors.New("redis down")
		for i := range 2 {
			if _, err := r.co.Pay(ctx, tenant, withToken("o1", "tok-o1"), ""); err != nil {
				t.Fatalf("try %d: %v", i, err)
			}
		}
	})
}

// Page, wap and app payments are created and their run started here (direct), QR and an
// order already being paid go to the workflow's update (joined), and so does a checkout
// whose start finds a run of the order already running.
func TestDirectAndJoinedPaths(t *testing.T) {
	for _, tc := range []struct {
		name         string
		ttl          time.Duration
		method       payment.Method
		pending      bool // the order has a pending payment the paid-order read sees
		startRunning bool
		direct       bool
	}{
		{"page", 15 * time.Minute, payment.MethodPage, false, false, true},
		{"wap", 15 * time.Minute, payment.MethodWap, false, false, true},
		{"app", 15 * time.Minute, payment.MethodApp, false, false, true},
		{"qr", 15 * time.Minute, payment.MethodQR, false, false, false},
		{"no direct ttl", 0, payment.MethodPage, false, false, false},
		{"order being paid", 15 * time.Minute, payment.MethodPage, true, false, false},
		{"run already running", 15 * time.Minute, payment.MethodPage, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.ttl, fakeGateway{})
			if tc.pending {
				r.st.ByNo["PPEND"] = payment.Payment{PaymentNo: "PPEND", TenantID: tenant, OrderID: "o1", Amount: 990, Currency: "CNY", Status: payment.StatusPending}
			}
			r.orch.startRunning = tc.startRunning
			req := coffee("o1")
			req.Method = tc.method
			res, err := r.co.Pay(context.Background(), tenant, req, "")
			if err != nil {
				t.Fatal(err)
			}
			if !tc.direct {
				if len(r.orch.updateIDs) != 1 || len(r.orch.opened) != 0 || res.PaymentNo != "PUPDATE" {
					t.Fatalf("%d updates, %d starts, answer %+v; want the update's answer", len(r.orch.updateIDs), len(r.orch.opened), res)
				}
				if tc.pending && r.st.Creates != 0 {
					t.Fatal("a checkout joining a pending payment inserted one")
				}
				return
			}
			if len(r.orch.updateIDs) != 0 || len(r.orch.opened) != 1 {
				t.Fatalf("%d updates, %d starts; want 0 and 1", len(r.orch.updateIDs), len(r.orch.opened))
			}
			in := r.orch.opened[0]
			link := res.PayURL + res.OrderString
			if in.PaymentNo != res.PaymentNo || in.Opened == nil || link == "" || r.st.Links[res.PaymentNo] != link ||
				in.Opened.PayURL+in.Opened.OrderString != link || !strings.Contains(link, res.PaymentNo) ||
				(tc.method == payment.MethodApp) != (res.OrderString != "") || res.Status != payment.StatusPending {
				t.Fatalf("answered %+v; started %+v (opened %+v); stored link %q", res, in, in.Opened, r.st.Links[res.PaymentNo])
			}
			if d := time.Until(res.ExpireAt); d < 14*time.Minute || d > tc.ttl || !in.Opened.ExpireAt.Equal(res.ExpireAt) {
				t.Fatalf("expires in %v (run's %v), want the TTL", d, in.Opened.ExpireAt)
			}
			// P, the date and 24 hex digits at Alipay: 33 characters, as every earlier build made.
			if len(res.PaymentNo) != 33 || !strings.HasPrefix(res.PaymentNo, "P"+time.Now().UTC().Format("2006")) {
				t.Fatalf("payment number %q (%d characters), want 33", res.PaymentNo, len(res.PaymentNo))
			}
		})
	}
}

// On the direct path: a failed start is unavailable and keeps the payment for the retry,
// which starts its run; another checkout's payment found by the insert is answered with
// its own link, unless its amount differs (conflict) or its method does (conflict saying
// which); a gateway's refusal to sign is the client's, its outage retryable.
func TestDirectCheckoutOfAnOrderAnotherCheckoutCreated(t *testing.T) {
	ctx := context.Background()
	t.Run("start fails, retry starts it", func(t *testing.T) {
		r := newRig(t, 15*time.Minute, fakeGateway{})
		r.orch.startErr = payment.Errorf(payment.EUNAVAILABLE, "workflow engine unavailable, retry later")
		if _, err := r.co.Pay(ctx, tenant, coffee("d2"), ""); payment.ErrorCode(err) != payment.EUNAVAILABLE {
			t.Fatalf("%v, want unavailable", err)
		}
		if len(r.st.ByNo) != 1 {
			t.Fatalf("%d payments kept, want the one whose start failed", len(r.st.ByNo))
		}
		r.orch.startErr = nil
		if _, err := r.co.Pay(ctx, tenant, coffee("d2"), ""); err != nil || len(r.orch.updateIDs) != 1 || r.orch.lastIn.OrderID != "d2" {
			t.Fatalf("retry: %v, %d updates; want the kept payment's order joined through the update", err, len(r.orch.updateIDs))
		}
	})
	race := func(tb testing.TB, m payment.Method) *rig {
		tb.Helper()
		r := newRig(tb, 15*time.Minute, fakeGateway{})
		r.st.ByNo["PRACE"] = payment.Payment{PaymentNo: "PRACE", TenantID: tenant, OrderID: "d3", Amount: 990, Currency: "CNY",
			Method: m, Status: payment.StatusPending, ExpireAt: time.Now().Add(10 * time.Minute)}
		r.st.Links["PRACE"] = "https://cashier.test/pay?out_trade_no=PRACE"
		r.st.HidePending = "d3"
		return r
	}
	t.Run("race, joined with its link", func(t *testing.T) {
		r := race(t, payment.MethodPage)
		res, err := r.co.Pay(ctx, tenant, coffee("d3"), "")
		if err != nil || res.PaymentNo != "PRACE" || res.PayURL != r.st.Links["PRACE"] || len(r.orch.opened) != 1 ||
			r.orch.opened[0].PaymentNo != "PRACE" || r.orch.opened[0].Opened.PayURL != r.st.Links["PRACE"] {
			t.Fatalf("%v, answered %+v; want PRACE with its link and its run started", err, res)
		}
	})
	t.Run("race, run running", func(t *testing.T) {
		r := race(t, payment.MethodPage)
		r.orch.startRunning = true
		if _, err := r.co.Pay(ctx, tenant, coffee("d3"), ""); err != nil || len(r.orch.updateIDs) != 1 {
			t.Fatalf("%v, %d updates; want it joined through the update", err, len(r.orch.updateIDs))
		}
	})
	t.Run("race, other amount", func(t *testing.T) {
		r := race(t, payment.MethodPage)
		req := coffee("d3")
		req.AmountFen = 1990
		var pe *checkout.PaymentError
		if _, err := r.co.Pay(ctx, tenant, req, ""); payment.ErrorCode(err) != payment.ECONFLICT || !errors.As(err, &pe) || pe.Payment.PaymentNo != "PRACE" {
			t.Fatalf("%v, want a conflict carrying PRACE", err)
		}
	})
	t.Run("race, other method", func(t *testing.T) {
		r := race(t, payment.MethodWap)
		_, err := r.co.Pay(ctx, tenant, coffee("d3"), "")
		var pe *payment.Error
		if !errors.As(err, &pe) || pe.Code != payment.ECONFLICT || !strings.Contains(pe.Message, "wap") || !strings.Contains(pe.Message, "PRACE") {
			t.Fatalf("%v, want a conflict naming the wap payment PRACE", err)
		}
		if len(r.orch.opened) != 1 || r.orch.opened[0].PaymentNo != "PRACE" || r.orch.opened[0].Method != payment.MethodWap {
			t.Fatalf("starts %+v; the found payment's run is started all the same, with its own method", r.orch.opened)
		}
	})
	t.Run("race, found payment has no link yet", func(t *testing.T) {
		r := race(t, payment.MethodPage)
		r.st.Links["PRACE"] = "" // its run is still opening the trade
		if _, err := r.co.Pay(ctx, tenant, coffee("d3"), ""); err != nil || len(r.orch.updateIDs) != 1 || len(r.orch.opened) != 0 {
			t.Fatalf("%v, %d updates, %d starts; want it handed to the update", err, len(r.orch.updateIDs), len(r.orch.opened))
		}
	})
	for _, tc := range []struct {
		name    string
		refusal *payment.ChannelError
		want    string
	}{
		{"gateway refuses", &payment.ChannelError{Op: "sign", Message: "bad key", Retryable: false}, payment.ECHANNEL},
		{"gateway down", &payment.ChannelError{Op: "sign", Message: "timeout", Retryable: true}, payment.EUNAVAILABLE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 15*time.Minute, fakeGateway{refuse: tc.refusal})
			if _, err := r.co.Pay(ctx, tenant, coffee("d4"), ""); payment.ErrorCode(err) != tc.want || r.st.Creates != 0 {
				t.Fatalf("%v (%d inserts), want %s and no insert", err, r.st.Creates, tc.want)
			}
		})
	}
}

// A checkout that reaches a run which is ending tries again with a new update id each
// time; a run that never makes way is answered payment_finishing after the bounded tries.
func TestCheckoutRetriesWhileThePreviousRunIsEnding(t *testing.T) {
	finishing := payment.Errorf(payment.EFINISHING, "payment P0 is CLOSED and its run is ending; retry")
	t.Run("makes way", func(t *testing.T) {
		r := newRig(t, 0, fakeGateway{})
		r.orch.errs = []error{finishing, finishing}
		if _, err := r.co.Pay(context.Background(), tenant, coffee("o9"), "finish-key-01"); err != nil || len(r.orch.updateIDs) != 3 {
			t.Fatalf("%v after %d tries", err, len(r.orch.updateIDs))
		}
		seen := map[string]bool{}
		for _, id := range r.orch.updateIDs {
			if seen[id] || !strings.HasPrefix(id, r.orch.updateIDs[0]) {
				t.Fatalf("update ids %v: want each new, derived from the first", r.orch.updateIDs)
			}
			seen[id] = true
		}
	})
	t.Run("never makes way", func(t *testing.T) {
		r := newRig(t, 0, fakeGateway{})
		r.orch.err = finishing
		if _, err := r.co.Pay(context.Background(), tenant, coffee("o9"), "finish-key-02"); payment.ErrorCode(err) != payment.EFINISHING || len(r.orch.updateIDs) != 5 {
			t.Fatalf("%v after %d tries, want payment_finishing after 5", err, len(r.orch.updateIDs))
		}
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		r := newRig(t, 0, fakeGateway{})
		r.orch.err = finishing
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := r.co.Pay(ctx, tenant, coffee("o9"), ""); payment.ErrorCode(err) != payment.EFINISHING || len(r.orch.updateIDs) != 1 {
			t.Fatalf("%v after %d tries, want the first answer", err, len(r.orch.updateIDs))
		}
	})
}
