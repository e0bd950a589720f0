package wechatpay_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/wechatpay"
	"github.com/paykit/paykit/wechatpaysim"
	"github.com/paykit/paykit/wechatpaysim/simtest"
)

// newGateway is the adapter for the test merchant against a simulator, verifying answers
// with the WeChat Pay public key (publicKey) or the platform certificates it fetches.
func newGateway(tb testing.TB, publicKey bool) (*wechatpay.Gateway, *wechatpaysim.Simulator) {
	tb.Helper()
	sim, srv := simtest.Start(tb, nil)
	ks := simtest.Keys(tb)
	cfg := wechatpay.Config{MchID: ks.MchID, AppID: ks.AppID, MerchantSerialNo: ks.MerchantSerialNo,
		MerchantPrivateKeyPEM: ks.MerchantPrivateKeyPEM, APIv3Key: ks.APIv3Key, BaseURL: srv.URL,
		NotifyURL: "http://127.0.0.1:1/callbacks/wechatpay"}
	if publicKey {
		cfg.PublicKeyPEM, cfg.PublicKeyID = ks.PublicKeyPEM, ks.PublicKeyID
	}
	gw, err := wechatpay.New(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return gw, sim
}

func tradeRequest(no string, m payment.Method) payment.TradeRequest {
	return payment.TradeRequest{PaymentNo: no, Method: m, Subject: "咖啡 coffee", Amount: 990,
		ExpireAt: time.Now().Add(15 * time.Minute), OpenID: "o-payer-1", ClientIP: "203.0.113.7"}
}

// Each WeChat method opens its order and hands the buyer what WeChat Pay answered: a
// code_url, an h5_url, or the signed JSAPI or App parameters over its prepay_id. A
// repeat opens no second order; the order is NOTPAY until paid, then SUCCESS with its
// transaction_id, amount and payer; a close of a paid order is CloseAlreadyPaid.
func TestOpenQueryAndCloseEachMethod(t *testing.T) {
	for _, keyMode := range []bool{true, false} {
		gw, sim := newGateway(t, keyMode)
		ctx := context.Background()
		for i, m := range []payment.Method{payment.MethodWechatNative, payment.MethodWechatH5, payment.MethodWechatJSAPI, payment.MethodWechatApp} {
			no := "P20261207wx" + string(rune('a'+i)) + map[bool]string{true: "pk", false: "ct"}[keyMode]
			req := tradeRequest(no, m)
			h, err := gw.Open(ctx, req)
			if err != nil {
				t.Fatalf("%s: open: %v", m, err)
			}
			checkHandOff(t, m, h)
			again, err := gw.Open(ctx, req)
			if err != nil || (m != payment.MethodWechatJSAPI && m != payment.MethodWechatApp && again != h) {
				t.Fatalf("%s: a repeat: %+v %v, want the same hand-off %+v", m, again, err, h)
			}
			if n := len(sim.Orders(simtest.MchID)); n != i+1 {
				t.Fatalf("%s: %d orders at WeChat Pay after a repeat, want %d", m, n, i+1)
			}
			tr, err := gw.Query(ctx, no)
			if err != nil || tr.State != payment.TradeWaiting || tr.TradeNo != "" {
				t.Fatalf("%s: query before paying: %+v %v, want waiting", m, tr, err)
			}
			if _, err := sim.Pay(simtest.MchID, no, wechatpaysim.PayOptions{OpenID: req.OpenID}); err != nil {
				t.Fatal(err)
			}
			tr, err = gw.Query(ctx, no)
			if err != nil || tr.State != payment.TradePaid || tr.Amount != 990 || !strings.HasPrefix(tr.TradeNo, "42") || tr.PaidAt.IsZero() {
				t.Fatalf("%s: query after paying: %+v %v, want paid 990 fen", m, tr, err)
			}
			if out, err := gw.Close(ctx, no); err != nil || out != payment.CloseAlreadyPaid {
				t.Fatalf("%s: close of a paid order: %v %v, want already paid", m, out, err)
			}
		}
	}
}

func checkHandOff(t *testing.T, m payment.Method, h payment.HandOff) {
	t.Helper()
	switch m {
	case payment.MethodWechatNative:
		if !strings.HasPrefix(h.QRCode, "weixin://wxpay/bizpayurl?pr=") {
			t.Fatalf("native hand-off %+v, want a code_url", h)
		}
	case payment.MethodWechatH5:
		if !strings.HasPrefix(h.PayURL, "https://wx.tenpay.com/") {
			t.Fatalf("h5 hand-off %+v, want an h5_url", h)
		}
	default:
		var params map[string]string
		if err := json.Unmarshal([]byte(h.OrderString), &params); err != nil {
			t.Fatalf("%s hand-off %q: %v", m, h.OrderString, err)
		}
		sig, pkg := params["paySign"], params["package"]
		if m == payment.MethodWechatApp {
			sig, pkg = params["sign"], params["prepayid"]
		}
		if sig == "" || !strings.Contains(pkg, "wx") {
			t.Fatalf("%s hand-off %v, want the signed parameters over a prepay_id", m, params)
		}
	}
}

// An order never placed is TradeNotExist and its close CloseNotExist; an unpaid one
// closes, then queries CLOSED, and a second close is done too.
func TestQueryAndCloseOfUnpaidOrders(t *testing.T) {
	gw, _ := newGateway(t, true)
	ctx := context.Background()
	if tr, err := gw.Query(ctx, "P20261207never0001"); err != nil || tr.State != payment.TradeNotExist {
		t.Fatalf("query of an order never placed: %+v %v", tr, err)
	}
	if out, err := gw.Close(ctx, "P20261207never0001"); err != nil || out != payment.CloseNotExist {
		t.Fatalf("close of an order never placed: %v %v", out, err)
	}
	if _, err := gw.Open(ctx, tradeRequest("P20261207close0001", payment.MethodWechatNative)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if out, err := gw.Close(ctx, "P20261207close0001"); err != nil || out != payment.CloseDone {
			t.Fatalf("close: %v %v", out, err)
		}
	}
	if tr, err := gw.Query(ctx, "P20261207close0001"); err != nil || tr.State != payment.TradeClosed {
		t.Fatalf("query after the close: %+v %v", tr, err)
	}
}

// What WeChat Pay answers is taken as its word only when signed: a forged answer
// (gopay's parsed answer with a verification error) is an unknown outcome, retried; a
// SYSTEM_ERROR after the order was taken is retried and the retry answers as a repeat;
// FREQUENCY_LIMITED is retried; a refusal (another order under the same number) is not.
func TestAnswersAreTakenOnlyWhenSigned(t *testing.T) {
	gw, sim := newGateway(t, true)
	ctx := context.Background()
	if err := sim.InjectFault(wechatpaysim.APIFault{Mode: wechatpaysim.FaultBadSignature, Count: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := gw.Open(ctx, tradeRequest("P20261207forged001", payment.MethodWechatNative))
	wantChannelError(t, "forged answer", err, true, "ANSWER_NOT_VERIFIED")
	if err := sim.InjectFault(wechatpaysim.APIFault{Mode: wechatpaysim.FaultBadSignature, Count: 1}); err != nil {
		t.Fatal(err)
	}
	_, err = gw.Query(ctx, "P20261207forged001")
	wantChannelError(t, "forged query answer", err, true, "ANSWER_NOT_VERIFIED")

	if err := sim.InjectFault(wechatpaysim.APIFault{Mode: wechatpaysim.FaultSystemError, Count: 1, AfterProcessing: true}); err != nil {
		t.Fatal(err)
	}
	req := tradeRequest("P20261207syserr001", payment.MethodWechatNative)
	_, err = gw.Open(ctx, req)
	wantChannelError(t, "SYSTEM_ERROR", err, true, "SYSTEM_ERROR")
	if h, err := gw.Open(ctx, req); err != nil || h.QRCode == "" {
		t.Fatalf("the retry after SYSTEM_ERROR: %+v %v, want the order's code_url", h, err)
	}
	other := req
	other.Amount = 1990
	_, err = gw.Open(ctx, other)
	wantChannelError(t, "another order under the number", err, false, "OUT_TRADE_NO_USED")

	if err := sim.SetThrottle(wechatpaysim.Throttle{Rate: 1, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	var limited error
	for range 5 {
		if _, err := gw.Query(ctx, req.PaymentNo); err != nil {
			limited = err
			break
		}
	}
	wantChannelError(t, "throttled", limited, true, "FREQUENCY_LIMITED")
}

// The adapter refuses what WeChat Pay would: a JSAPI order without the payer's openid,
// an H5 order without the buyer's IP, an out_trade_no outside 6 to 32 characters, and an
// Alipay method; nothing is sent.
func TestOpenRefusesWhatWeChatWould(t *testing.T) {
	gw, sim := newGateway(t, true)
	ctx := context.Background()
	jsapi := tradeRequest("P20261207refuse01", payment.MethodWechatJSAPI)
	jsapi.OpenID = ""
	h5 := tradeRequest("P20261207refuse02", payment.MethodWechatH5)
	h5.ClientIP = ""
	for name, req := range map[string]payment.TradeRequest{
		"jsapi without openid": jsapi, "h5 without ip": h5,
		"short number":  tradeRequest("P1", payment.MethodWechatNative),
		"alipay method": tradeRequest("P20261207refuse03", payment.MethodPage),
	} {
		_, err := gw.Open(ctx, req)
		wantChannelError(t, name, err, false, "INVALID_REQUEST")
	}
	if n := len(sim.Orders(simtest.MchID)); n != 0 {
		t.Fatalf("%d orders at WeChat Pay, want none", n)
	}
}

func wantChannelError(t *testing.T, name string, err error, retryable bool, sub string) {
	t.Helper()
	var ce *payment.ChannelError
	if !errors.As(err, &ce) || ce.Retryable != retryable || ce.SubCode != sub {
		t.Fatalf("%s: %v, want a ChannelError %s (retryable %v)", name, err, sub, retryable)
	}
}
