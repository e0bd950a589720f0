package alipay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/payment"
)

func TestPrecreateQueryPayRefundOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	req := tradeReq("P_precreate_1", 990)

	qr, err := e.gw.Precreate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(qr, "/_sim/qr/") {
		t.Errorf("qr_code = %q", qr)
	}
	tr, err := e.gw.Query(ctx, req.PaymentNo)
	if err != nil {
		t.Fatal(err)
	}
	if tr.State != payment.TradeWaiting || tr.Amount != 990 || tr.TradeNo == "" || tr.RawStatus != "WAIT_BUYER_PAY" {
		t.Fatalf("query before pay = %+v", tr)
	}
	if _, err := e.sim.Pay("", req.PaymentNo, "2088111122223333"); err != nil {
		t.Fatal(err)
	}
	tr, err = e.gw.Query(ctx, req.PaymentNo)
	if err != nil {
		t.Fatal(err)
	}
	if tr.State != payment.TradePaid || tr.BuyerID != "2088111122223333" || tr.PaidAt.IsZero() || tr.Amount != 990 {
		t.Fatalf("query after pay = %+v", tr)
	}
	if d := time.Since(tr.PaidAt); d < -2*time.Second || d > 5*time.Second {
		t.Errorf("PaidAt %s is not now (China time parsed wrong?)", tr.PaidAt)
	}

	n := e.sink.next(t, 5*time.Second)
	note, err := e.gw.DecodeForm(ctx, n.form)
	if err != nil {
		t.Fatal(err)
	}
	if note.State != payment.TradePaid || note.TotalAmount != 990 || note.PaymentNo != req.PaymentNo || note.TradeNo != tr.TradeNo {
		t.Fatalf("notification = %+v", note)
	}
	if err := payment.CheckNotification(note, payment.Payment{PaymentNo: req.PaymentNo, Amount: 990}); err != nil {
		t.Fatal(err)
	}

	res, err := e.gw.Refund(ctx, payment.RefundRequest{PaymentNo: req.PaymentNo, OutRequestNo: "R1", Amount: 990, Reason: "全部退款"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.FundChange || res.RefundedTotal != 990 || res.RefundAmount != 990 || res.TradeNo != tr.TradeNo {
		t.Fatalf("refund = %+v", res)
	}
	tr, err = e.gw.Query(ctx, req.PaymentNo)
	if err != nil {
		t.Fatal(err)
	}
	if tr.State != payment.TradeClosed {
		t.Fatalf("fully refunded trade state = %v, want CLOSED", tr.State)
	}
}

func TestQueryAndCloseUnknownTrade(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tr, err := e.gw.Query(ctx, "P_never_created")
	if err != nil || tr.State != payment.TradeNotExist || tr.PaymentNo != "P_never_created" {
		t.Fatalf("Query = %+v, %v; want NOT_EXIST, nil", tr, err)
	}
	out, err := e.gw.Close(ctx, "P_never_created")
	if err != nil || out != payment.CloseNotExist {
		t.Fatalf("Close = %v, %v; want NOT_EXIST, nil", out, err)
	}
}

func TestCloseOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	tests := []struct {
		name      string
		setup     func(t *testing.T, no string)
		want      payment.CloseOutcome
		wantState payment.TradeState // by Query after the close
	}{
		{"waiting trade closes", func(*testing.T, string) {}, payment.CloseDone, payment.TradeClosed},
		{"paid trade is already paid", func(t *testing.T, no string) {
			if _, err := e.sim.Pay("", no, ""); err != nil {
				t.Fatal(err)
			}
		}, payment.CloseAlreadyPaid, payment.TradePaid},
		{"finished trade is already paid", func(t *testing.T, no string) {
			if _, err := e.sim.Pay("", no, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := e.sim.Finish("", no); err != nil {
				t.Fatal(err)
			}
		}, payment.CloseAlreadyPaid, payment.TradePaid},
		{"buyer pays at the moment of close", func(_ *testing.T, no string) {
			e.sim.PayOnClose(no, "")
		}, payment.CloseAlreadyPaid, payment.TradePaid},
		{"closed trade answers status error; query tells closed", func(t *testing.T, no string) {
			if out, err := e.gw.Close(ctx, no); err != nil || out != payment.CloseDone {
				t.Fatalf("first close = %v, %v", out, err)
			}
		}, payment.CloseAlreadyPaid, payment.TradeClosed},
		{"expired trade answers status error; query tells closed", func(t *testing.T, no string) {
			if _, err := e.sim.Expire("", no); err != nil {
				t.Fatal(err)
			}
		}, payment.CloseAlreadyPaid, payment.TradeClosed},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			no := fmt.Sprintf("P_close_%d", i)
			if _, err := e.gw.Precreate(ctx, tradeReq(no, 100)); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, no)
			out, err := e.gw.Close(ctx, no)
			if err != nil || out != tc.want {
				t.Fatalf("Close = %v, %v; want %v, nil", out, err, tc.want)
			}
			tr, err := e.gw.Query(ctx, no)
			if err != nil || tr.State != tc.wantState {
				t.Fatalf("Query = %v, %v; want %v", tr.State, err, tc.wantState)
			}
		})
	}
}

func TestGatewayFaultsMapToRetryableErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(_ *alipaysim.Config, g *alipay.Config) { g.Timeout = 800 * time.Millisecond })
	ctx := context.Background()
	if _, err := e.gw.Precreate(ctx, tradeReq("P_faults", 100)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		fault     alipaysim.GatewayFault
		call      func() error
		retryable bool
		subCode   string
		message   string
	}{
		{"ACQ.SYSTEM_ERROR on query", alipaysim.GatewayFault{Mode: alipaysim.FaultSystemError},
			func() error { _, err := e.gw.Query(ctx, "P_faults"); return err }, true, "ACQ.SYSTEM_ERROR", ""},
		{"ACQ.SYSTEM_ERROR on close", alipaysim.GatewayFault{Mode: alipaysim.FaultSystemError, Method: "alipay.trade.close"},
			func() error { _, err := e.gw.Close(ctx, "P_faults"); return err }, true, "ACQ.SYSTEM_ERROR", ""},
		{"HTTP 502", alipaysim.GatewayFault{Mode: alipaysim.FaultHTTPError, Status: 502},
			func() error { _, err := e.gw.Query(ctx, "P_faults"); return err }, true, "", "HTTP 502"},
		{"HTTP 500 on precreate", alipaysim.GatewayFault{Mode: alipaysim.FaultHTTPError},
			func() error { _, err := e.gw.Precreate(ctx, tradeReq("P_faults", 100)); return err }, true, "", "HTTP 500"},
		{"HTTP 404 is not retryable", alipaysim.GatewayFault{Mode: alipaysim.FaultHTTPError, Status: 404},
			func() error { _, err := e.gw.Query(ctx, "P_faults"); return err }, false, "", "HTTP 404"},
		{"hang past the client timeout", alipaysim.GatewayFault{Mode: alipaysim.FaultHang},
			func() error { _, err := e.gw.Query(ctx, "P_faults"); return err }, true, "", "timeout"},
		{"hang on refund", alipaysim.GatewayFault{Mode: alipaysim.FaultHang, Method: "alipay.trade.refund"},
			func() error {
				_, err := e.gw.Refund(ctx, payment.RefundRequest{PaymentNo: "P_faults", OutRequestNo: "R", Amount: 1})
				return err
			}, true, "", "timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := e.sim.InjectGatewayFault(tc.fault); err != nil {
				t.Fatal(err)
			}
			err := tc.call()
			ce := channelError(t, err)
			if ce.Retryable != tc.retryable || ce.SubCode != tc.subCode || !strings.Contains(ce.Message, tc.message) {
				t.Fatalf("error = %+v; want retryable=%v sub_code=%q message~%q", ce, tc.retryable, tc.subCode, tc.message)
			}
			if payment.IsRetryable(err) != tc.retryable {
				t.Errorf("payment.IsRetryable = %v", !tc.retryable)
			}
		})
	}
	// The faults are used up: the next call goes through.
	if tr, err := e.gw.Query(ctx, "P_faults"); err != nil || tr.State != payment.TradeWaiting {
		t.Fatalf("after faults: %+v, %v", tr, err)
	}
}

func TestContextDeadlineIsRetryable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := e.sim.InjectGatewayFault(alipaysim.GatewayFault{Mode: alipaysim.FaultHang}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := e.gw.Query(ctx, "P_ctx")
	ce := channelError(t, err)
	if !ce.Retryable || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %+v (%v)", ce, err)
	}
}

func TestRefundIdempotencyAndLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	no := "P_refunds"
	if _, err := e.gw.Precreate(ctx, tradeReq(no, 990)); err != nil {
		t.Fatal(err)
	}
	// Refunding an unpaid trade is a permanent refusal.
	_, err := e.gw.Refund(ctx, payment.RefundRequest{PaymentNo: no, OutRequestNo: "R0", Amount: 100})
	if ce := channelError(t, err); ce.Retryable || ce.SubCode != "ACQ.TRADE_STATUS_ERROR" {
		t.Fatalf("refund unpaid = %+v", ce)
	}
	if _, err := e.sim.Pay("", no, ""); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name       string
		reqNo      string
		amount     payment.Amount
		fundChange bool
		total      payment.Amount
		subCode    string // non-empty: expect this refusal
	}{
		{"partial 3.00", "R1", 300, true, 300, ""},
		{"replay R1 moves nothing", "R1", 300, false, 300, ""},
		{"partial 5.00", "R2", 500, true, 800, ""},
		{"2.00 would exceed 9.90", "R3", 200, false, 0, "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL"},
		{"replay R1 with another amount", "R1", 100, false, 0, "ACQ.INVALID_PARAMETER"},
		{"the remaining 1.90", "R4", 190, true, 990, ""},
		{"replay R2 after full refund", "R2", 500, false, 990, ""},
		{"new refund on the closed trade", "R5", 1, false, 0, "ACQ.TRADE_HAS_CLOSE"},
	}
	for _, st := range steps {
		res, err := e.gw.Refund(ctx, payment.RefundRequest{PaymentNo: no, OutRequestNo: st.reqNo, Amount: st.amount})
		if st.subCode != "" {
			ce := channelError(t, err)
			if ce.Retryable || ce.SubCode != st.subCode || ce.Code != "40004" {
				t.Fatalf("%s: error = %+v; want permanent %s", st.name, ce, st.subCode)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if res.FundChange != st.fundChange || res.RefundedTotal != st.total || res.RefundAmount != st.amount {
			t.Fatalf("%s: result = %+v", st.name, res)
		}
	}
	refunds := e.sim.Refunds()
	if len(refunds) != 3 {
		t.Fatalf("simulator holds %d refunds, want 3: %+v", len(refunds), refunds)
	}
	var sum int64
	for _, r := range refunds {
		sum += r.RefundFen
	}
	if sum != 990 {
		t.Fatalf("money refunded = %d fen, want 990", sum)
	}

	st, err := e.gw.QueryRefund(ctx, no, "R2")
	if err != nil || !st.Found || st.RefundAmount != 500 || st.TotalAmount != 990 || st.RefundedAt.IsZero() {
		t.Fatalf("QueryRefund(R2) = %+v, %v", st, err)
	}
	st, err = e.gw.QueryRefund(ctx, no, "R3")
	if err != nil || st.Found {
		t.Fatalf("QueryRefund(R3, refused) = %+v, %v", st, err)
	}
	st, err = e.gw.QueryRefund(ctx, "P_nope", "R1")
	if err != nil || st.Found {
		t.Fatalf("QueryRefund(unknown trade) = %+v, %v", st, err)
	}
}

func TestRefundLostAnswerThenRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	no := "P_refund_retry"
	if _, err := e.gw.Precreate(ctx, tradeReq(no, 500)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.Pay("", no, ""); err != nil {
		t.Fatal(err)
	}
	// Alipay commits the refund but answers ACQ.SYSTEM_ERROR: the retry must not refund twice.
	if err := e.sim.InjectGatewayFault(alipaysim.GatewayFault{Mode: alipaysim.FaultSystemError, Method: "alipay.trade.refund", AfterProcessing: true}); err != nil {
		t.Fatal(err)
	}
	req := payment.RefundRequest{PaymentNo: no, OutRequestNo: "R1", Amount: 200}
	_, err := e.gw.Refund(ctx, req)
	if !payment.IsRetryable(err) {
		t.Fatalf("first attempt: %v; want retryable", err)
	}
	res, err := e.gw.Refund(ctx, req)
	if err != nil || res.FundChange || res.RefundedTotal != 200 {
		t.Fatalf("retry = %+v, %v; want fund_change N, total 2.00", res, err)
	}
}

func TestPrecreateReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	req := tradeReq("P_replay", 990)
	qr1, err := e.gw.Precreate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	qr2, err := e.gw.Precreate(ctx, req)
	if err != nil || qr2 != qr1 {
		t.Fatalf("replay = %q, %v; want the same qr_code %q", qr2, err, qr1)
	}
	other := req
	other.Amount = 991
	_, err = e.gw.Precreate(ctx, other)
	if ce := channelError(t, err); ce.Retryable || ce.SubCode != "ACQ.CONTEXT_INCONSISTENT" {
		t.Fatalf("changed amount = %+v", ce)
	}
	if _, err := e.sim.Pay("", req.PaymentNo, ""); err != nil {
		t.Fatal(err)
	}
	_, err = e.gw.Precreate(ctx, req)
	if ce := channelError(t, err); ce.Retryable || ce.SubCode != "ACQ.TRADE_HAS_SUCCESS" {
		t.Fatalf("precreate paid = %+v", ce)
	}
}

func TestRequestValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	valid := tradeReq("P_valid", 100)
	tests := []struct {
		name string
		mod  func(*payment.TradeRequest)
		code string
	}{
		{"bad payment_no", func(r *payment.TradeRequest) { r.PaymentNo = "P-1" }, payment.EINVALID},
		{"zero amount", func(r *payment.TradeRequest) { r.Amount = 0 }, payment.EINVALID},
		{"too large amount", func(r *payment.TradeRequest) { r.Amount = payment.MaxAmount + 1 }, payment.EINVALID},
		{"no subject", func(r *payment.TradeRequest) { r.Subject = "" }, payment.EINVALID},
		{"no expiry", func(r *payment.TradeRequest) { r.ExpireAt = time.Time{} }, payment.EINVALID},
		{"already expired", func(r *payment.TradeRequest) { r.ExpireAt = time.Now().Add(-time.Second) }, payment.EUNPROCESSABLE},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := valid
			tc.mod(&req)
			_, err1 := e.gw.PagePayURL(ctx, req)
			_, err2 := e.gw.Precreate(ctx, req)
			for _, err := range []error{err1, err2} {
				ce := channelError(t, err)
				if ce.Retryable || payment.ErrorCode(err) != tc.code {
					t.Fatalf("error = %+v, code %s; want permanent %s", ce, payment.ErrorCode(err), tc.code)
				}
			}
		})
	}
	if len(e.sim.Trades()) != 0 {
		t.Fatal("invalid requests reached the simulator")
	}
}

// tamperProxy forwards to the simulator and rewrites its answers.
func tamperProxy(t *testing.T, target string, rewrite func([]byte) []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(rewrite(out))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + alipaysim.GatewayPath
}

func TestTamperedResponsesAreRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	no := "P_tamper"
	if _, err := e.gw.Precreate(ctx, tradeReq(no, 990)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.Pay("", no, ""); err != nil {
		t.Fatal(err)
	}
	keys := testKeys(t)
	otherKeys := mustOtherKeys(t)
	tests := []struct {
		name            string
		rewrite         func([]byte) []byte
		alipayPublicKey string
	}{
		{"amount changed", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"total_amount":"9.90"`), []byte(`"total_amount":"0.01"`), 1)
		}, keys.AlipayPublicKeyPEM},
		{"status changed", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`TRADE_SUCCESS`), []byte(`TRADE_CLOSED`), 1)
		}, keys.AlipayPublicKeyPEM},
		{"whitespace added inside the signed object", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"code":"10000",`), []byte(`"code":"10000", `), 1)
		}, keys.AlipayPublicKeyPEM},
		{"signature removed", func(b []byte) []byte {
			i := bytes.LastIndex(b, []byte(`,"sign":`))
			return append(append([]byte{}, b[:i]...), '}')
		}, keys.AlipayPublicKeyPEM},
		{"signature garbled", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"sign":"`), []byte(`"sign":"AAAA`), 1)
		}, keys.AlipayPublicKeyPEM},
		{"untampered answer, wrong Alipay public key", func(b []byte) []byte { return b }, otherKeys.AlipayPublicKeyPEM},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gw, err := alipay.New(alipay.Config{
				AppID: testAppID, SellerID: testSellerID,
				AppPrivateKeyPEM: keys.AppPrivateKeyPEM, AlipayPublicKeyPEM: tc.alipayPublicKey,
				GatewayURL: tamperProxy(t, e.srv.URL, tc.rewrite), NotifyURL: e.sink.URL(),
			})
			if err != nil {
				t.Fatal(err)
			}
			tr, err := gw.Query(ctx, no)
			ce := channelError(t, err)
			if ce.Retryable || payment.ErrorCode(err) != payment.EBADSIGNATURE {
				t.Fatalf("error = %+v (code %s); want permanent bad_signature", ce, payment.ErrorCode(err))
			}
			if tr.State == payment.TradePaid || tr.State == payment.TradeClosed || tr.State == payment.TradeNotExist {
				t.Fatalf("a state came back with the error: %v", tr.State)
			}
		})
	}
	// An unsigned failure answer must not turn into a domain outcome either.
	gw, err := alipay.New(alipay.Config{
		AppID: testAppID, SellerID: testSellerID,
		AppPrivateKeyPEM: keys.AppPrivateKeyPEM, AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM,
		GatewayURL: tamperProxy(t, e.srv.URL, func([]byte) []byte {
			return []byte(`{"alipay_trade_close_response":{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST","sub_msg":"x"}}`)
		}), NotifyURL: e.sink.URL(),
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := gw.Close(ctx, no)
	if err == nil || out == payment.CloseNotExist {
		t.Fatalf("unsigned ACQ.TRADE_NOT_EXIST became %v, %v", out, err)
	}
}

func TestTamperedRequestIsRejectedBySimulator(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other := mustOtherKeys(t)
	keys := testKeys(t)
	// The app signs with a key the simulator does not know: Alipay answers a signed
	// 40002 isv.invalid-signature, which the adapter verifies and reports as permanent.
	gw, err := alipay.New(alipay.Config{
		AppID: testAppID, SellerID: testSellerID,
		AppPrivateKeyPEM: other.AppPrivateKeyPEM, AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM,
		GatewayURL: e.srv.URL + alipaysim.GatewayPath, NotifyURL: e.sink.URL(),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = gw.Precreate(context.Background(), tradeReq("P_badsig", 100))
	ce := channelError(t, err)
	if ce.Retryable || ce.Code != "40002" || ce.SubCode != "isv.invalid-signature" {
		t.Fatalf("error = %+v", ce)
	}
	if len(e.sim.Trades()) != 0 {
		t.Fatal("a trade was created from a badly signed request")
	}
}

func mustOtherKeys(t *testing.T) alipaysim.KeySet {
	t.Helper()
	ks, err := alipaysim.GenerateKeys(1024) // small: only needs to differ
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestDecodeNotificationChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	no := "P_notify_checks"
	if _, err := e.gw.Precreate(ctx, tradeReq(no, 1234)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.Pay("", no, ""); err != nil {
		t.Fatal(err)
	}
	good := e.sink.next(t, 5*time.Second).form
	if _, err := e.gw.DecodeForm(ctx, good); err != nil {
		t.Fatalf("genuine notification rejected: %v", err)
	}
	keys := testKeys(t)
	tests := []struct {
		name   string
		mod    func(url.Values)
		gwApp  string
		seller string
		code   string
	}{
		{"amount tampered", func(v url.Values) { v.Set("total_amount", "0.01") }, testAppID, testSellerID, payment.EBADSIGNATURE},
		{"status tampered", func(v url.Values) { v.Set("trade_status", "TRADE_FINISHED") }, testAppID, testSellerID, payment.EBADSIGNATURE},
		{"field added", func(v url.Values) { v.Set("refund_fee", "12.34") }, testAppID, testSellerID, payment.EBADSIGNATURE},
		{"value duplicated", func(v url.Values) { v.Add("out_trade_no", "P_other") }, testAppID, testSellerID, payment.EINVALID},
		{"sign removed", func(v url.Values) { v.Del("sign") }, testAppID, testSellerID, payment.EBADSIGNATURE},
		{"sign_type RSA", func(v url.Values) { v.Set("sign_type", "RSA") }, testAppID, testSellerID, payment.EBADSIGNATURE},
		{"cert sn injected", func(v url.Values) { v.Set("alipay_cert_sn", "deadbeef") }, testAppID, testSellerID, payment.EBADSIGNATURE},
		{"another app", func(url.Values) {}, "2021000000000002", testSellerID, payment.EUNPROCESSABLE},
		{"another seller", func(url.Values) {}, testAppID, "2088000000000002", payment.EUNPROCESSABLE},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gw, err := alipay.New(alipay.Config{
				AppID: tc.gwApp, SellerID: tc.seller,
				AppPrivateKeyPEM: keys.AppPrivateKeyPEM, AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM,
				GatewayURL: e.srv.URL + alipaysim.GatewayPath, NotifyURL: e.sink.URL(),
			})
			if err != nil {
				t.Fatal(err)
			}
			form := url.Values{}
			for k, v := range good {
				form[k] = append([]string{}, v...)
			}
			tc.mod(form)
			_, err = gw.DecodeForm(ctx, form)
			if payment.ErrorCode(err) != tc.code {
				t.Fatalf("error = %v (code %q); want %s", err, payment.ErrorCode(err), tc.code)
			}
		})
	}
}
