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

func TestMethodChannelAndValidate(t *testing.T) {
	tests := []struct {
		method payment.Method
		valid  bool
		want   payment.Channel
	}{
		{payment.MethodPage, true, payment.ChannelAlipay},
		{payment.MethodQR, true, payment.ChannelAlipay},
		{payment.MethodWap, true, payment.ChannelAlipay},
		{payment.MethodApp, true, payment.ChannelAlipay},
		{"", false, payment.ChannelAlipay}, // a payment recorded without a method is a page payment
		{payment.MethodWechatNative, true, payment.ChannelWechatPay},
		{payment.MethodWechatJSAPI, true, payment.ChannelWechatPay},
		{payment.MethodWechatH5, true, payment.ChannelWechatPay},
		{payment.MethodWechatApp, true, payment.ChannelWechatPay},
		{"wechat", false, payment.ChannelAlipay},
		{"WECHAT_NATIVE", false, payment.ChannelAlipay},
	}
	for _, tc := range tests {
		t.Run(string(tc.method), func(t *testing.T) {
			if err := tc.method.Validate(); (err == nil) != tc.valid {
				t.Fatalf("Validate: %v, want valid=%v", err, tc.valid)
			}
			if got := tc.method.Channel(); got != tc.want {
				t.Fatalf("Channel %q, want %q", got, tc.want)
			}
		})
	}
	if payment.Channel("").OrAlipay() != payment.ChannelAlipay || payment.ChannelWechatPay.OrAlipay() != payment.ChannelWechatPay {
		t.Fatal("OrAlipay: a channel from before 0057 is Alipay, any other is itself")
	}
	if payment.ChannelWechatPay.Name() != "WeChat Pay" || payment.Channel("").Name() != "Alipay" {
		t.Fatalf("names %q %q", payment.ChannelWechatPay.Name(), payment.Channel("").Name())
	}
}

func TestPayerValidateFor(t *testing.T) {
	tests := []struct {
		name   string
		method payment.Method
		payer  payment.Payer
		ok     bool
	}{
		{"native needs nothing", payment.MethodWechatNative, payment.Payer{}, true},
		{"app needs nothing", payment.MethodWechatApp, payment.Payer{}, true},
		{"alipay page needs nothing", payment.MethodPage, payment.Payer{}, true},
		{"jsapi with openid", payment.MethodWechatJSAPI, payment.Payer{OpenID: "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}, true},
		{"jsapi without openid", payment.MethodWechatJSAPI, payment.Payer{}, false},
		{"jsapi with an ip only", payment.MethodWechatJSAPI, payment.Payer{ClientIP: "1.2.3.4"}, false},
		{"h5 with ipv4", payment.MethodWechatH5, payment.Payer{ClientIP: "203.0.113.7"}, true},
		{"h5 with ipv6", payment.MethodWechatH5, payment.Payer{ClientIP: "2001:db8::1"}, true},
		{"h5 without ip", payment.MethodWechatH5, payment.Payer{}, false},
		{"h5 with a host name", payment.MethodWechatH5, payment.Payer{ClientIP: "example.com"}, false},
		{"openid on native", payment.MethodWechatNative, payment.Payer{OpenID: "o1"}, false},
		{"ip on an alipay method", payment.MethodQR, payment.Payer{ClientIP: "1.2.3.4"}, false},
		{"openid with a space", payment.MethodWechatJSAPI, payment.Payer{OpenID: "o 1"}, false},
		{"openid too long", payment.MethodWechatJSAPI, payment.Payer{OpenID: fmt.Sprintf("%0129d", 1)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.payer.ValidateFor(tc.method)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && payment.ErrorCode(err) != payment.EINVALID {
				t.Fatalf("got %v, want invalid", err)
			}
		})
	}
}

// A payment's number is P, the UTC date and the channel's count of hex digits: 33
// characters at Alipay, as every earlier build made (a payment run replayed by a newer
// build must compute the number it recorded), and 32 at WeChat Pay, the most its
// out_trade_no takes.
func TestPaymentNoRandomDigitsPerChannel(t *testing.T) {
	for ch, want := range map[payment.Channel]int{"": 24, payment.ChannelAlipay: 24, payment.ChannelWechatPay: 23} {
		if got := ch.PaymentNoRandomDigits(); got != want {
			t.Errorf("%q: %d digits, want %d", ch, got, want)
		}
	}
}
