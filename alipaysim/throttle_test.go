package alipaysim_test

import (
	"context"
	"encoding/json"
	"net/http"
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

// A throttle set for one app (app_id) limits that app alone: the other app's calls are
// never answered 40005, an all-apps throttle set or lifted meanwhile leaves the app's own
// in place, and rate 0 with the app_id lifts the app's own, putting it back under the
// all-apps throttle.
func TestThrottleOneApp(t *testing.T) {
	t.Parallel()
	h, b := twoApps(t)
	h.precreate(t, "S_thr_a", "1.00")
	if rsp, err := b.TradePreCreate(context.Background(), alipay.TradePreCreate{Trade: alipay.Trade{
		NotifyURL: h.sink.url(), Subject: "b", OutTradeNo: "S_thr_b", TotalAmount: "1.00", ProductCode: "FACE_TO_FACE_PAYMENT"}}); err != nil || !rsp.IsSuccess() {
		t.Fatalf("B precreates: %+v, %v", rsp, err)
	}
	a := func(n int) { t.Helper(); wantCodes(t, "A", h.client, "S_thr_a", n, alipay.CodeSuccess) }

	// B at one call every 2 s, bursts of 2: its third call at once is refused.
	fs := setThrottle(t, h, `{"app_id":"`+appB+`","rate":0.5,"burst":2}`)
	if fs.Throttle.Rate != 0 || len(fs.AppThrottles) != 1 || fs.AppThrottles[0] != (alipaysim.Throttle{AppID: appB, Rate: 0.5, Burst: 2}) {
		t.Fatalf("faults after throttling B: %+v", fs)
	}
	wantCodes(t, "B", b, "S_thr_b", 2, alipay.CodeSuccess)
	wantCodes(t, "B", b, "S_thr_b", 1, alipay.CodeCallLimited)
	a(10)
	if fs := h.sim.Faults(); fs.Throttled != 1 || fs.ThrottledByApp[appB] != 1 || fs.ThrottledByApp[appID] != 0 {
		t.Fatalf("throttled %d (by app %v), want 1, all B's", fs.Throttled, fs.ThrottledByApp)
	}

	// An all-apps throttle, set and lifted, leaves B's own alone.
	setThrottle(t, h, `{"rate":1000,"burst":100}`)
	a(5)
	wantCodes(t, "B under its own throttle after an all-apps one was set:", b, "S_thr_b", 1, alipay.CodeCallLimited)
	if fs := setThrottle(t, h, `{"rate":0}`); len(fs.AppThrottles) != 1 {
		t.Fatalf("after lifting the all-apps throttle: %+v", fs)
	}
	wantCodes(t, "B after the all-apps throttle was lifted:", b, "S_thr_b", 1, alipay.CodeCallLimited)

	// Rate 0 with B's app_id lifts B's own.
	if fs := setThrottle(t, h, `{"app_id":"`+appB+`","rate":0}`); len(fs.AppThrottles) != 0 {
		t.Fatalf("after lifting B's throttle: %+v", fs)
	}
	wantCodes(t, "B, its throttle lifted:", b, "S_thr_b", 5, alipay.CodeSuccess)
	if code := h.controlJSON(t, "POST", "/_sim/faults/throttle", `{"app_id":"2021000000000999","rate":1}`, nil); code != 400 {
		t.Fatalf("a throttle for an app the simulator does not serve: HTTP %d, want 400", code)
	}
}

// twoApps is a harness with a second app, B, registered over the control API (with the
// first app's keys), and a client of B.
func twoApps(t *testing.T) (*harness, *alipay.Client) {
	t.Helper()
	h := newHarness(t, nil, nil)
	reg, _ := json.Marshal(map[string]string{"app_id": appB, "seller_id": sellerB, "app_public_key": h.keys.AppPublicKeyPEM})
	if code := h.controlJSON(t, "POST", "/_sim/apps", string(reg), nil); code != http.StatusOK {
		t.Fatalf("register app B: %d", code)
	}
	return h, clientFor(t, h.srv.URL, appB, h.keys.AppPrivateKeyPEM, h.keys.AlipayPublicKeyPEM)
}

// setThrottle posts body to the throttle's control route and returns the faults after.
func setThrottle(t *testing.T, h *harness, body string) alipaysim.FaultState {
	t.Helper()
	var fs alipaysim.FaultState
	if code := h.controlJSON(t, "POST", "/_sim/faults/throttle", body, &fs); code != http.StatusOK {
		t.Fatalf("throttle %s: HTTP %d", body, code)
	}
	return fs
}

// wantCodes queries the trade no n times at once through c, each answered want.
func wantCodes(t *testing.T, who string, c *alipay.Client, no string, n int, want alipay.Code) {
	t.Helper()
	for i := range n {
		q, err := c.TradeQuery(context.Background(), alipay.TradeQuery{OutTradeNo: no})
		if err != nil {
			t.Fatal(err)
		}
		if q.Code != want {
			t.Fatalf("%s query %d of %d: %v, want %v", who, i+1, n, q.Code, want)
		}
	}
}
