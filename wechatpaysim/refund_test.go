package wechatpaysim_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/wechatpaysim"
)

// manual keeps refunds PROCESSING until the test settles them, and lifts the interval
// between two refunds of an order.
func manual(c *wechatpaysim.Config) { c.RefundDelay, c.RefundInterval = -1, -1 }

// refundBody is a refund request of outTradeNo; extra fields are merged in (nil removes).
func refundBody(outTradeNo, outRefundNo string, amount, total int64, extra map[string]any) string {
	b := map[string]any{
		"out_trade_no": outTradeNo, "out_refund_no": outRefundNo, "reason": "商品已售完",
		"amount": map[string]any{"refund": amount, "total": total, "currency": "CNY"},
	}
	for k, v := range extra {
		if v == nil {
			delete(b, k)
			continue
		}
		b[k] = v
	}
	out, _ := json.Marshal(b)
	return string(out)
}

func (h *harness) refund(tb testing.TB, body string) resp {
	tb.Helper()
	return h.do(tb, req{method: "POST", target: "/v3/refund/domestic/refunds", body: body})
}

func (h *harness) refundQuery(tb testing.TB, outRefundNo string) resp {
	tb.Helper()
	return h.do(tb, req{method: "GET", target: "/v3/refund/domestic/refunds/" + outRefundNo})
}

// paid places and pays a Native order.
func (h *harness) paid(tb testing.TB, outTradeNo string, total int64, opts wechatpaysim.PayOptions) wechatpaysim.Order {
	tb.Helper()
	h.place(tb, "native", outTradeNo, total, "https://e.com/n")
	o, err := h.sim.Pay(mchID, outTradeNo, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return o
}

// The first answer: 200 PROCESSING, signed, with the refund's ids and amounts and no
// success_time; the order queries REFUND; the refund query answers the same refund,
// then SUCCESS with its success_time once settled.
func TestRefundAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, manual)
	o := h.paid(t, "REFUND0001", 1000, wechatpaysim.PayOptions{DiscountFen: 100})
	r := h.refund(t, refundBody("", "R-0001|a*b@c", 400, 1000, map[string]any{"out_trade_no": nil, "transaction_id": o.TransactionID}))
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	h.verify(t, r)
	b := r.json(t)
	if _, ok := b["success_time"]; ok || b["status"] != "PROCESSING" || b["out_trade_no"] != "REFUND0001" ||
		b["transaction_id"] != o.TransactionID || b["channel"] != "ORIGINAL" || b["funds_account"] != "AVAILABLE" ||
		b["user_received_account"] != "支付用户零钱" || !regexp.MustCompile(`^503\d{26}$`).MatchString(b["refund_id"].(string)) {
		t.Fatalf("%s", r.body)
	}
	if _, err := time.Parse(time.RFC3339, b["create_time"].(string)); err != nil {
		t.Fatal(err)
	}
	amount := b["amount"].(map[string]any)
	want := map[string]float64{
		"total": 1000, "refund": 400, "payer_total": 900, "payer_refund": 360, "settlement_refund": 400,
		"settlement_total": 1000, "discount_refund": 40,
	}
	for k, v := range want {
		if amount[k] != v {
			t.Errorf("amount.%s = %v, want %v", k, amount[k], v)
		}
	}
	if amount["currency"] != "CNY" || amount["from"] == nil {
		t.Errorf("amount %v", amount)
	}
	if q := h.query(t, "REFUND0001").json(t); q["trade_state"] != "REFUND" || q["trade_state_desc"] != "转入退款" {
		t.Fatalf("order %v", q)
	}
	q := h.refundQuery(t, "R-0001|a*b@c")
	h.verify(t, q)
	if qb := q.json(t); q.status != 200 || qb["refund_id"] != b["refund_id"] || qb["status"] != "PROCESSING" {
		t.Fatalf("query %d %s", q.status, q.body)
	}
	h.clock.Advance(time.Minute)
	if _, err := h.sim.SettleRefund("", "R-0001|a*b@c", wechatpaysim.RefundSuccess); err != nil {
		t.Fatal(err)
	}
	qb := h.refundQuery(t, "R-0001|a*b@c").json(t)
	if st, err := time.Parse(time.RFC3339, qb["success_time"].(string)); err != nil || qb["status"] != "SUCCESS" || !st.Equal(h.clock.Now().Truncate(time.Second)) {
		t.Fatalf("settled %v %v", qb, err)
	}
	if unknown := h.refundQuery(t, "NOSUCHREFUND"); unknown.status != 404 || unknown.code() != "RESOURCE_NOT_EXISTS" ||
		!strings.Contains(string(unknown.body), "退款单不存在") {
		t.Fatalf("unknown refund %d %s", unknown.status, unknown.body)
	}
}

// Every refusal of the refund API, and the settings that pick the undocumented codes.
func TestRefundRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mod     func(*wechatpaysim.Config)
		before  []string // refund bodies accepted first, for order RULES00001 (total 100, paid)
		advance time.Duration
		body    string
		status  int
		code    string
	}{
		{"unknown order", nil, nil, 0, refundBody("NOSUCH0001", "RR1", 1, 100, nil), 404, "RESOURCE_NOT_EXISTS"},
		{"unpaid order", nil, nil, 0, refundBody("RULES00002", "RR1", 1, 100, nil), 404, "RESOURCE_NOT_EXISTS"},
		{"unknown transaction_id", nil, nil, 0, refundBody("", "RR1", 1, 100, map[string]any{"out_trade_no": nil, "transaction_id": "4200000000000000000000000000"}), 404, "RESOURCE_NOT_EXISTS"},
		{"total other than the order's", nil, nil, 0, refundBody("RULES00001", "RR1", 1, 99, nil), 400, "INVALID_REQUEST"},
		{"over-refund", nil, nil, 0, refundBody("RULES00001", "RR1", 101, 100, nil), 400, "INVALID_REQUEST"},
		{"over-refund after a partial refund", manual, []string{refundBody("RULES00001", "RR0", 60, 100, nil)}, 0, refundBody("RULES00001", "RR1", 41, 100, nil), 400, "INVALID_REQUEST"},
		{"over-refund as NOT_ENOUGH", func(c *wechatpaysim.Config) { c.OverRefund = wechatpaysim.OverRefundNotEnough }, nil, 0, refundBody("RULES00001", "RR1", 101, 100, nil), 403, "NOT_ENOUGH"},
		{"same out_refund_no, other amount", manual, []string{refundBody("RULES00001", "RR1", 10, 100, nil)}, 0, refundBody("RULES00001", "RR1", 11, 100, nil), 400, "INVALID_REQUEST"},
		{"same out_refund_no, other amount, v2's code", func(c *wechatpaysim.Config) {
			manual(c)
			c.RefundMismatch = wechatpaysim.RefundMismatchFeeMismatch
		}, []string{refundBody("RULES00001", "RR1", 10, 100, nil)}, 0, refundBody("RULES00001", "RR1", 11, 100, nil), 400, "REFUND_FEE_MISMATCH"},
		{"same out_refund_no, same amount", nil, []string{refundBody("RULES00001", "RR1", 10, 100, nil)}, 0, refundBody("RULES00001", "RR1", 10, 100, map[string]any{"reason": "again"}), 200, ""},
		{"a second refund within a minute", nil, []string{refundBody("RULES00001", "RR0", 10, 100, nil)}, 59 * time.Second, refundBody("RULES00001", "RR1", 10, 100, nil), 429, "FREQUENCY_LIMITED"},
		{"a second refund after a minute", nil, []string{refundBody("RULES00001", "RR0", 10, 100, nil)}, time.Minute, refundBody("RULES00001", "RR1", 10, 100, nil), 200, ""},
		{"a second refund within a minute as INVALID_REQUEST", func(c *wechatpaysim.Config) { c.RefundTooSoon = wechatpaysim.RefundTooSoonInvalidRequest },
			[]string{refundBody("RULES00001", "RR0", 10, 100, nil)}, time.Second, refundBody("RULES00001", "RR1", 10, 100, nil), 400, "INVALID_REQUEST"},
		{"more refunds than allowed", func(c *wechatpaysim.Config) { manual(c); c.RefundMaxPerOrder = 2 },
			[]string{refundBody("RULES00001", "RR8", 1, 100, nil), refundBody("RULES00001", "RR9", 1, 100, nil)}, 0, refundBody("RULES00001", "RR1", 1, 100, nil), 400, "INVALID_REQUEST"},
		{"past the refund window", func(c *wechatpaysim.Config) { c.RefundWindow = time.Hour }, nil, time.Hour + time.Second, refundBody("RULES00001", "RR1", 1, 100, nil), 400, "INVALID_REQUEST"},
		{"within the refund window", func(c *wechatpaysim.Config) { c.RefundWindow = time.Hour }, nil, time.Hour, refundBody("RULES00001", "RR1", 1, 100, nil), 200, ""},
		{"transaction_id and out_trade_no of two orders", nil, nil, 0, "TXID-MISMATCH", 400, "INVALID_REQUEST"},
		{"neither transaction_id nor out_trade_no", nil, nil, 0, refundBody("", "RR1", 1, 100, map[string]any{"out_trade_no": nil}), 400, "PARAM_ERROR"},
		{"no out_refund_no", nil, nil, 0, refundBody("RULES00001", "", 1, 100, nil), 400, "PARAM_ERROR"},
		{"out_refund_no of 65 characters", nil, nil, 0, refundBody("RULES00001", strings.Repeat("a", 65), 1, 100, nil), 400, "PARAM_ERROR"},
		{"out_refund_no with a space", nil, nil, 0, refundBody("RULES00001", "R 1", 1, 100, nil), 400, "PARAM_ERROR"},
		{"out_refund_no of 64 characters", nil, nil, 0, refundBody("RULES00001", strings.Repeat("a", 64), 1, 100, nil), 200, ""},
		{"reason of 81 characters", nil, nil, 0, refundBody("RULES00001", "RR1", 1, 100, map[string]any{"reason": strings.Repeat("退", 81)}), 400, "PARAM_ERROR"},
		{"unknown funds_account", nil, nil, 0, refundBody("RULES00001", "RR1", 1, 100, map[string]any{"funds_account": "BASIC"}), 400, "PARAM_ERROR"},
		{"notify_url with a query", nil, nil, 0, refundBody("RULES00001", "RR1", 1, 100, map[string]any{"notify_url": "https://e.com/r?a=1"}), 400, "PARAM_ERROR"},
		{"no amount", nil, nil, 0, refundBody("RULES00001", "RR1", 1, 100, map[string]any{"amount": nil}), 400, "PARAM_ERROR"},
		{"no currency", nil, nil, 0, refundBody("RULES00001", "RR1", 1, 100, map[string]any{"amount": map[string]any{"refund": 1, "total": 100}}), 400, "PARAM_ERROR"},
		{"a zero refund", nil, nil, 0, refundBody("RULES00001", "RR1", 0, 100, nil), 400, "PARAM_ERROR"},
		{"a refund in yuan", nil, nil, 0, refundBody("RULES00001", "RR1", 1, 100, map[string]any{"amount": map[string]any{"refund": 0.5, "total": 100, "currency": "CNY"}}), 400, "PARAM_ERROR"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.mod)
			paid := h.paid(t, "RULES00001", 100, wechatpaysim.PayOptions{})
			h.place(t, "native", "RULES00002", 100, "https://e.com/n")
			for _, b := range tc.before {
				if r := h.refund(t, b); r.status != 200 {
					t.Fatalf("before: %d %s", r.status, r.body)
				}
			}
			h.clock.Advance(tc.advance)
			body := tc.body
			if body == "TXID-MISMATCH" {
				body = refundBody("RULES00002", "RR1", 1, 100, map[string]any{"transaction_id": paid.TransactionID})
			}
			r := h.refund(t, body)
			if r.status != tc.status || r.code() != tc.code {
				t.Fatalf("%d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
			if r.status != 200 && r.header.Get("Wechatpay-Signature") != "" {
				t.Fatal("a refusal is signed")
			}
		})
	}
}

// The same request again answers the refund as it stands: no second refund.
func TestRefundIdempotent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, manual)
	h.paid(t, "IDEM000001", 500, wechatpaysim.PayOptions{})
	first := h.refund(t, refundBody("IDEM000001", "IDEM-R1", 200, 500, nil)).json(t)
	if _, err := h.sim.SettleRefund(mchID, "IDEM-R1", wechatpaysim.RefundSuccess); err != nil {
		t.Fatal(err)
	}
	again := h.refund(t, refundBody("IDEM000001", "IDEM-R1", 200, 500, nil)).json(t)
	if again["refund_id"] != first["refund_id"] || again["status"] != "SUCCESS" || again["success_time"] == nil {
		t.Fatalf("%v then %v", first, again)
	}
	if rs := h.sim.Refunds(mchID, "IDEM000001"); len(rs) != 1 || rs[0].Refund != 200 {
		t.Fatalf("%+v", rs)
	}
	if o, _ := h.sim.Order(mchID, "IDEM000001"); o.RefundedFen != 200 {
		t.Fatalf("%+v", o)
	}
}

// N identical refund requests at once make one refund; N different ones of 30 each
// against 100 make exactly three.
func TestConcurrentRefunds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, manual)
	h.paid(t, "CONC000001", 100, wechatpaysim.PayOptions{})
	h.paid(t, "CONC000002", 100, wechatpaysim.PayOptions{})
	const n = 12
	ids := make([]string, n)
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := h.refund(t, refundBody("CONC000001", "CONC-SAME", 30, 100, nil))
			if r.status == 200 {
				ids[i] = r.json(t)["refund_id"].(string)
			}
		})
		wg.Go(func() {
			statuses[i] = h.refund(t, refundBody("CONC000002", "CONC-"+string(rune('A'+i)), 30, 100, nil)).status
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("refund ids %v", ids)
		}
	}
	if rs := h.sim.Refunds(mchID, "CONC000001"); len(rs) != 1 {
		t.Fatalf("%d refunds", len(rs))
	}
	ok := 0
	for _, s := range statuses {
		if s == 200 {
			ok++
		} else if s != 400 {
			t.Fatalf("statuses %v", statuses)
		}
	}
	if rs := h.sim.Refunds(mchID, "CONC000002"); ok != 3 || len(rs) != 3 {
		t.Fatalf("%d accepted, %d refunds", ok, len(rs))
	}
}

// A refund succeeds after RefundDelay (scaled) and its REFUND.SUCCESS notification,
// encrypted with associated_data "refund" and signed, reaches the refund's notify_url.
func TestRefundNotification(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fast) // RefundDelay's minute is 60 ms
	pays, refunds := newSink(t, nil), newSink(t, nil)
	h.place(t, "native", "RNOTIFY001", 300, pays.url())
	if _, err := h.sim.Pay(mchID, "RNOTIFY001", wechatpaysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	pays.next(t, 5*time.Second)
	r := h.refund(t, refundBody("RNOTIFY001", "RNOTIFY-R1", 120, 300, map[string]any{"notify_url": refunds.url()}))
	if r.status != 200 || r.json(t)["status"] != "PROCESSING" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	d := refunds.next(t, 5*time.Second)
	env, res := h.decryptNotification(t, d)
	resource := env["resource"].(map[string]any)
	if env["event_type"] != "REFUND.SUCCESS" || env["summary"] != "退款成功" || env["resource_type"] != "encrypt-resource" ||
		resource["original_type"] != "refund" || resource["associated_data"] != "refund" {
		t.Fatalf("envelope %s", d.body)
	}
	q := h.refundQuery(t, "RNOTIFY-R1").json(t)
	for _, k := range []string{"out_trade_no", "transaction_id", "out_refund_no", "refund_id", "success_time", "user_received_account"} {
		if res[k] != q[k] || res[k] == nil {
			t.Errorf("%s: notification %v, query %v", k, res[k], q[k])
		}
	}
	amount := res["amount"].(map[string]any)
	if res["mchid"] != mchID || res["refund_status"] != "SUCCESS" || amount["refund"] != 120.0 || amount["payer_refund"] != 120.0 ||
		amount["total"] != 300.0 || amount["payer_total"] != 300.0 {
		t.Fatalf("resource %v", res)
	}
	eventually(t, 5*time.Second, "the attempt logged", func() bool {
		for _, a := range h.sim.Notifications() {
			if a.OutRefundNo == "RNOTIFY-R1" && a.Acknowledged && a.EventType == "REFUND.SUCCESS" {
				return true
			}
		}
		return false
	})
}

// The refund faults and the per-refund control: CLOSED gives the amount back, ABNORMAL
// then SUCCESS, PROCESSING stays; each move notifies; a final refund does not move.
func TestRefundOutcomes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *wechatpaysim.Config) { fast(c); c.RefundInterval = -1 })
	s := newSink(t, nil)
	h.place(t, "native", "OUTCOME001", 100, s.url())
	if _, err := h.sim.Pay(mchID, "OUTCOME001", wechatpaysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	s.next(t, 5*time.Second)
	if code := h.control(t, "POST", "/_sim/faults/refunds", `{"next":1,"status":"CLOSED"}`, nil); code != 200 {
		t.Fatal(code)
	}
	if r := h.refund(t, refundBody("OUTCOME001", "OUT-CLOSED", 100, 100, nil)); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if env, res := h.decryptNotification(t, s.next(t, 5*time.Second)); env["event_type"] != "REFUND.CLOSED" || res["refund_status"] != "CLOSED" || res["success_time"] != nil {
		t.Fatalf("%v %v", env, res)
	}
	if err := h.sim.SetRefundFaults(wechatpaysim.RefundFaults{Next: 1, Status: wechatpaysim.RefundProcessing}); err != nil {
		t.Fatal(err)
	}
	// The closed refund gave its 100 back.
	if r := h.refund(t, refundBody("OUTCOME001", "OUT-STUCK", 100, 100, nil)); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var got wechatpaysim.Refund
	if code := h.control(t, "POST", "/_sim/refunds/OUT-STUCK/abnormal", "", &got); code != 200 || got.Status != "ABNORMAL" {
		t.Fatalf("%d %+v", code, got)
	}
	if env, _ := h.decryptNotification(t, s.next(t, 5*time.Second)); env["event_type"] != "REFUND.ABNORMAL" || env["summary"] != "退款异常" {
		t.Fatalf("%v", env)
	}
	if code := h.control(t, "POST", "/_sim/refunds/OUT-STUCK/success?mchid="+mchID, "", &got); code != 200 || got.Status != "SUCCESS" || got.SuccessAt.IsZero() {
		t.Fatalf("%d %+v", code, got)
	}
	if env, _ := h.decryptNotification(t, s.next(t, 5*time.Second)); env["event_type"] != "REFUND.SUCCESS" {
		t.Fatalf("%v", env)
	}
	var listed wechatpaysim.Refund
	if code := h.control(t, "GET", "/_sim/refunds/OUT-STUCK", "", &listed); code != 200 || listed.Status != "SUCCESS" || listed.RefundID != got.RefundID {
		t.Fatalf("%d %+v", code, listed)
	}
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/_sim/refunds/OUT-STUCK/close", 409},
		{"/_sim/refunds/OUT-CLOSED/success", 409},
		{"/_sim/refunds/OUT-STUCK/refund", 404},
		{"/_sim/refunds/NOSUCH/success", 404},
	} {
		if code := h.control(t, "POST", tc.path, "", nil); code != tc.status {
			t.Errorf("%s: %d, want %d", tc.path, code, tc.status)
		}
	}
	if err := h.sim.SetRefundFaults(wechatpaysim.RefundFaults{Next: 1, Status: "SUCCESS"}); err == nil {
		t.Fatal("a SUCCESS refund fault was accepted")
	}
	if f := h.sim.Faults(); f.Refunds.Next != 0 {
		t.Fatalf("%+v", f.Refunds)
	}
}

// A SYSTEM_ERROR after processing: the refund was taken; the retry answers it. A 429
// after accepting (a fault, or the throttle with accept_refunds): the refund exists.
func TestRefundLostAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		arm    func(tb testing.TB, h *harness)
		status int
		code   string
		taken  bool
	}{
		{"SYSTEM_ERROR after processing", func(tb testing.TB, h *harness) {
			h.control(tb, "POST", "/_sim/faults/api", `{"mode":"system_error","path":"/v3/refund/domestic/refunds","after_processing":true}`, nil)
		}, 500, "SYSTEM_ERROR", true},
		{"SYSTEM_ERROR before processing", func(tb testing.TB, h *harness) {
			h.control(tb, "POST", "/_sim/faults/api", `{"mode":"system_error","path":"/v3/refund/domestic/refunds"}`, nil)
		}, 500, "SYSTEM_ERROR", false},
		{"FREQUENCY_LIMITED after accepting", func(tb testing.TB, h *harness) {
			h.control(tb, "POST", "/_sim/faults/api", `{"mode":"frequency_limited","path":"/v3/refund/domestic/refunds","after_processing":true}`, nil)
		}, 429, "FREQUENCY_LIMITED", true},
		{"throttled, refunds accepted", func(tb testing.TB, h *harness) {
			if err := h.sim.SetThrottle(wechatpaysim.Throttle{Rate: 0.001, Burst: 1, AcceptRefunds: true}); err != nil {
				tb.Fatal(err)
			}
			h.query(tb, "LOST000001") // uses the one call allowed
		}, 429, "FREQUENCY_LIMITED", true},
		{"throttled", func(tb testing.TB, h *harness) {
			h.control(tb, "POST", "/_sim/faults/throttle", `{"rate":0.001,"burst":1}`, nil)
			h.query(tb, "LOST000001")
		}, 429, "FREQUENCY_LIMITED", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, manual)
			h.paid(t, "LOST000001", 100, wechatpaysim.PayOptions{})
			tc.arm(t, h)
			body := refundBody("LOST000001", "LOST-R1", 50, 100, nil)
			lost := h.refund(t, body)
			if lost.status != tc.status || lost.code() != tc.code {
				t.Fatalf("%d %s", lost.status, lost.body)
			}
			if taken := len(h.sim.Refunds(mchID, "")) == 1; taken != tc.taken {
				t.Fatalf("taken %v", taken)
			}
			h.sim.ResetFaults()
			retry := h.refund(t, body)
			if retry.status != 200 || len(h.sim.Refunds(mchID, "")) != 1 {
				t.Fatalf("retry %d %s", retry.status, retry.body)
			}
		})
	}
}

// A console refund: made up out_refund_no, the refund rules, visible to the refund
// query and to the order; its notification goes to the order's notify_url.
func TestConsoleRefund(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fast)
	s := newSink(t, nil)
	h.place(t, "native", "CONSOLE001", 800, s.url())
	if _, err := h.sim.Pay(mchID, "CONSOLE001", wechatpaysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	s.next(t, 5*time.Second)
	var got wechatpaysim.Refund
	if code := h.control(t, "POST", "/_sim/orders/CONSOLE001/refund", `{"refund":300,"reason":"客服退款"}`, &got); code != 200 ||
		!got.Console || got.Refund != 300 || got.Status != "PROCESSING" || !regexp.MustCompile(`^C503\d{26}$`).MatchString(got.OutRefundNo) {
		t.Fatalf("%d %+v", code, got)
	}
	if q := h.refundQuery(t, got.OutRefundNo).json(t); q["refund_id"] != got.RefundID {
		t.Fatalf("%v", q)
	}
	if env, res := h.decryptNotification(t, s.next(t, 5*time.Second)); env["event_type"] != "REFUND.SUCCESS" || res["out_refund_no"] != got.OutRefundNo {
		t.Fatalf("%v %v", env, res)
	}
	var refusal map[string]string
	if code := h.control(t, "POST", "/_sim/orders/CONSOLE001/refund", `{"refund":600}`, nil); code != 400 {
		t.Fatalf("over-refund from the console: %d", code)
	}
	h.clock.Advance(time.Minute)
	if rest, err := h.sim.ConsoleRefund(mchID, "CONSOLE001", wechatpaysim.ConsoleRefund{}); err != nil || rest.Refund != 500 {
		t.Fatalf("the rest: %+v %v", rest, err)
	}
	h.clock.Advance(time.Minute)
	if _, err := h.sim.ConsoleRefund(mchID, "CONSOLE001", wechatpaysim.ConsoleRefund{}); err == nil || !strings.Contains(err.Error(), "INVALID_REQUEST") {
		t.Fatalf("nothing left: %v", err)
	}
	if code := h.control(t, "POST", "/_sim/orders/NOSUCH0001/refund", `{}`, &refusal); code != 404 {
		t.Fatalf("unknown order: %d", code)
	}
	if code := h.control(t, "GET", "/_sim/refunds?out_trade_no=CONSOLE001", "", nil); code != 200 {
		t.Fatal(code)
	}
	if rs := h.sim.Refunds("", "CONSOLE001"); len(rs) != 2 || rs[1].Refund != 500 {
		t.Fatalf("%+v", rs)
	}
}

// A refund of another merchant's order is RESOURCE_NOT_EXISTS, and its refunds are not
// the other's to query.
func TestRefundsPerMerchant(t *testing.T) {
	t.Parallel()
	h := newHarness(t, manual)
	h.paid(t, "MERCH00001", 100, wechatpaysim.PayOptions{})
	if r := h.refund(t, refundBody("MERCH00001", "MERCH-R1", 10, 100, nil)); r.status != 200 {
		t.Fatal(r.status)
	}
	other := h.secondMerchant(t)
	r := h.do(t, req{method: "POST", target: "/v3/refund/domestic/refunds", body: refundBody("MERCH00001", "MERCH-R2", 10, 100, nil),
		mchid: other.MchID, serial: other.MerchantSerialNo, key: other.MerchantPrivateKeyPEM})
	if r.status != http.StatusNotFound || r.code() != "RESOURCE_NOT_EXISTS" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	q := h.do(t, req{method: "GET", target: "/v3/refund/domestic/refunds/MERCH-R1", mchid: other.MchID, serial: other.MerchantSerialNo, key: other.MerchantPrivateKeyPEM})
	if q.status != http.StatusNotFound {
		t.Fatalf("%d %s", q.status, q.body)
	}
}

// secondMerchant serves another merchant with fresh 1024-bit keys.
func (h *harness) secondMerchant(tb testing.TB) wechatpaysim.KeySet {
	tb.Helper()
	other, err := wechatpaysim.GenerateKeys("1230000199", "wx9999999999999999", 1024)
	if err != nil {
		tb.Fatal(err)
	}
	if err := h.sim.AddMerchant(other.Merchant()); err != nil {
		tb.Fatal(err)
	}
	return other
}

// A refund notification is redelivered on the payment notifications' schedule, freshly
// signed each time, until the merchant acknowledges it; the notification faults apply.
func TestRefundNotificationRedelivered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *wechatpaysim.Config) { fast(c); c.RefundInterval = -1 })
	s := newSink(t, func(n int, d delivery) int {
		if strings.Contains(string(d.body), "REFUND.") && n < 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	h.place(t, "native", "REDELIV001", 100, s.url())
	if _, err := h.sim.Pay(mchID, "REDELIV001", wechatpaysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	s.next(t, 5*time.Second)
	if r := h.refund(t, refundBody("REDELIV001", "REDELIV-R1", 10, 100, nil)); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	first, second := s.next(t, 5*time.Second), s.next(t, 5*time.Second)
	e1, _ := h.decryptNotification(t, first)
	e2, _ := h.decryptNotification(t, second)
	if e1["id"] != e2["id"] || e1["event_type"] != "REFUND.SUCCESS" || first.header.Get("Wechatpay-Nonce") == second.header.Get("Wechatpay-Nonce") {
		t.Fatalf("%v %v", e1, e2)
	}
	// The schedule is the simulator's: its second delivery starts 15 s (scaled: 15 ms)
	// after its first started. The sink's arrival times would add each delivery's own
	// signing and sending, which a loaded machine stretches.
	var at []time.Time
	eventually(t, 5*time.Second, "the simulator logs the refund notification's two deliveries", func() bool {
		at = at[:0]
		for _, a := range h.sim.Notifications() {
			if a.OutRefundNo == "REDELIV-R1" && a.Kind == wechatpaysim.AttemptDelivery {
				at = append(at, a.At)
			}
		}
		return len(at) >= 2
	})
	if gap := at[1].Sub(at[0]); gap < 15*time.Millisecond {
		t.Fatalf("redelivered %s after the first delivery, want 15 s scaled (15 ms) or more", gap)
	}
	if err := h.sim.SetNotificationFaults(wechatpaysim.NotificationFaults{LoseNext: 1}); err != nil {
		t.Fatal(err)
	}
	if r := h.refund(t, refundBody("REDELIV001", "REDELIV-R2", 10, 100, nil)); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	eventually(t, 5*time.Second, "the lost notification logged", func() bool {
		for _, a := range h.sim.Notifications() {
			if a.OutRefundNo == "REDELIV-R2" && a.Dropped {
				return true
			}
		}
		return false
	})
}
