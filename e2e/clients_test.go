package e2e

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/clients/go/paykit"
)

// holdNextPrecreate makes the simulator hold the next alipay.trade.precreate (a QR
// checkout's) until paykit's Alipay client gives up on it (10 s), and returns a function
// that waits until a request is being held.
func holdNextPrecreate(t *testing.T) func() {
	t.Helper()
	simFault(t, "/gateway", map[string]any{"mode": "hang", "count": 1, "method": "alipay.trade.precreate"})
	return func() {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			var faults struct {
				Gateway []map[string]any `json:"gateway"`
			}
			do(t, http.MethodGet, env.simURL+"/_sim/faults", nil, nil).json(t, &faults)
			if len(faults.Gateway) == 0 {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal("the held precreate was never asked")
	}
}

// The Go client generated from the contract (clients/go/paykit), through its wrapper,
// against a running paykit: every exchange is checked against the contract too.
func TestGoClient(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	ctx := context.Background()
	c, err := paykit.New(st.apiURL, tn.apiKey, paykit.Options{HTTPClient: httpClient})
	if err != nil {
		t.Fatal(err)
	}
	once, err := paykit.New(st.apiURL, tn.apiKey, paykit.Options{HTTPClient: httpClient, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}

	// Create with a key, and the same request again: the first answer, replayed.
	first, err := c.CreatePayment(ctx, paykit.CreatePaymentRequest{OrderId: "gc1", AmountFen: 1990, Subject: "Go client"})
	if err != nil || first.StatusCode != http.StatusCreated || first.Replayed || first.Value.Status != paykit.PaymentStatusPENDING {
		t.Fatalf("create: %+v, %v", first, err)
	}
	again, err := c.CreatePayment(ctx, paykit.CreatePaymentRequest{OrderId: "gc1", AmountFen: 1990, Subject: "Go client"},
		paykit.WithIdempotencyKey(first.IdempotencyKey))
	if err != nil || !again.Replayed || again.Value.PaymentNo != first.Value.PaymentNo {
		t.Fatalf("replay: %+v, %v", again, err)
	}
	// The same key with another body: 422 key_mismatch, typed.
	_, err = c.CreatePayment(ctx, paykit.CreatePaymentRequest{OrderId: "gc1", AmountFen: 1991, Subject: "Go client"},
		paykit.WithIdempotencyKey(first.IdempotencyKey))
	var perr *paykit.Error
	if !errors.As(err, &perr) || perr.StatusCode != http.StatusUnprocessableEntity || perr.Problem.Code != paykit.ProblemCodeKeyMismatch {
		t.Fatalf("mismatch: %v", err)
	}

	// 409 in_flight: the first request with a key is held at Alipay's precreate; a second
	// one with the key gets in_flight (typed); the first, retried by the wrapper with its
	// key, ends 201.
	qr := paykit.CreatePaymentRequestMethodQr
	held := holdNextPrecreate(t)
	key := "gc2-" + randHex(6)
	firstDone := make(chan error, 1)
	var qrRes paykit.Result[paykit.CheckoutResult]
	go func() {
		var err error
		qrRes, err = c.CreatePayment(ctx, paykit.CreatePaymentRequest{OrderId: "gc2", AmountFen: 500, Subject: "QR", Method: &qr},
			paykit.WithIdempotencyKey(key))
		firstDone <- err
	}()
	held()
	_, err = once.CreatePayment(ctx, paykit.CreatePaymentRequest{OrderId: "gc2", AmountFen: 500, Subject: "QR", Method: &qr},
		paykit.WithIdempotencyKey(key))
	if !errors.As(err, &perr) || perr.StatusCode != http.StatusConflict || paykit.ErrorCode(err) != paykit.ProblemCodeInFlight {
		t.Fatalf("concurrent request with the key: %v", err)
	}
	if err := <-firstDone; err != nil || qrRes.Value.QrCode == nil || qrRes.Value.Status != paykit.PaymentStatusPENDING {
		t.Fatalf("the held request: %+v, %v", qrRes, err)
	}

	// Paid, then refused as paid (typed, with the paid payment).
	openCashier(t, *first.Value.PayUrl)
	simPay(t, first.Value.PaymentNo)
	paid := waitClientPayment(t, c, first.Value.PaymentNo, paykit.PaymentStatusPAID)
	_, err = c.CreatePayment(ctx, paykit.CreatePaymentRequest{OrderId: "gc1", AmountFen: 1990, Subject: "Go client"})
	if !errors.As(err, &perr) || perr.Problem.Code != paykit.ProblemCodeOrderAlreadyPaid || perr.Problem.Payment == nil ||
		perr.Problem.Payment.PaymentNo != paid.PaymentNo || perr.Problem.Payment.Status != paykit.PaymentStatusPAID {
		t.Fatalf("checkout of the paid order: %v", err)
	}

	// Cancel the QR payment, and the cancel replayed.
	cancelled, err := c.CancelPayment(ctx, qrRes.Value.PaymentNo)
	if err != nil || cancelled.StatusCode != http.StatusOK || cancelled.Value.Status != paykit.PaymentStatusCLOSED ||
		cancelled.Value.CloseReason == nil || *cancelled.Value.CloseReason != "cancelled" {
		t.Fatalf("cancel: %+v, %v", cancelled, err)
	}
	if r, err := c.CancelPayment(ctx, qrRes.Value.PaymentNo, paykit.WithIdempotencyKey(cancelled.IdempotencyKey)); err != nil || !r.Replayed {
		t.Fatalf("cancel replay: %+v, %v", r, err)
	}

	// Two refunds, the first replayed by its key, then listed once they succeed.
	r1, err := c.CreateRefund(ctx, paid.PaymentNo, paykit.CreateRefundRequest{AmountFen: 500})
	if err != nil || r1.StatusCode != http.StatusCreated {
		t.Fatalf("refund: %+v, %v", r1, err)
	}
	if r, err := c.CreateRefund(ctx, paid.PaymentNo, paykit.CreateRefundRequest{AmountFen: 500}, paykit.WithIdempotencyKey(r1.IdempotencyKey)); err != nil ||
		!r.Replayed || r.Value.RefundNo != r1.Value.RefundNo {
		t.Fatalf("refund replay: %+v, %v", r, err)
	}
	r2, err := c.CreateRefund(ctx, paid.PaymentNo, paykit.CreateRefundRequest{AmountFen: 700})
	if err != nil || r2.Value.RefundNo == r1.Value.RefundNo {
		t.Fatalf("second refund: %+v, %v", r2, err)
	}
	for _, no := range []string{r1.Value.RefundNo, r2.Value.RefundNo} {
		waitClientRefund(t, c, no, paykit.RefundStatusSUCCEEDED)
	}
	refunds, err := c.Refunds(ctx, paid.PaymentNo)
	if err != nil || len(refunds) != 2 || refunds[0].RefundNo != r1.Value.RefundNo || refunds[1].RefundNo != r2.Value.RefundNo {
		t.Fatalf("refunds: %+v, %v", refunds, err)
	}

	// The events feed, paged two at a time from the start to its end: the payment paid,
	// the QR payment closed and the two refunds, each once.
	want := map[string]int{
		"payment.paid " + paid.PaymentNo:          1,
		"payment.closed " + qrRes.Value.PaymentNo: 1,
		"refund.succeeded " + paid.PaymentNo:      2,
	}
	feed := c.Events("", 2)
	seen := map[string]bool{}
	got := map[string]int{}
	pages := 0
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < 4 && time.Now().Before(deadline) {
		evs, more, err := feed.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range evs {
			if seen[e.EventId] {
				t.Fatalf("event %s on two pages", e.EventId)
			}
			seen[e.EventId] = true
			k := string(e.Type) + " " + e.PaymentNo
			if got[k]++; got[k] > want[k] {
				t.Fatalf("unexpected event %s (%s)", k, e.EventId)
			}
		}
		if !more && len(seen) < 4 {
			time.Sleep(200 * time.Millisecond) // the end for now: poll again from the same cursor
		}
	}
	if len(seen) != 4 {
		t.Fatalf("feed gave %v, want %v", got, want)
	}
	if evs, more, err := feed.Next(ctx); err != nil || len(evs) != 0 || more {
		t.Fatalf("past the end: %d events, more %v, %v", len(evs), more, err)
	}
	t.Logf("Go client: created, replayed, 422 and 409 typed, paid order refused, cancelled, 2 refunds listed, %d events in %d pages", len(seen), pages)
}

func waitClientPayment(t *testing.T, c *paykit.Client, paymentNo string, want paykit.PaymentStatus) paykit.Payment {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := c.GetPayment(context.Background(), paymentNo)
		if err == nil && p.Status == want {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("payment %s: %+v, %v; want %s", paymentNo, p, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitClientRefund(t *testing.T, c *paykit.Client, refundNo string, want paykit.RefundStatus) paykit.Refund {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := c.GetRefund(context.Background(), refundNo)
		if err == nil && r.Status == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("refund %s: %+v, %v; want %s", refundNo, r, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The TypeScript client (clients/ts: openapi-fetch over the types generated from the
// contract, and its wrapper) against a running paykit: node runs
// clients/ts/test/e2e.test.mjs, talking to the API through a proxy here that checks
// every exchange against the contract.
func TestTypeScriptClient(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	dir := filepath.Join(repoRoot(), "clients", "ts")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		run("npm", "ci", "--no-audit", "--no-fund")
	}
	run("npm", "run", "--silent", "build")

	target, err := url.Parse(st.apiURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = httpClient.Transport
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "test/")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PAYKIT_URL="+srv.URL, "PAYKIT_API_KEY="+tn.apiKey, "PAYKIT_SIM_URL="+env.simURL)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}
}
