package wechatpaysim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/wechatpaysim"
)

// fast runs the default schedule a thousand times faster: 15 s become 15 ms.
func fast(c *wechatpaysim.Config) { c.TimeScale = 1000 }

// A payment's TRANSACTION.SUCCESS notification: the envelope, the signed headers, and
// the resource, encrypted under the APIv3 key, holding what the query answers.
func TestPaymentNotification(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fast)
	s := newSink(t, nil)
	h.place(t, "native", "NOTIFY0001", 880, s.url())
	if _, err := h.sim.Pay(mchID, "NOTIFY0001", wechatpaysim.PayOptions{OpenID: "o-buyer"}); err != nil {
		t.Fatal(err)
	}
	d := s.next(t, 5*time.Second)
	for _, k := range []string{"Wechatpay-Timestamp", "Wechatpay-Nonce", "Wechatpay-Signature", "Wechatpay-Serial", "Request-ID"} {
		if d.header.Get(k) == "" {
			t.Fatalf("no %s header", k)
		}
	}
	if d.header.Get("Content-Type") != "application/json" || d.header.Get("Wechatpay-Signature-Type") != wechatpaysim.AuthScheme {
		t.Fatalf("headers %v", d.header)
	}
	env, tx := h.decryptNotification(t, d)
	res := env["resource"].(map[string]any)
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(env["id"].(string)) ||
		env["event_type"] != "TRANSACTION.SUCCESS" || env["summary"] != "支付成功" || env["resource_type"] != "encrypt-resource" ||
		res["original_type"] != "transaction" || res["algorithm"] != "AEAD_AES_256_GCM" || res["associated_data"] != "transaction" || len(res["nonce"].(string)) != 12 {
		t.Fatalf("envelope %s", d.body)
	}
	if _, err := time.Parse(time.RFC3339, env["create_time"].(string)); err != nil {
		t.Fatal(err)
	}
	q := h.query(t, "NOTIFY0001").json(t)
	for _, k := range []string{"transaction_id", "trade_state", "trade_type", "success_time", "bank_type", "out_trade_no", "appid", "mchid"} {
		if tx[k] != q[k] {
			t.Errorf("%s: notification %v, query %v", k, tx[k], q[k])
		}
	}
	if tx["payer"].(map[string]any)["openid"] != "o-buyer" || tx["amount"].(map[string]any)["payer_total"] != 880.0 {
		t.Fatalf("resource %v", tx)
	}
	eventually(t, 5*time.Second, "the attempt logged", func() bool { return len(h.sim.Notifications()) == 1 })
	a := h.sim.Notifications()[0]
	if !a.Acknowledged || a.Attempt != 1 || a.Kind != "delivery" || a.StatusCode != 200 || a.ID != env["id"] || a.Signature != d.header.Get("Wechatpay-Signature") {
		t.Fatalf("attempt %+v", a)
	}
}

// The default schedule: 16 deliveries, separated by 15s, 15s, 30s, 3m, 10m, 20m, 30m,
// 30m, 30m, 60m, 3h, 3h, 3h, 6h and 6h (24h04m in all), scaled by TimeScale.
func TestNotifySchedule(t *testing.T) {
	t.Parallel()
	var total time.Duration
	for _, d := range wechatpaysim.DefaultNotifySchedule() {
		total += d
	}
	if total != 24*time.Hour+4*time.Minute || len(wechatpaysim.DefaultNotifySchedule()) != 15 {
		t.Fatalf("schedule sums to %s over %d intervals", total, len(wechatpaysim.DefaultNotifySchedule()))
	}
	const scale = 100_000
	h := newHarness(t, func(c *wechatpaysim.Config) { c.TimeScale = scale })
	s := newSink(t, func(int, delivery) int { return http.StatusInternalServerError })
	h.place(t, "native", "SCHED00001", 1, s.url())
	if _, err := h.sim.Pay(mchID, "SCHED00001", wechatpaysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 16 {
		s.next(t, 10*time.Second)
	}
	eventually(t, 5*time.Second, "16 attempts logged", func() bool { return len(h.sim.Notifications()) == 16 })
	attempts := h.sim.Notifications()
	var offset time.Duration
	for k, d := range wechatpaysim.DefaultNotifySchedule() {
		offset += d
		if since := attempts[k+1].At.Sub(attempts[0].At); since < offset/scale {
			t.Errorf("delivery %d went %s after the first, before its scheduled %s", k+2, since, offset/scale)
		}
	}
	for i, a := range attempts {
		if a.Attempt != i+1 || a.Acknowledged || a.StatusCode != 500 {
			t.Fatalf("attempt %d: %+v", i, a)
		}
	}
	if n := len(s.deliveries()); n != 16 {
		t.Fatalf("%d deliveries", n)
	}
}

// Each redelivery is signed afresh (new timestamp, new nonce, new signature) over the
// same body, so a merchant checking the ±5 minute window accepts a retry hours later;
// the first 200 stops them.
func TestRedeliveriesFreshlySigned(t *testing.T) {
	t.Parallel()
	var h *harness
	s := newSink(t, func(n int, d delivery) int {
		// The merchant's clock is the simulator's: check the window the way clients do,
		// then let 4 minutes pass before the next delivery.
		if age := h.clock.Now().Unix() - unix(t, d.header.Get("Wechatpay-Timestamp")); age > 300 || age < -300 {
			t.Errorf("delivery %d is %d s old", n, age)
		}
		h.clock.Advance(4 * time.Minute)
		if n < 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	h = newHarness(t, fast)
	h.place(t, "native", "FRESH00001", 1, s.url())
	if _, err := h.sim.Pay(mchID, "FRESH00001", wechatpaysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		s.next(t, 5*time.Second)
	}
	eventually(t, 5*time.Second, "4 attempts logged", func() bool { return len(h.sim.Notifications()) == 4 })
	got := s.deliveries()
	seen := map[string]bool{}
	for i, d := range got {
		h.decryptNotification(t, d)
		if string(d.body) != string(got[0].body) {
			t.Fatal("a redelivery changed the body")
		}
		nonce, sig := d.header.Get("Wechatpay-Nonce"), d.header.Get("Wechatpay-Signature")
		if seen[nonce] || seen[sig] {
			t.Fatalf("delivery %d reuses a nonce or signature", i)
		}
		seen[nonce], seen[sig] = true, true
		if i > 0 && unix(t, d.header.Get("Wechatpay-Timestamp")) <= unix(t, got[i-1].header.Get("Wechatpay-Timestamp")) {
			t.Fatalf("delivery %d's timestamp did not move on", i)
		}
	}
	attempts := h.sim.Notifications()
	if !attempts[3].Acknowledged || attempts[3].StatusCode != 204 || attempts[2].Acknowledged {
		t.Fatalf("attempts %+v", attempts)
	}
}

// What counts as the merchant's acknowledgement: 200 or 204 within the timeout; with
// NotifyRequireSuccessCode also {"code":"SUCCESS"}.
func TestNotificationAcknowledgement(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		requireCode bool
		handler     http.HandlerFunc
		ack         bool
		errText     string
	}{
		{"200", false, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }, true, ""},
		{"204", false, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }, true, ""},
		{"200 with FAIL counts", false, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"code":"FAIL"}`)) }, true, ""},
		{"202", false, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(202) }, false, ""},
		{"500", false, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }, false, ""},
		{"no answer within the timeout", false, func(_ http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body) // the server notices the client hanging up only once the body is read
			<-r.Context().Done()
		}, false, "deadline exceeded"},
		{"SUCCESS required, 200 empty", true, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }, false, ""},
		{"SUCCESS required, 200 SUCCESS", true, func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"code":"SUCCESS","message":"成功"}`))
		}, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, tc.handler)
			h := newHarness(t, func(c *wechatpaysim.Config) {
				c.NotifyRequireSuccessCode, c.NotifyTimeout, c.NotifySchedule = tc.requireCode, 100*time.Millisecond, []time.Duration{}
				c.HTTPClient = nil
			})
			h.place(t, "native", "ACK0000001", 1, srv.URL+"/n")
			if _, err := h.sim.Pay(mchID, "ACK0000001", wechatpaysim.PayOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "the attempt", func() bool { return len(h.sim.Notifications()) == 1 })
			a := h.sim.Notifications()[0]
			if a.Acknowledged != tc.ack || !strings.Contains(a.Error, tc.errText) {
				t.Fatalf("attempt %+v", a)
			}
		})
	}
}

// Signature probes: with SignatureProbes a probe (WECHATPAY/SIGNTEST/…) precedes the
// first delivery; the control API sends one on demand.
func TestSignatureProbes(t *testing.T) {
	t.Parallel()
	refusesProbes := func(_ int, d delivery) int {
		if strings.HasPrefix(d.header.Get("Wechatpay-Signature"), wechatpaysim.ProbePrefix) {
			return http.StatusUnauthorized
		}
		return http.StatusOK
	}
	s := newSink(t, refusesProbes)
	h := newHarness(t, func(c *wechatpaysim.Config) { fast(c); c.SignatureProbes = true })
	h.place(t, "native", "PROBE00001", 1, s.url())
	if _, err := h.sim.Pay(mchID, "PROBE00001", wechatpaysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	probe, genuine := s.next(t, 5*time.Second), s.next(t, 5*time.Second)
	if !regexp.MustCompile(`^WECHATPAY/SIGNTEST/[0-9A-F]{32}$`).MatchString(probe.header.Get("Wechatpay-Signature")) ||
		string(probe.body) != string(genuine.body) {
		t.Fatalf("probe %v", probe.header)
	}
	h.decryptNotification(t, genuine)
	eventually(t, 5*time.Second, "both attempts", func() bool { return len(h.sim.Notifications()) == 2 })
	a := h.sim.Notifications()
	if a[0].Kind != "probe" || a[0].Acknowledged || a[0].StatusCode != 401 || a[1].Kind != "delivery" || !a[1].Acknowledged {
		t.Fatalf("attempts %+v", a)
	}
	var sent wechatpaysim.NotificationAttempt
	if code := h.control(t, "POST", "/_sim/notifications/"+a[1].ID+"/probe", "", &sent); code != 200 || sent.Kind != "probe" || sent.StatusCode != 401 {
		t.Fatalf("probe on demand: %d %+v", code, sent)
	}
	if code := h.control(t, "POST", "/_sim/notifications/nope/probe", "", nil); code != 404 {
		t.Fatalf("unknown notification: %d", code)
	}
}

// A replay carries a genuine signature over an old timestamp: the library verifies it,
// the merchant's ±5 minute check must refuse it.
func TestReplayNotification(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	h := newHarness(t, fast)
	h.place(t, "native", "REPLAY0001", 1, s.url())
	if _, err := h.sim.Pay(mchID, "REPLAY0001", wechatpaysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	first := s.next(t, 5*time.Second)
	eventually(t, 5*time.Second, "the delivery", func() bool { return len(h.sim.Notifications()) == 1 })
	id := h.sim.Notifications()[0].ID
	var a wechatpaysim.NotificationAttempt
	if code := h.control(t, "POST", "/_sim/notifications/"+id+"/replay", `{"age_seconds":360}`, &a); code != 200 || a.Kind != "replay" {
		t.Fatalf("%d %+v", code, a)
	}
	replayed := s.next(t, 5*time.Second)
	h.decryptNotification(t, replayed)
	if age := h.clock.Now().Unix() - unix(t, replayed.header.Get("Wechatpay-Timestamp")); age != 360 || string(replayed.body) != string(first.body) {
		t.Fatalf("replay %d s old", age)
	}
}

// A merchant switching to the WeChat Pay public key: redeliveries after the switch are
// signed with it, named by its PUB_KEY_ID_ serial.
func TestNotifySignerSwitch(t *testing.T) {
	t.Parallel()
	var h *harness
	s := newSink(t, func(n int, _ delivery) int {
		if n == 0 {
			if err := h.sim.SetNotifySigner(mchID, wechatpaysim.SignerPublicKey); err != nil {
				t.Error(err)
			}
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	h = newHarness(t, fast)
	h.place(t, "native", "SWITCH0001", 1, s.url())
	if _, err := h.sim.Pay(mchID, "SWITCH0001", wechatpaysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	before, after := s.next(t, 5*time.Second), s.next(t, 5*time.Second)
	if h.verify(t, resp{header: before.header, body: before.body}) != h.keys.PlatformSerialNo ||
		h.verify(t, resp{header: after.header, body: after.body}) != h.keys.PublicKeyID {
		t.Fatal("the switch did not change the signer")
	}
	var m wechatpaysim.Merchant
	if code := h.control(t, "POST", "/_sim/merchants/"+mchID+"/notify_signer", `{"signer":"platform"}`, &m); code != 200 || m.NotifySigner != "platform" {
		t.Fatalf("%d %+v", code, m)
	}
	pk := newHarness(t, func(c *wechatpaysim.Config) { c.Merchants[0].KeyMode = wechatpaysim.KeyModePublicKey })
	if err := pk.sim.SetNotifySigner(mchID, wechatpaysim.SignerPlatform); err == nil {
		t.Fatal("a public-key-only merchant signed with a platform certificate")
	}
}

// Notification faults: deliveries dropped in transit are retried; a lost notification
// is never sent; an order's lost answers make the merchant see redeliveries; a delay
// holds the first delivery back.
func TestNotificationFaults(t *testing.T) {
	t.Parallel()
	t.Run("drop deliveries", func(t *testing.T) {
		t.Parallel()
		s := newSink(t, nil)
		h := newHarness(t, fast)
		if code := h.control(t, "POST", "/_sim/faults/notifications", `{"drop_deliveries":2}`, nil); code != 200 {
			t.Fatal(code)
		}
		h.place(t, "native", "DROP000001", 1, s.url())
		if _, err := h.sim.Pay(mchID, "DROP000001", wechatpaysim.PayOptions{}); err != nil {
			t.Fatal(err)
		}
		s.next(t, 5*time.Second)
		eventually(t, 5*time.Second, "3 attempts", func() bool { return len(h.sim.Notifications()) == 3 })
		a := h.sim.Notifications()
		if !a[0].Dropped || !a[1].Dropped || a[2].Dropped || !a[2].Acknowledged || a[2].Attempt != 3 || len(s.deliveries()) != 1 {
			t.Fatalf("attempts %+v", a)
		}
	})
	t.Run("lose the next notification", func(t *testing.T) {
		t.Parallel()
		s := newSink(t, nil)
		h := newHarness(t, fast)
		if err := h.sim.SetNotificationFaults(wechatpaysim.NotificationFaults{LoseNext: 1}); err != nil {
			t.Fatal(err)
		}
		h.place(t, "native", "LOSE000001", 1, s.url())
		h.place(t, "native", "LOSE000002", 1, s.url())
		for _, no := range []string{"LOSE000001", "LOSE000002"} {
			if _, err := h.sim.Pay(mchID, no, wechatpaysim.PayOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if d := s.next(t, 5*time.Second); !strings.Contains(string(d.body), "TRANSACTION.SUCCESS") {
			t.Fatal(string(d.body))
		}
		eventually(t, 5*time.Second, "2 attempts", func() bool { return len(h.sim.Notifications()) == 2 })
		a := h.sim.Notifications()
		if a[0].OutTradeNo != "LOSE000001" || !a[0].Dropped || a[1].OutTradeNo != "LOSE000002" || !a[1].Acknowledged || len(s.deliveries()) != 1 {
			t.Fatalf("attempts %+v", a)
		}
	})
	t.Run("an order's lost answers and delay", func(t *testing.T) {
		t.Parallel()
		s := newSink(t, nil)
		h := newHarness(t, fast)
		h.place(t, "native", "FAIL000001", 1, s.url())
		var o wechatpaysim.Order
		if code := h.control(t, "POST", "/_sim/orders/FAIL000001/notifications", `{"fail_next":1,"delay_ms":200}`, &o); code != 200 {
			t.Fatal(code)
		}
		paidAt := time.Now()
		if _, err := h.sim.Pay(mchID, "FAIL000001", wechatpaysim.PayOptions{}); err != nil {
			t.Fatal(err)
		}
		first, second := s.next(t, 5*time.Second), s.next(t, 5*time.Second)
		if first.at.Sub(paidAt) < 200*time.Millisecond || string(first.body) != string(second.body) {
			t.Fatalf("first delivery after %s", first.at.Sub(paidAt))
		}
		eventually(t, 5*time.Second, "2 attempts", func() bool { return len(h.sim.Notifications()) == 2 })
		a := h.sim.Notifications()
		if a[0].Acknowledged || a[0].StatusCode != 200 || a[0].Error != "answer lost by fault" || !a[1].Acknowledged {
			t.Fatalf("attempts %+v", a)
		}
	})
}

// GET /_sim/notifications filters by order.
func TestNotificationsLog(t *testing.T) {
	t.Parallel()
	s := newSink(t, nil)
	h := newHarness(t, fast)
	for _, no := range []string{"LOG0000001", "LOG0000002"} {
		h.place(t, "native", no, 1, s.url())
		if _, err := h.sim.Pay(mchID, no, wechatpaysim.PayOptions{}); err != nil {
			t.Fatal(err)
		}
		s.next(t, 5*time.Second)
	}
	eventually(t, 5*time.Second, "2 attempts", func() bool { return len(h.sim.Notifications()) == 2 })
	var got []wechatpaysim.NotificationAttempt
	if code := h.control(t, "GET", "/_sim/notifications?out_trade_no=LOG0000002", "", &got); code != 200 || len(got) != 1 || got[0].OutTradeNo != "LOG0000002" {
		t.Fatalf("%d %+v", code, got)
	}
	raw, _ := json.Marshal(got[0])
	for _, k := range []string{`"timestamp"`, `"nonce"`, `"serial"`, `"signature"`, `"status_code"`, `"acknowledged":true`} {
		if !strings.Contains(string(raw), k) {
			t.Fatalf("attempt without %s: %s", k, raw)
		}
	}
}
