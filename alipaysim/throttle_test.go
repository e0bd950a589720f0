package alipaysim_test

import (
	"context"
	"testing"
	"time"

	"github.com/paykit/paykit/alipaysim"
	"github.com/smartwalle/alipay/v3"
)

// The throttle answers an app's calls past its rate 40005 (Call Limited, signed, as
// Alipay does) without carrying them out, counts them, refills at its rate, and lifts.
func TestThrottle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.precreate(t, "S_thr", "1.00")
	var fs alipaysim.FaultState
	if code := h.controlJSON(t, "POST", "/_sim/faults/throttle", `{"rate":5,"burst":2}`, &fs); code != 200 || fs.Throttle.Rate != 5 || fs.Throttle.Burst != 2 {
		t.Fatalf("set throttle: %d %+v", code, fs)
	}
	query := func() alipay.Code {
		t.Helper()
		q, err := h.client.TradeQuery(context.Background(), alipay.TradeQuery{OutTradeNo: "S_thr"})
		if err != nil {
			t.Fatal(err)
		}
		return q.Code
	}
	var codes []alipay.Code
	for range 4 {
		codes = append(codes, query())
	}
	if codes[0] != alipay.CodeSuccess || codes[1] != alipay.CodeSuccess || codes[2] != alipay.CodeCallLimited || codes[3] != alipay.CodeCallLimited {
		t.Fatalf("4 queries at once with a burst of 2: %v; want 2 answered and 2 refused with 40005", codes)
	}
	if got := h.sim.Faults().Throttled; got != 2 {
		t.Fatalf("throttled count %d, want 2", got)
	}
	time.Sleep(250 * time.Millisecond) // one more call at 5 a second
	if c := query(); c != alipay.CodeSuccess {
		t.Fatalf("after a fifth of a second: %v", c)
	}
	if code := h.controlJSON(t, "POST", "/_sim/faults/throttle", `{"rate":0}`, &fs); code != 200 {
		t.Fatal(code)
	}
	for range 5 {
		if c := query(); c != alipay.CodeSuccess {
			t.Fatalf("throttle lifted: %v", c)
		}
	}
	if code := h.controlJSON(t, "POST", "/_sim/faults/throttle", `{"rate":-1}`, nil); code != 400 {
		t.Fatalf("a negative rate: HTTP %d, want 400", code)
	}
}
