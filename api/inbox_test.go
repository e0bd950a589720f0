package api_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/inbox"
	"github.com/paykit/paykit/payment"
)

// newInboxServer is newServer with the *api.Server at hand, to sweep its inbox.
func newInboxServer(t *testing.T) (*api.Server, *httptest.Server, *fakeStore, *fakeOrch) {
	t.Helper()
	_, st, orch := newServer(t)
	s := api.New(api.Config{}, st.stores(), payment.SingleGateway{Gateway: fakeGateway{}}, orch, nil, nil, nil)
	srv := httptest.NewServer(checked(t, s))
	t.Cleanup(srv.Close)
	return s, srv, st, orch
}

var paidForm = url.Values{"notify_id": {"n1"}, "out_trade_no": {"P1"}, "total_amount": {"9.90"}, "sign": {"good"}}

func callback(t *testing.T, srv *httptest.Server, f url.Values) string {
	t.Helper()
	_, b := post(t, srv.URL+"/callbacks/alipay", f.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	return b
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (o *fakeOrch) signalCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.signals
}

// A verified notification is answered success once it is recorded, whatever Temporal
// does: from then on the inbox owns it. Before the inbox, a notification whose signal
// failed was answered failure and depended on Alipay's redelivery.
func TestCallbackIsAcknowledgedOnItsRecord(t *testing.T) {
	t.Run("signalled, settled once the payment is paid", func(t *testing.T) {
		s, srv, st, orch := newInboxServer(t)
		if got := callback(t, srv, paidForm); got != "success" {
			t.Fatalf("reply %q", got)
		}
		n := st.note(t, 0, func(n payment.ChannelNotification) bool { return n.Outcome == "signalled" })
		if n.Outcome != "signalled" || !n.Verified || n.Raw != paidForm.Encode() || n.RawLen != len(paidForm.Encode()) ||
			len(n.RawSHA256) != 64 || orch.signalCount() != 1 {
			t.Fatalf("recorded %+v after %d signals", n, orch.signalCount())
		}
		// Temporal accepting the signal settles nothing: the payment's effect does.
		if !n.SettledAt.IsZero() || n.DispatchDueAt.IsZero() {
			t.Fatalf("settled on the signal alone: %+v", n)
		}
		s.Inbox().Sweep(context.Background(), time.Now())
		if n := st.note(t, 0, func(payment.ChannelNotification) bool { return true }); !n.SettledAt.IsZero() {
			t.Fatalf("settled while the payment is pending: %+v", n)
		}
		st.Mu.Lock()
		p := st.ByNo["P1"]
		p.Status, p.TradeNo = payment.StatusPaid, "T1"
		st.ByNo["P1"] = p
		st.Mu.Unlock()
		s.Inbox().Sweep(context.Background(), time.Now())
		if n := st.note(t, 0, func(payment.ChannelNotification) bool { return true }); n.SettledAt.IsZero() || !n.DispatchDueAt.IsZero() {
			t.Fatalf("not settled by the payment being PAID with its trade_no: %+v", n)
		}
		if orch.signalCount() != 1 {
			t.Fatalf("signals = %d, want 1", orch.signalCount())
		}
	})
	t.Run("temporal down: acknowledged, handed over again when due", func(t *testing.T) {
		s, srv, st, orch := newInboxServer(t)
		orch.mu.Lock()
		orch.signalErr = &payment.Error{Code: payment.EUNAVAILABLE, Message: "down"}
		orch.mu.Unlock()
		start := time.Now()
		if got := callback(t, srv, paidForm); got != "success" {
			t.Fatalf("reply %q, want success on the record while Temporal is down", got)
		}
		waitFor(t, "the first hand-over", func() bool { return orch.signalCount() == 1 })
		n := st.note(t, 0, func(payment.ChannelNotification) bool { return true })
		if n.Outcome != "received" || !n.SettledAt.IsZero() || n.DispatchDueAt.Before(start.Add(api.DefaultInboxSettleBound-time.Second)) {
			t.Fatalf("after a failed hand-over: %+v", n)
		}
		// Not due yet: the sweep leaves it.
		if got := s.Inbox().Sweep(context.Background(), time.Now()); got != 0 {
			t.Fatalf("swept %d before its due time", got)
		}
		orch.mu.Lock()
		orch.signalErr = nil
		orch.mu.Unlock()
		later := n.DispatchDueAt.Add(time.Millisecond)
		if got := s.Inbox().Sweep(context.Background(), later); got != 1 {
			t.Fatalf("swept %d at its due time, want 1", got)
		}
		n = st.note(t, 0, func(n payment.ChannelNotification) bool { return n.Outcome == "signalled" })
		if n.Outcome != "signalled" || n.DispatchAttempts != 1 || !n.DispatchDueAt.Equal(later.Add(api.DefaultInboxSettleBound)) || orch.signalCount() != 2 {
			t.Fatalf("after the sweep's hand-over: %+v, %d signals", n, orch.signalCount())
		}
	})
	t.Run("mysql down: failure", func(t *testing.T) {
		_, srv, st, _ := newInboxServer(t)
		st.Down = true
		if got := callback(t, srv, paidForm); got == "success" {
			t.Fatal("acknowledged a notification that was not recorded")
		}
	})
	t.Run("bad signature: failure, an unverified row, no hand-over", func(t *testing.T) {
		_, srv, st, orch := newInboxServer(t)
		f := url.Values{}
		for k, v := range paidForm {
			f[k] = v
		}
		f.Set("sign", "forged")
		if got := callback(t, srv, f); got == "success" {
			t.Fatal("acknowledged a forged notification")
		}
		if len(st.notes) != 1 || st.notes[0].Verified || !st.notes[0].DispatchDueAt.IsZero() || orch.signalCount() != 0 {
			t.Fatalf("forged notification: %+v, %d signals", st.notes, orch.signalCount())
		}
	})
	t.Run("amount mismatch: settled on an anomaly, never signalled", func(t *testing.T) {
		_, srv, st, orch := newInboxServer(t)
		f := url.Values{}
		for k, v := range paidForm {
			f[k] = v
		}
		f.Set("total_amount", "0.01")
		if got := callback(t, srv, f); got != "success" {
			t.Fatalf("reply %q", got)
		}
		n := st.note(t, 0, func(n payment.ChannelNotification) bool { return !n.SettledAt.IsZero() })
		st.Mu.Lock()
		anomalies := append([]payment.Anomaly(nil), st.anomalies...)
		st.Mu.Unlock()
		if n.SettledAt.IsZero() || len(n.Outcome) < 10 || n.Outcome[:10] != "rejected: " || orch.signalCount() != 0 ||
			len(anomalies) != 1 || anomalies[0].Kind != inbox.AnomalyNotificationRejected || anomalies[0].PaymentNo != "P1" ||
			anomalies[0].Subject != "n1" {
			t.Fatalf("recorded %+v, anomalies %+v, %d signals", n, anomalies, orch.signalCount())
		}
	})
	t.Run("not a form: failure", func(t *testing.T) {
		_, srv, _, _ := newInboxServer(t)
		if got := callback(t, srv, url.Values{}); got == "success" {
			t.Fatal("acknowledged an empty body")
		}
	})
}

// Alipay's redelivery of a recorded notification is acknowledged at once and hands
// nothing over again: the inbox has it.
func TestRedeliveryIsAcknowledgedWithoutAnotherHandOver(t *testing.T) {
	_, srv, st, orch := newInboxServer(t)
	for i := range 3 {
		if got := callback(t, srv, paidForm); got != "success" {
			t.Fatalf("delivery %d: reply %q", i, got)
		}
	}
	waitFor(t, "the hand-over", func() bool { return orch.signalCount() >= 1 })
	time.Sleep(20 * time.Millisecond)
	if len(st.notes) != 1 || orch.signalCount() != 1 {
		t.Fatalf("%d rows, %d signals after 3 deliveries; want 1 and 1", len(st.notes), orch.signalCount())
	}
}

// A notification recorded before the inbox and never handled (answered failure then)
// is put in the inbox by its redelivery.
func TestRedeliveryOfANotificationFromBeforeTheInboxHandsItOver(t *testing.T) {
	_, srv, st, orch := newInboxServer(t)
	st.notes = append(st.notes, payment.ChannelNotification{ID: 1, Channel: "alipay", NotifyID: "n1", PaymentNo: "P1",
		Verified: true, Outcome: "received", ReceivedAt: time.Now().Add(-time.Hour)})
	if got := callback(t, srv, paidForm); got != "success" {
		t.Fatalf("reply %q", got)
	}
	n := st.note(t, 0, func(n payment.ChannelNotification) bool { return n.Outcome == "signalled" })
	if n.Outcome != "signalled" || n.DispatchDueAt.IsZero() || orch.signalCount() != 1 {
		t.Fatalf("old notification after its redelivery: %+v, %d signals", n, orch.signalCount())
	}
}

// The sweep backs off, hands a notification over however long it stays unsettled, and
// tells an operator once, at the unsettledAnomalyAt-th hand-over.
func TestUnsettledNotificationBacksOffAndBecomesAnAnomaly(t *testing.T) {
	s, srv, st, orch := newInboxServer(t)
	if got := callback(t, srv, paidForm); got != "success" {
		t.Fatalf("reply %q", got)
	}
	waitFor(t, "the first hand-over", func() bool { return orch.signalCount() == 1 })
	st.note(t, 0, func(n payment.ChannelNotification) bool { return n.Outcome == "signalled" })
	var gaps []time.Duration
	for i := range 10 {
		n := st.note(t, 0, func(payment.ChannelNotification) bool { return true })
		at := n.DispatchDueAt
		if s.Inbox().Sweep(context.Background(), at) != 1 {
			t.Fatalf("sweep %d handed nothing over", i+1)
		}
		waitFor(t, "the sweep's hand-over", func() bool { return orch.signalCount() == i+2 })
		gaps = append(gaps, st.note(t, 0, func(payment.ChannelNotification) bool { return true }).DispatchDueAt.Sub(at))
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
		15 * time.Minute, 15 * time.Minute, 15 * time.Minute, 15 * time.Minute, 15 * time.Minute}
	for i := range want {
		if gaps[i] != want[i] {
			t.Fatalf("backoff %v, want %v", gaps, want)
		}
	}
	st.Mu.Lock()
	defer st.Mu.Unlock()
	if len(st.anomalies) != 1 || st.anomalies[0].Kind != inbox.AnomalyNotificationUnsettled || st.anomalies[0].TenantID != "t1" ||
		st.anomalies[0].Subject != "n1" {
		t.Fatalf("anomalies %+v, want one %s about notify_id n1", st.anomalies, inbox.AnomalyNotificationUnsettled)
	}
	if orch.signals != 11 {
		t.Fatalf("signals = %d, want 11 (one per hand-over)", orch.signals)
	}
}

// A notification for a pending payment reads the payment and nothing else before its
// signal: the tenant is read only for the case that needs it (money for a closed
// payment, where the tenant may refund it automatically).
func TestNotificationForAPendingPaymentDoesNotReadTheTenant(t *testing.T) {
	_, srv, st, orch := newInboxServer(t)
	if got := callback(t, srv, paidForm); got != "success" {
		t.Fatalf("reply %q", got)
	}
	st.note(t, 0, func(n payment.ChannelNotification) bool { return n.Outcome == "signalled" })
	st.Mu.Lock()
	reads := st.tenantReads
	st.Mu.Unlock()
	if orch.signalCount() != 1 || reads != 0 {
		t.Fatalf("%d signals after %d tenant reads; want 1 signal and no tenant read", orch.signalCount(), reads)
	}
}

// Money for a closed payment is recorded as an anomaly and, for a tenant that asked for
// it, refunded automatically: the one notification that reads the tenant.
func TestPaidAfterCloseRefundsForATenantThatAskedForIt(t *testing.T) {
	for _, auto := range []bool{false, true} {
		_, srv, st, orch := newInboxServer(t)
		st.Mu.Lock()
		st.tenant.AutoRefundPaidAfterClose = auto
		p := st.ByNo["P1"]
		p.Status = payment.StatusClosed
		st.ByNo["P1"] = p
		st.Mu.Unlock()
		if got := callback(t, srv, paidForm); got != "success" {
			t.Fatalf("auto refund %v: reply %q", auto, got)
		}
		st.note(t, 0, func(n payment.ChannelNotification) bool { return n.Outcome == "anomaly" })
		st.Mu.Lock()
		anomalies, refunds, reads := len(st.anomalies), len(st.refunds), st.tenantReads
		st.Mu.Unlock()
		orch.mu.Lock()
		starts := orch.refundStarts
		orch.mu.Unlock()
		want := 0
		if auto {
			want = 1
		}
		if anomalies != 1 || refunds != want || starts != want || reads != 1 {
			t.Fatalf("auto refund %v: %d anomalies, %d refunds, %d refund starts, %d tenant reads; want 1, %d, %d, 1",
				auto, anomalies, refunds, starts, reads, want, want)
		}
	}
}
