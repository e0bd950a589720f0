package alipaysim_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/alipaysim"
	"github.com/smartwalle/alipay/v3"
)

// TestAnswersAreSignedOverExactBytes checks, with raw HTTP and an independent verifier,
// that every kind of answer is {"<method>_response":{...},"sign":...}, signed over the
// object's exact bytes, with string values only.
func TestAnswersAreSignedOverExactBytes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	key := parsePriv(t, h.keys.AppPrivateKeyPEM)
	h.precreate(t, "S_raw", "9.90")
	if _, err := h.sim.Pay("", "S_raw", ""); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method string
		biz          map[string]string
		wantCode     string
		wantSub      string
		wantField    [2]string
	}{
		{"precreate", "alipay.trade.precreate", map[string]string{"out_trade_no": "S_raw2", "total_amount": "0.01", "subject": "原始 <b>&"}, "10000", "", [2]string{"out_trade_no", "S_raw2"}},
		{"query paid", "alipay.trade.query", map[string]string{"out_trade_no": "S_raw"}, "10000", "", [2]string{"trade_status", "TRADE_SUCCESS"}},
		{"query amount is a string", "alipay.trade.query", map[string]string{"out_trade_no": "S_raw"}, "10000", "", [2]string{"total_amount", "9.90"}},
		{"query unknown", "alipay.trade.query", map[string]string{"out_trade_no": "S_none"}, "40004", "ACQ.TRADE_NOT_EXIST", [2]string{"out_trade_no", "S_none"}},
		{"close paid", "alipay.trade.close", map[string]string{"out_trade_no": "S_raw"}, "40004", "ACQ.TRADE_STATUS_ERROR", [2]string{}},
		{"refund", "alipay.trade.refund", map[string]string{"out_trade_no": "S_raw", "refund_amount": "1.00", "out_request_no": "R1"}, "10000", "", [2]string{"fund_change", "Y"}},
		{"refund replay", "alipay.trade.refund", map[string]string{"out_trade_no": "S_raw", "refund_amount": "1.00", "out_request_no": "R1"}, "10000", "", [2]string{"fund_change", "N"}},
		{"refund query", "alipay.trade.fastpay.refund.query", map[string]string{"out_trade_no": "S_raw", "out_request_no": "R1"}, "10000", "", [2]string{"refund_amount", "1.00"}},
		{"numeric total_amount accepted", "alipay.trade.precreate", map[string]string{"out_trade_no": "S_raw3", "total_amount": "12.5", "subject": "n"}, "10000", "", [2]string{}},
		{"three decimals refused", "alipay.trade.precreate", map[string]string{"out_trade_no": "S_raw4", "total_amount": "1.001", "subject": "n"}, "40004", "ACQ.INVALID_PARAMETER", [2]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := h.postRaw(t, nil, signedForm(t, key, tc.method, tc.biz))
			if want := strings.ReplaceAll(tc.method, ".", "_") + "_response"; a.name != want {
				t.Fatalf("answer key %q; want %q", a.name, want)
			}
			if a.get("code") != tc.wantCode || a.get("sub_code") != tc.wantSub {
				t.Fatalf("answer = %v", a.fields)
			}
			if k := tc.wantField[0]; k != "" && a.get(k) != tc.wantField[1] {
				t.Fatalf("%s = %q; want %q", k, a.get(k), tc.wantField[1])
			}
		})
	}
}

// TestTamperedRequestsAreRejected: the simulator answers signed isv.* errors, as Alipay does.
func TestTamperedRequestsAreRejected(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	key := parsePriv(t, h.keys.AppPrivateKeyPEM)
	other, err := alipaysim.GenerateKeys(1024)
	if err != nil {
		t.Fatal(err)
	}
	biz := map[string]string{"out_trade_no": "S_tamper", "total_amount": "1.00", "subject": "s"}
	tests := []struct {
		name     string
		form     func() url.Values
		respName string
		code     string
		subCode  string
	}{
		{"biz_content changed after signing", func() url.Values {
			f := signedForm(t, key, "alipay.trade.precreate", biz)
			f.Set("biz_content", strings.Replace(f.Get("biz_content"), "1.00", "0.01", 1))
			return f
		}, "alipay_trade_precreate_response", "40002", "isv.invalid-signature"},
		{"field added after signing", func() url.Values {
			f := signedForm(t, key, "alipay.trade.precreate", biz)
			f.Set("notify_url", "https://evil.example/n")
			return f
		}, "alipay_trade_precreate_response", "40002", "isv.invalid-signature"},
		{"signed with another key", func() url.Values {
			return signedForm(t, parsePriv(t, other.AppPrivateKeyPEM), "alipay.trade.precreate", biz)
		}, "alipay_trade_precreate_response", "40002", "isv.invalid-signature"},
		{"signature missing", func() url.Values {
			f := signedForm(t, key, "alipay.trade.precreate", biz)
			f.Del("sign")
			return f
		}, "alipay_trade_precreate_response", "40001", "isv.missing-signature"},
		{"sign_type RSA", func() url.Values {
			f := signedForm(t, key, "alipay.trade.precreate", biz)
			f.Set("sign_type", "RSA")
			return f
		}, "alipay_trade_precreate_response", "40002", "isv.invalid-signature-type"},
		{"unknown app_id", func() url.Values {
			f := signedForm(t, key, "alipay.trade.precreate", biz)
			f.Set("app_id", "2021999999999999")
			return f
		}, "alipay_trade_precreate_response", "40002", "isv.invalid-app-id"},
		{"unknown method", func() url.Values {
			return signedForm(t, key, "alipay.trade.nonsense", biz)
		}, "error_response", "40002", "isv.invalid-method"},
		{"no method", func() url.Values {
			f := signedForm(t, key, "alipay.trade.precreate", biz)
			f.Del("method")
			return f
		}, "error_response", "40001", "isv.missing-method"},
		{"malformed timestamp (validly signed)", func() url.Values {
			f := signedForm(t, key, "alipay.trade.precreate", biz)
			f.Set("timestamp", "yesterday")
			f.Set("sign", sign(t, key, canonical(f, "sign")))
			return f
		}, "alipay_trade_precreate_response", "40002", "isv.invalid-timestamp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := h.postRaw(t, nil, tc.form())
			if a.name != tc.respName || a.get("code") != tc.code || a.get("sub_code") != tc.subCode {
				t.Fatalf("answer %s = %v", a.name, a.fields)
			}
		})
	}
	if n := len(h.sim.Trades()); n != 0 {
		t.Fatalf("%d trades created by rejected requests", n)
	}
	// The invalid-signature message shows the string the gateway verified, as Alipay's does.
	f := signedForm(t, key, "alipay.trade.precreate", biz)
	f.Set("biz_content", "{}")
	if a := h.postRaw(t, nil, f); !strings.Contains(a.get("sub_msg"), "app_id="+appID+"&biz_content={}") {
		t.Fatalf("sub_msg = %q", a.get("sub_msg"))
	}
}

// TestCommonParamsInQueryString: some SDKs (the official Node one) put the common
// parameters in the URL and only biz_content in the body; the signature covers both.
func TestCommonParamsInQueryString(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	f := signedForm(t, parsePriv(t, h.keys.AppPrivateKeyPEM), "alipay.trade.precreate",
		map[string]string{"out_trade_no": "S_split", "total_amount": "3", "subject": "split"})
	body := url.Values{"biz_content": {f.Get("biz_content")}}
	f.Del("biz_content")
	a := h.postRaw(t, f, body)
	if a.get("code") != "10000" {
		t.Fatalf("answer = %v", a.fields)
	}
}

// TestSmartwalleClientEveryMethod drives every gateway method with the real client and
// checks its own verification accepts every answer.
func TestSmartwalleClientEveryMethod(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	ctx := context.Background()
	h.precreate(t, "S_sw", "100")
	q, err := h.client.TradeQuery(ctx, alipay.TradeQuery{OutTradeNo: "S_sw"})
	if err != nil || q.TradeStatus != alipay.TradeStatusWaitBuyerPay || q.TotalAmount != "100.00" {
		t.Fatalf("query = %+v, %v", q, err)
	}
	if _, err := h.sim.Pay("", "S_sw", ""); err != nil {
		t.Fatal(err)
	}
	r, err := h.client.TradeRefund(ctx, alipay.TradeRefund{OutTradeNo: "S_sw", RefundAmount: "40", OutRequestNo: "R1"})
	if err != nil || r.FundChange != "Y" || r.RefundFee != "40.00" {
		t.Fatalf("refund = %+v, %v", r, err)
	}
	rq, err := h.client.TradeFastPayRefundQuery(ctx, alipay.TradeFastPayRefundQuery{OutTradeNo: "S_sw", OutRequestNo: "R1"})
	if err != nil || rq.RefundStatus != "REFUND_SUCCESS" || rq.RefundAmount != "40.00" {
		t.Fatalf("refund query = %+v, %v", rq, err)
	}
	c, err := h.client.TradeClose(ctx, alipay.TradeClose{OutTradeNo: "S_sw"})
	if err != nil || c.SubCode != "ACQ.TRADE_STATUS_ERROR" {
		t.Fatalf("close = %+v, %v", c, err)
	}
	// Query by trade_no works too.
	q2, err := h.client.TradeQuery(ctx, alipay.TradeQuery{TradeNo: q.TradeNo})
	if err != nil || q2.OutTradeNo != "S_sw" {
		t.Fatalf("query by trade_no = %+v, %v", q2, err)
	}
	// Notifications verify with the client's own VerifySign.
	for range 2 {
		d := h.sink.next(t, 5*time.Second)
		if err := h.client.VerifySign(ctx, d.form); err != nil {
			t.Fatalf("notification %v does not verify: %v", d.form, err)
		}
	}
}

// TestTimeExpireClosesUnpaidTrade: an unpaid trade closes by itself at time_expire and
// the TRADE_CLOSED notification goes out.
func TestTimeExpireClosesUnpaidTrade(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	expire := time.Now().Add(2500 * time.Millisecond)
	h.precreateExpiring(t, "S_expire", "1", expire)
	d := h.sink.next(t, 5*time.Second)
	if d.form.Get("trade_status") != "TRADE_CLOSED" || d.form.Get("out_trade_no") != "S_expire" || d.form.Get("gmt_close") == "" {
		t.Fatalf("notification = %v", d.form)
	}
	if time.Now().Before(expire.Truncate(time.Second)) {
		t.Fatal("closed before time_expire")
	}
	tr, err := h.sim.Trade("", "S_expire")
	if err != nil || tr.TradeStatus != alipaysim.StatusClosed || tr.CloseReason != alipaysim.CloseReasonExpired {
		t.Fatalf("trade = %+v, %v", tr, err)
	}
	if _, err := h.sim.Pay("", "S_expire", ""); err == nil {
		t.Fatal("expired trade was paid")
	}
}
