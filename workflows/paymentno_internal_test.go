package workflows

import (
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
)

// An Alipay payment's number is what every earlier build computed from its run's ID (P,
// the UTC date, the first 24 hex digits): a run recorded by an older build and replayed by
// this one computes the number its history and its row hold. A WeChat Pay payment's is 32
// characters, without the UUID's version digit.
func TestPaymentNoOfARun(t *testing.T) {
	run := "0b1e6a4c-9d2f-4e7a-8c3b-5f6a7b8c9d0e"
	at := time.Date(2026, 12, 7, 23, 30, 0, 0, time.FixedZone("CST", 8*3600))
	for _, tc := range []struct {
		ch   payment.Channel
		want string
	}{
		{"", "P20261207" + "0b1e6a4c9d2f4e7a8c3b5f6a"},
		{payment.ChannelAlipay, "P20261207" + "0b1e6a4c9d2f4e7a8c3b5f6a"},
		{payment.ChannelWechatPay, "P20261207" + "0b1e6a4c9d2f" + "e7a8c3b5f6a"},
	} {
		if got := paymentNoOf(run, at, tc.ch); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.ch, got, tc.want)
		}
	}
	if no := paymentNoOf(run, at, payment.ChannelWechatPay); len(no) != 32 {
		t.Errorf("a WeChat Pay payment's number has %d characters, want 32", len(no))
	}
}
