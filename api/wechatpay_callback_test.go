package api_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/gateways"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/wechatpay"
	"github.com/paykit/paykit/wechatpaysim"
	"github.com/paykit/paykit/wechatpaysim/simtest"
)

// wechatpayServer is an API server whose WeChat Pay merchant is the simulator's, its
// notifications posted by the simulator to the server's /callbacks/wechatpay, and the
// pending WeChat Pay payment P1000001 of 990 fen on that merchant.
func wechatpayServer(t *testing.T) (*api.Server, *httptest.Server, *fakeStore, *fakeOrch, *wechatpaysim.Simulator, *wechatpay.Gateway) {
	t.Helper()
	sim, simSrv := simtest.Start(t, nil)
	ks := simtest.Keys(t)
	_, st, orch := newServer(t)
	chans := gateways.Channels{payment.ChannelAlipay: twoApps{}}
	s := api.New(api.Config{}, st.stores(), chans, orch, nil, nil, nil)
	srv := httptest.NewServer(checked(t, s))
	t.Cleanup(srv.Close)
	gw, err := wechatpay.New(context.Background(), wechatpay.Config{MchID: ks.MchID, AppID: ks.AppID,
		MerchantSerialNo: ks.MerchantSerialNo, MerchantPrivateKeyPEM: ks.MerchantPrivateKeyPEM, APIv3Key: ks.APIv3Key,
		PublicKeyPEM: ks.PublicKeyPEM, PublicKeyID: ks.PublicKeyID, BaseURL: simSrv.URL, NotifyURL: srv.URL + "/callbacks/wechatpay"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.SetNotifySigner(ks.MchID, wechatpaysim.SignerPublicKey); err != nil {
		t.Fatal(err)
	}
	// The map is the server's: the merchant is configured from now on.
	chans[payment.ChannelWechatPay] = gateways.Merchant{ID: ks.MchID, AppID: ks.AppID, SellerID: ks.MchID, Gateway: gw}
	st.Mu.Lock()
	st.ByNo["P1000001"] = payment.Payment{PaymentNo: "P1000001", TenantID: "t1", OrderID: "o1w", Amount: 990, Status: payment.StatusPending,
		Method: payment.MethodWechatNative, Channel: payment.ChannelWechatPay, AlipayAppID: ks.MchID, WorkflowID: "payment:t1:o1w"}
	st.Mu.Unlock()
	return s, srv, st, orch, sim, gw
}

func (f *fakeStore) noteCount() int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return len(f.notes)
}

// attempt waits for the simulator's attempt of kind to notification id to be answered.
func attempt(t *testing.T, sim *wechatpaysim.Simulator, kind string, nth int) wechatpaysim.NotificationAttempt {
	t.Helper()
	var got wechatpaysim.NotificationAttempt
	waitFor(t, "the simulator's "+kind, func() bool {
		seen := 0
		for _, a := range sim.Notifications() {
			if a.Kind == kind && (a.StatusCode != 0 || a.Error != "") {
				if seen++; seen == nth {
					got = a
					return true
				}
			}
		}
		return false
	})
	return got
}

// POST /callbacks/wechatpay answers 204 once a genuine notification is recorded, once, in
// the inbox (channel wechatpay, its id, its exact body and the headers its signature
// needs) and handed to its payment; a redelivery is 204 and records nothing more. A body
// changed by a byte, a signature probe and a delivery signed six minutes ago are refused
// with a 4xx and {"code":"FAIL"} and record nothing; the recorded notification verifies
// again from its row when the sweep hands it over. A refund's notification is recorded and
// named an anomaly, never a payment.
func TestWechatPayCallback(t *testing.T) {
	s, srv, st, orch, sim, gw := wechatpayServer(t)
	ctx := context.Background()
	if _, err := gw.Open(ctx, payment.TradeRequest{PaymentNo: "P1000001", Method: payment.MethodWechatNative, Subject: "tea", Amount: 990,
		ExpireAt: time.Now().Add(10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}

	// Refused before anything arrives: no signature headers, then a forged signature.
	resp, b := post(t, srv.URL+"/callbacks/wechatpay", `{"id":"EV-forged","resource":{}}`, map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, `"code":"FAIL"`) || st.noteCount() != 0 {
		t.Fatalf("no signature: HTTP %d %s, %d notifications recorded; want 400 FAIL and none", resp.StatusCode, b, st.noteCount())
	}

	if _, err := sim.Pay(simtest.Keys(t).MchID, "P1000001", wechatpaysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	first := attempt(t, sim, "delivery", 1)
	if first.StatusCode != http.StatusNoContent {
		t.Fatalf("the genuine delivery was answered %d %q, want 204", first.StatusCode, first.ResponseBody)
	}
	n := st.note(t, 0, func(n payment.ChannelNotification) bool { return n.Outcome == "signalled" })
	if n.Channel != "wechatpay" || n.NotifyID != first.ID || !n.Verified || n.PaymentNo != "P1000001" || n.Outcome != "signalled" ||
		n.RawHeader.Get("Wechatpay-Signature") != first.Signature || n.RawHeader.Get("Wechatpay-Timestamp") != first.Timestamp ||
		n.RawHeader.Get("Wechatpay-Serial") != first.Serial || len(n.RawHeader) != 5 || !strings.Contains(n.Raw, first.ID) {
		t.Fatalf("recorded %+v; want the verified notification %s with its signed headers and body", n, first.ID)
	}
	if orch.signalCount() != 1 {
		t.Fatalf("%d signals, want the one hand-over", orch.signalCount())
	}

	// A redelivery, freshly signed: 204, nothing more recorded.
	if _, err := sim.ReplayNotification(first.ID, 0); err != nil {
		t.Fatal(err)
	}
	if a := attempt(t, sim, "replay", 1); a.StatusCode != http.StatusNoContent || st.noteCount() != 1 {
		t.Fatalf("a redelivery: %d %q, %d notifications; want 204 and still one", a.StatusCode, a.ResponseBody, st.noteCount())
	}
	// A genuine delivery signed six minutes ago is refused on receipt.
	if _, err := sim.ReplayNotification(first.ID, 6*time.Minute); err != nil {
		t.Fatal(err)
	}
	if a := attempt(t, sim, "replay", 2); a.StatusCode != http.StatusBadRequest || !strings.Contains(a.ResponseBody, `"FAIL"`) || st.noteCount() != 1 {
		t.Fatalf("a replay six minutes old: %d %q, %d notifications; want 400 FAIL and still one", a.StatusCode, a.ResponseBody, st.noteCount())
	}
	// A signature probe (WECHATPAY/SIGNTEST/…) is refused and has no effect.
	if _, err := sim.ProbeNotification(first.ID); err != nil {
		t.Fatal(err)
	}
	if a := attempt(t, sim, "probe", 1); a.StatusCode != http.StatusBadRequest || !strings.HasPrefix(a.Signature, "WECHATPAY/SIGNTEST/") ||
		st.noteCount() != 1 || orch.signalCount() != 1 {
		t.Fatalf("a probe: %d %q, %d notifications, %d signals; want 400 and no effect", a.StatusCode, a.ResponseBody, st.noteCount(), orch.signalCount())
	}
	// The recorded body changed by a byte, with its genuine headers: a bad signature.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/callbacks/wechatpay", bytes.NewReader(bytes.Replace([]byte(n.Raw), []byte(`"`), []byte(` "`), 1)))
	req.Header = n.RawHeader.Clone()
	req.Header.Set("Content-Type", "application/json")
	tampered, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = tampered.Body.Close()
	if tampered.StatusCode != http.StatusBadRequest || st.noteCount() != 1 {
		t.Fatalf("a changed body: HTTP %d, %d notifications; want 400 and still one", tampered.StatusCode, st.noteCount())
	}

	// The sweep hands the recorded notification over again from its row alone.
	if s.Inbox().Sweep(ctx, n.DispatchDueAt) != 1 {
		t.Fatal("the sweep did not hand the recorded notification over: it no longer verifies from its row")
	}
	waitFor(t, "the sweep's hand-over", func() bool { return orch.signalCount() == 2 })

	// A refund made in WeChat Pay's console: its notification is recorded (204), never
	// taken for a payment, and named a refund_unknown anomaly.
	r, err := sim.ConsoleRefund(simtest.Keys(t).MchID, "P1000001", wechatpaysim.ConsoleRefund{Refund: 300})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.SettleRefund(simtest.Keys(t).MchID, r.OutRefundNo, "SUCCESS"); err != nil {
		t.Fatal(err)
	}
	refund := st.note(t, 1, func(n payment.ChannelNotification) bool { return n.Outcome == "refund_unknown" })
	if !refund.Refund || refund.Channel != "wechatpay" || refund.Outcome != "refund_unknown" || orch.signalCount() != 2 {
		t.Fatalf("refund notification recorded %+v, %d signals; want a refund, refund_unknown, no signal", refund, orch.signalCount())
	}
	st.Mu.Lock()
	defer st.Mu.Unlock()
	if len(st.anomalies) != 1 || st.anomalies[0].Kind != "refund_unknown" || st.anomalies[0].Subject != r.OutRefundNo {
		t.Fatalf("anomalies %+v, want one refund_unknown about %s", st.anomalies, r.OutRefundNo)
	}
}

// WeChat Pay's callbacks are counted apart from Alipay's, so that its signature probes
// never read as forged Alipay posts.
func TestWechatPayCallbacksAreCountedApart(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, st, orch := newServer(t)
	s := api.New(api.Config{}, st.stores(), payment.SingleGateway{Gateway: fakeGateway{}}, orch, nil, nil, api.NewMetrics(reg))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	if resp, _ := post(t, srv.URL+"/callbacks/wechatpay", `{"id":"EV-x"}`, map[string]string{"Content-Type": "application/json"}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("HTTP %d, want 400", resp.StatusCode)
	}
	wechat := gathered(t, reg, "paykit_wechatpay_callbacks_total", "unverified")
	alipay := gathered(t, reg, "paykit_alipay_callbacks_total", "unverified")
	if wechat != 1 || alipay != 0 {
		t.Fatalf("unverified callbacks: WeChat Pay %v, Alipay %v; want 1 and 0", wechat, alipay)
	}
}

// gathered is the value of counter name with outcome in reg.
func gathered(t *testing.T, reg *prometheus.Registry, name, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{outcome=%q}", name, outcome)
	return 0
}
