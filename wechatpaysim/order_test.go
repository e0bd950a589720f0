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

// The order APIs' field rules, each refusal naming its field.
func TestOrderFieldRules(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	n := "https://example.com/notify"
	tests := []struct {
		name, kind string
		extra      map[string]any
		raw        string
		status     int
		code       string
		field      string
	}{
		{"out_trade_no too short", "native", map[string]any{"out_trade_no": "12345"}, "", 400, "PARAM_ERROR", "/out_trade_no"},
		{"out_trade_no too long", "native", map[string]any{"out_trade_no": strings.Repeat("a", 33)}, "", 400, "PARAM_ERROR", "/out_trade_no"},
		{"out_trade_no charset", "native", map[string]any{"out_trade_no": "abc#12345"}, "", 400, "PARAM_ERROR", "/out_trade_no"},
		{"out_trade_no missing", "native", map[string]any{"out_trade_no": nil}, "", 400, "PARAM_ERROR", "/out_trade_no"},
		{"description missing", "native", map[string]any{"description": nil}, "", 400, "PARAM_ERROR", "/description"},
		{"description too long", "native", map[string]any{"description": strings.Repeat("商", 128)}, "", 400, "PARAM_ERROR", "/description"},
		{"notify_url missing", "native", map[string]any{"notify_url": nil}, "", 400, "PARAM_ERROR", "/notify_url"},
		{"notify_url with a query", "native", map[string]any{"notify_url": n + "?a=1"}, "", 400, "PARAM_ERROR", "/notify_url"},
		{"notify_url not a URL", "native", map[string]any{"notify_url": "notify"}, "", 400, "PARAM_ERROR", "/notify_url"},
		{"amount missing", "native", map[string]any{"amount": nil}, "", 400, "PARAM_ERROR", "/amount/total"},
		{"total zero", "native", map[string]any{"amount": map[string]any{"total": 0}}, "", 400, "PARAM_ERROR", "/amount/total"},
		{"total negative", "native", map[string]any{"amount": map[string]any{"total": -1}}, "", 400, "PARAM_ERROR", "/amount/total"},
		{"total not integer fen", "native", map[string]any{"amount": map[string]any{"total": 1.5}}, "", 400, "PARAM_ERROR", "/amount/total"},
		{"total a string", "native", map[string]any{"amount": map[string]any{"total": "100"}}, "", 400, "PARAM_ERROR", "/amount/total"},
		{"currency USD", "native", map[string]any{"amount": map[string]any{"total": 1, "currency": "USD"}}, "", 400, "PARAM_ERROR", "/amount/currency"},
		{"attach too long", "native", map[string]any{"attach": strings.Repeat("a", 129)}, "", 400, "PARAM_ERROR", "/attach"},
		{"time_expire not RFC 3339", "native", map[string]any{"time_expire": "2030-01-01 10:00:00"}, "", 400, "PARAM_ERROR", "/time_expire"},
		{"JSAPI without payer", "jsapi", map[string]any{"payer": nil}, "", 400, "PARAM_ERROR", "/payer/openid"},
		{"H5 without client IP", "h5", map[string]any{"scene_info": map[string]any{"h5_info": map[string]any{"type": "Wap"}}}, "", 400, "PARAM_ERROR", "/scene_info/payer_client_ip"},
		{"H5 without h5_info", "h5", map[string]any{"scene_info": map[string]any{"payer_client_ip": "1.2.3.4"}}, "", 400, "PARAM_ERROR", "/scene_info/h5_info/type"},
		{"appid missing", "native", map[string]any{"appid": nil}, "", 400, "PARAM_ERROR", "/appid"},
		{"appid not bound", "native", map[string]any{"appid": "wx0000000000000000"}, "", 400, "APPID_MCHID_NOT_MATCH", ""},
		{"unknown body mchid", "native", map[string]any{"mchid": "1900000000"}, "", 400, "MCH_NOT_EXISTS", ""},
		{"not JSON", "native", nil, "{", 400, "PARAM_ERROR", "/"},
		{"JSAPI valid with | and *", "jsapi", map[string]any{"out_trade_no": "a_b-c|d*e"}, "", 200, "", ""},
		{"native valid without currency", "native", map[string]any{"amount": map[string]any{"total": 1}}, "", 200, "", ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			extra := map[string]any{"out_trade_no": "RULES" + strings.Repeat("0", 3) + string(rune('A'+i))}
			for k, v := range tc.extra {
				extra[k] = v
			}
			body := tc.raw
			if body == "" {
				body = orderBody(tc.kind, "", 1, n, extra)
			}
			r := h.do(t, req{method: "POST", target: "/v3/pay/transactions/" + tc.kind, body: body})
			if r.status != tc.status || r.code() != tc.code {
				t.Fatalf("got %d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
			if tc.field != "" {
				var e struct {
					Detail struct {
						Field    string `json:"field"`
						Location string `json:"location"`
					} `json:"detail"`
				}
				_ = json.Unmarshal(r.body, &e)
				if e.Detail.Field != tc.field || e.Detail.Location != "body" {
					t.Fatalf("detail %s, want field %s", r.body, tc.field)
				}
			}
		})
	}
}

// LegacyOutTradeNoCharset refuses '|', as the older pages' charset does.
func TestLegacyOutTradeNoCharset(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *wechatpaysim.Config) { c.LegacyOutTradeNoCharset = true })
	r := h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", body: orderBody("native", "a|b*c-d_e", 1, "https://e.com/n", nil)})
	if r.status != 400 || r.code() != "PARAM_ERROR" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	h.place(t, "native", "a*b-c_d00", 1, "https://e.com/n")
}

// Each order API answers its own shape.
func TestOrderAnswers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	prepay := regexp.MustCompile(`^wx\d{14}[0-9A-F]{20}$`)
	tests := []struct {
		kind, key string
		re        *regexp.Regexp
	}{
		{"native", "code_url", regexp.MustCompile(`^weixin://wxpay/bizpayurl\?pr=[0-9A-Za-z]{9}$`)},
		{"jsapi", "prepay_id", prepay},
		{"app", "prepay_id", prepay},
		{"h5", "h5_url", regexp.MustCompile(`^https://wx\.tenpay\.com/cgi-bin/mmpayweb-bin/checkmweb\?prepay_id=wx\d{14}[0-9A-F]{20}&package=\d{10}$`)},
	}
	for _, tc := range tests {
		r := h.place(t, tc.kind, "SHAPE_"+tc.kind, 1, "https://e.com/n")
		m := r.json(t)
		if len(m) != 1 || !tc.re.MatchString(m[tc.key].(string)) {
			t.Errorf("%s answer %s", tc.kind, r.body)
		}
		h.verify(t, r)
	}
}

// The same out_trade_no with identical parameters answers as before; other parameters or
// another trade type are 403 OUT_TRADE_NO_USED; a closed order is 400 ORDER_CLOSED; a
// paid one 400 ORDERPAID.
func TestRepeatedOutTradeNo(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := orderBody("native", "REPEAT0001", 100, "https://e.com/n", map[string]any{"attach": "a"})
	first := h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", body: body})
	// The same parameters in another key order and spacing are the same parameters.
	var m map[string]any
	_ = json.Unmarshal([]byte(body), &m)
	reordered, _ := json.MarshalIndent(m, "", "   ")
	again := h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", body: string(reordered)})
	if first.status != 200 || again.status != 200 || string(first.body) != string(again.body) {
		t.Fatalf("repeat: %d %s then %d %s", first.status, first.body, again.status, again.body)
	}
	h.verify(t, again)
	tests := []struct {
		name, kind, body string
		status           int
		code             string
	}{
		{"other amount", "native", orderBody("native", "REPEAT0001", 101, "https://e.com/n", map[string]any{"attach": "a"}), 403, "OUT_TRADE_NO_USED"},
		{"other attach", "native", orderBody("native", "REPEAT0001", 100, "https://e.com/n", nil), 403, "OUT_TRADE_NO_USED"},
		{"other trade type", "h5", orderBody("h5", "REPEAT0001", 100, "https://e.com/n", map[string]any{"attach": "a"}), 403, "OUT_TRADE_NO_USED"},
	}
	for _, tc := range tests {
		if r := h.do(t, req{method: "POST", target: "/v3/pay/transactions/" + tc.kind, body: tc.body}); r.status != tc.status || r.code() != tc.code {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	if _, err := h.sim.Pay(mchID, "REPEAT0001", wechatpaysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", body: body}); r.status != 400 || r.code() != "ORDERPAID" {
		t.Fatalf("paid: %d %s", r.status, r.body)
	}
	closedBody := orderBody("native", "REPEAT0002", 100, "https://e.com/n", nil)
	h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", body: closedBody})
	if r := h.do(t, req{method: "POST", target: "/v3/pay/transactions/out-trade-no/REPEAT0002/close", body: `{"mchid":"` + mchID + `"}`}); r.status != 204 {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	if r := h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", body: closedBody}); r.status != 400 || r.code() != "ORDER_CLOSED" {
		t.Fatalf("closed: %d %s", r.status, r.body)
	}
}

// A repeat after the prepay_id's two hours gets a fresh one; within them the same.
func TestRepeatRenewsAnExpiredPrepayID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := orderBody("jsapi", "RENEW00001", 100, "https://e.com/n", nil)
	first := h.do(t, req{method: "POST", target: "/v3/pay/transactions/jsapi", body: body}).json(t)["prepay_id"]
	h.clock.Advance(time.Hour)
	same := h.do(t, req{method: "POST", target: "/v3/pay/transactions/jsapi", body: body}).json(t)["prepay_id"]
	h.clock.Advance(time.Hour)
	renewed := h.do(t, req{method: "POST", target: "/v3/pay/transactions/jsapi", body: body}).json(t)["prepay_id"]
	if first != same || renewed == first || renewed == nil {
		t.Fatalf("prepay ids %v %v %v", first, same, renewed)
	}
}

// time_expire: absent means 7 days; earlier than a minute from now is raised to a
// minute; later than the ceiling (90 days) is lowered to it; an order past it is CLOSED.
func TestTimeExpire(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	now := h.clock.Now()
	tests := []struct {
		name, raw string
		want      time.Time
	}{
		{"default 7 days", "", now.Add(7 * 24 * time.Hour)},
		{"in the past, raised", now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Minute)},
		{"in 10 s, raised", now.Add(10 * time.Second).Format(time.RFC3339), now.Add(time.Minute)},
		{"in 2 hours, kept (UTC Z)", now.Add(2 * time.Hour).UTC().Format(time.RFC3339), now.Add(2 * time.Hour).Truncate(time.Second)},
		{"in a year, lowered", now.AddDate(1, 0, 0).Format(time.RFC3339), now.Add(90 * 24 * time.Hour)},
	}
	for i, tc := range tests {
		no := "EXPIRE000" + string(rune('A'+i))
		extra := map[string]any{}
		if tc.raw != "" {
			extra["time_expire"] = tc.raw
		}
		h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", body: orderBody("native", no, 1, "https://e.com/n", extra)})
		o, err := h.sim.Order(mchID, no)
		if err != nil {
			t.Fatal(err)
		}
		if d := o.ExpireAt.Sub(tc.want); d > time.Second || d < -time.Second {
			t.Errorf("%s: expires %s, want %s", tc.name, o.ExpireAt, tc.want)
		}
	}
	h.clock.Advance(61 * time.Second)
	q := h.query(t, "EXPIRE000B").json(t)
	if q["trade_state"] != "CLOSED" || q["trade_state_desc"] != "订单已关闭" {
		t.Fatalf("expired order: %v", q)
	}
	if q := h.query(t, "EXPIRE000D").json(t); q["trade_state"] != "NOTPAY" {
		t.Fatalf("unexpired order: %v", q)
	}
	if _, err := h.sim.Pay(mchID, "EXPIRE000B", wechatpaysim.PayOptions{}); err == nil {
		t.Fatal("an expired order was paid")
	}
}

// Each merchant's orders are its own: the same out_trade_no under two merchants is two
// orders, and one merchant cannot see or close the other's.
func TestMerchantsAreSeparate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	second, err := wechatpaysim.GenerateKeys("1230000110", "wx2222222222222222", 1024)
	if err != nil {
		t.Fatal(err)
	}
	m := second.Merchant()
	body, _ := json.Marshal(map[string]any{"mchid": m.MchID, "appids": m.AppIDs, "public_key": m.PublicKeyPEM, "apiv3_key": m.APIv3Key})
	if code := h.control(t, "POST", "/_sim/merchants", string(body), nil); code != 200 {
		t.Fatalf("register: %d", code)
	}
	if code := h.control(t, "POST", "/_sim/merchants", strings.Replace(string(body), m.APIv3Key, strings.Repeat("x", 32), 1), nil); code != http.StatusConflict {
		t.Fatalf("register again with another key: %d", code)
	}
	as2 := func(q req) req {
		q.mchid, q.serial, q.key = second.MchID, second.MerchantSerialNo, second.MerchantPrivateKeyPEM
		return q
	}
	h.place(t, "native", "SHARED0001", 100, "https://e.com/n")
	body2 := strings.NewReplacer(`"mchid":"`+mchID, `"mchid":"`+second.MchID, appID, second.AppID).Replace(orderBody("native", "SHARED0001", 200, "https://e.com/n", nil))
	if r := h.do(t, as2(req{method: "POST", target: "/v3/pay/transactions/native", body: body2})); r.status != 200 {
		t.Fatalf("second merchant, same out_trade_no: %d %s", r.status, r.body)
	}
	if r := h.do(t, as2(req{method: "GET", target: "/v3/pay/transactions/out-trade-no/SHARED0001?mchid=" + second.MchID})); r.json(t)["amount"].(map[string]any)["total"] != 200.0 {
		t.Fatalf("second merchant's order: %s", r.body)
	}
	if r := h.do(t, as2(req{method: "GET", target: "/v3/pay/transactions/out-trade-no/ONLYFIRST1?mchid=" + second.MchID})); r.status != 404 {
		t.Fatalf("%d", r.status)
	}
	if r := h.do(t, as2(req{method: "GET", target: "/v3/pay/transactions/out-trade-no/SHARED0001?mchid=" + mchID})); r.status != 400 || r.code() != "INVALID_REQUEST" {
		t.Fatalf("querying another merchant's mchid: %d %s", r.status, r.body)
	}
	if r := h.do(t, as2(req{method: "POST", target: "/v3/pay/transactions/native", body: orderBody("native", "CROSS00001", 1, "https://e.com/n", map[string]any{"mchid": second.MchID})})); r.code() != "APPID_MCHID_NOT_MATCH" {
		t.Fatalf("the first merchant's appid for the second: %d %s", r.status, r.body)
	}
	if _, err := h.sim.Order("", "SHARED0001"); err == nil {
		t.Fatal("an ambiguous out_trade_no was resolved")
	}
	var merchants []wechatpaysim.Merchant
	if h.control(t, "GET", "/_sim/merchants", "", &merchants); len(merchants) != 2 {
		t.Fatalf("merchants %+v", merchants)
	}
}

// Concurrent identical orders create one order and all answer the same.
func TestConcurrentIdenticalOrders(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := orderBody("native", "CONCUR0001", 100, "https://e.com/n", nil)
	const n = 16
	answers := make([]resp, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = h.do(t, req{method: "POST", target: "/v3/pay/transactions/native", body: body})
		}()
	}
	wg.Wait()
	for _, a := range answers {
		if a.status != 200 || string(a.body) != string(answers[0].body) {
			t.Fatalf("answers differ: %d %s vs %s", a.status, a.body, answers[0].body)
		}
	}
	if orders := h.sim.Orders(mchID); len(orders) != 1 {
		t.Fatalf("%d orders", len(orders))
	}
}
