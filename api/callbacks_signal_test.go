package api_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// slowOrch is a Temporal that takes its time to accept a signal: each Notify waits for
// release and then answers err.
type slowOrch struct {
	*fakeOrch
	release chan struct{}
	err     error
}

func (o *slowOrch) Notify(ctx context.Context, p payment.Payment, n workflows.NotificationPayload) (bool, error) {
	select {
	case <-o.release:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	return o.err == nil, o.err
}

// A signal slower than the callback wait is never acknowledged: the notification is
// answered failure so that Alipay redelivers it (its redelivery is the one safety net that
// survives this process dying), the signal goes on, and the redelivery after it landed is
// acknowledged as handled.
func TestCallbackSlowerThanItsWaitIsAnsweredFailureAndRedelivered(t *testing.T) {
	form := url.Values{"notify_id": {"n1"}, "out_trade_no": {"P1"}, "total_amount": {"9.90"}, "sign": {"good"}}
	for _, tc := range []struct {
		name    string
		err     error
		outcome string // recorded once the signal has ended
	}{
		{"signal lands later", nil, "signalled"},
		{"signal fails later", &payment.Error{Code: payment.EUNAVAILABLE, Message: "down"}, "received"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, st, _ := newServer(t)
			orch := &slowOrch{fakeOrch: &fakeOrch{}, release: make(chan struct{}), err: tc.err}
			srv := httptest.NewServer(api.New(api.Config{CallbackSignalWait: 20 * time.Millisecond}, st, payment.SingleGateway{Gateway: fakeGateway{}}, orch, nil, nil, nil))
			t.Cleanup(srv.Close)
			start := time.Now()
			_, b := post(t, srv.URL+"/callbacks/alipay", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
			if b == "success" || time.Since(start) > 5*time.Second {
				t.Fatalf("reply %q after %s; want failure once the wait is over", b, time.Since(start))
			}
			outcome := func() string {
				st.mu.Lock()
				defer st.mu.Unlock()
				return st.notes[0].Outcome
			}
			if got := outcome(); got != "received" || !st.notes[0].Verified {
				t.Fatalf("answered before the signal landed with outcome %q; want the durable record, received", got)
			}
			close(orch.release)
			deadline := time.Now().Add(5 * time.Second)
			for outcome() != tc.outcome && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if got := outcome(); got != tc.outcome {
				t.Fatalf("outcome %q after the signal ended, want %q", got, tc.outcome)
			}
			// Alipay's redelivery: handled if the signal landed; handed over again (and
			// acknowledged only once it lands) if it failed.
			_, b = post(t, srv.URL+"/callbacks/alipay", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
			if want := tc.err == nil; (b == "success") != want {
				t.Fatalf("redelivery answered %q; want success=%v", b, want)
			}
		})
	}
}

func TestCallbackWaitsForAFastSignal(t *testing.T) {
	form := url.Values{"notify_id": {"n1"}, "out_trade_no": {"P1"}, "total_amount": {"9.90"}, "sign": {"good"}}
	_, st, _ := newServer(t)
	orch := &slowOrch{fakeOrch: &fakeOrch{}, release: make(chan struct{}), err: &payment.Error{Code: payment.EUNAVAILABLE, Message: "down"}}
	close(orch.release)
	srv := httptest.NewServer(api.New(api.Config{CallbackSignalWait: time.Minute}, st, payment.SingleGateway{Gateway: fakeGateway{}}, orch, nil, nil, nil))
	t.Cleanup(srv.Close)
	// A signal that fails within the wait is answered failure, so Alipay delivers again.
	if _, b := post(t, srv.URL+"/callbacks/alipay", form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); b == "success" {
		t.Fatal("acknowledged a notification whose signal failed")
	}
}
