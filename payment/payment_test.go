package payment_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
)

func TestStatusTransitions(t *testing.T) {
	all := []payment.Status{payment.StatusPending, payment.StatusPaid, payment.StatusClosed, payment.StatusFailed}
	for _, from := range all {
		for _, to := range all {
			want := from == payment.StatusPending && to != payment.StatusPending
			if got := from.CanTransitionTo(to); got != want {
				t.Errorf("%s → %s: %v, want %v", from, to, got, want)
			}
		}
	}
}

func TestStatusText(t *testing.T) {
	for _, s := range []payment.Status{payment.StatusPending, payment.StatusPaid, payment.StatusClosed, payment.StatusFailed} {
		b, _ := s.MarshalText()
		var back payment.Status
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Fatalf("%s: %v %v", s, back, err)
		}
	}
	var s payment.Status
	if err := s.UnmarshalText([]byte("SETTLED")); err == nil {
		t.Fatal("unknown status accepted")
	}
}

func TestNewPaymentValidate(t *testing.T) {
	valid := payment.NewPayment{PaymentNo: "P1", TenantID: "t-1", OrderID: "o_1", Amount: 1, Currency: "CNY", Subject: "s", ExpireAt: time.Now()}
	if err := valid.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := map[string]func(*payment.NewPayment){
		"payment no with dash": func(n *payment.NewPayment) { n.PaymentNo = "P-1" },
		"tenant with colon":    func(n *payment.NewPayment) { n.TenantID = "a:b" },
		"order too long":       func(n *payment.NewPayment) { n.OrderID = fmt.Sprintf("%065d", 1) },
		"zero amount":          func(n *payment.NewPayment) { n.Amount = 0 },
		"usd":                  func(n *payment.NewPayment) { n.Currency = "USD" },
		"empty subject":        func(n *payment.NewPayment) { n.Subject = "" },
		"missing expiry":       func(n *payment.NewPayment) { n.ExpireAt = time.Time{} },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			n := valid
			mutate(&n)
			if err := n.Validate(); payment.ErrorCode(err) != payment.EINVALID {
				t.Fatalf("got %v, want invalid", err)
			}
		})
	}
}

func TestCheckNotification(t *testing.T) {
	p := payment.Payment{PaymentNo: "P1", Amount: 990}
	if err := payment.CheckNotification(payment.Notification{PaymentNo: "P1", TotalAmount: 990}, p); err != nil {
		t.Fatal(err)
	}
	if err := payment.CheckNotification(payment.Notification{PaymentNo: "P1", TotalAmount: 99}, p); payment.ErrorCode(err) != payment.EUNPROCESSABLE {
		t.Fatalf("amount mismatch: %v", err)
	}
	if err := payment.CheckNotification(payment.Notification{PaymentNo: "P2", TotalAmount: 990}, p); err == nil {
		t.Fatal("other payment accepted")
	}
}

func TestErrorsAndRetryability(t *testing.T) {
	wrapped := fmt.Errorf("get: %w", payment.ErrNotFound)
	if !errors.Is(wrapped, payment.ErrNotFound) || payment.ErrorCode(wrapped) != payment.ENOTFOUND {
		t.Fatal("wrapped not-found lost")
	}
	if payment.ErrorCode(errors.New("boom")) != payment.EINTERNAL || payment.ErrorCode(nil) != "" {
		t.Fatal("error codes")
	}
	if !payment.IsRetryable(&payment.ChannelError{Retryable: true}) || payment.IsRetryable(&payment.ChannelError{}) {
		t.Fatal("channel retryability")
	}
	if payment.IsRetryable(payment.Errorf(payment.EINVALID, "x")) || !payment.IsRetryable(payment.Errorf(payment.EUNAVAILABLE, "x")) {
		t.Fatal("domain retryability")
	}
	if payment.WorkflowID("t1", "o1") != "payment:t1:o1" {
		t.Fatal("workflow id")
	}
}
