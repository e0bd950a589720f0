package alipay

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/smartwalle/alipay/v3"
)

var cst = time.FixedZone("CST", 8*3600)

func answer(code, sub string) alipay.Error {
	msg := "Success"
	if code != "10000" {
		msg = "Business Failed"
	}
	return alipay.Error{Code: alipay.Code(code), Msg: msg, SubCode: sub, SubMsg: "sub message"}
}

func TestTradeStateMapping(t *testing.T) {
	tests := []struct {
		status alipay.TradeStatus
		want   payment.TradeState
		ok     bool
	}{
		{"TRADE_SUCCESS", payment.TradePaid, true},
		{"TRADE_FINISHED", payment.TradePaid, true},
		{"WAIT_BUYER_PAY", payment.TradeWaiting, true},
		{"TRADE_CLOSED", payment.TradeClosed, true},
		{"TRADE_PENDING", stateUnknown, false},
		{"", stateUnknown, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.status), func(t *testing.T) {
			got, ok := tradeState(tc.status)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("tradeState(%q) = %v, %v; want %v, %v", tc.status, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// wantErr describes an expected *payment.ChannelError; nil means no error.
type wantErr struct {
	retryable bool
	subCode   string
	code      string // payment.ErrorCode of the error, if set
}

func checkErr(t *testing.T, err error, want *wantErr) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		return
	}
	var ce *payment.ChannelError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *payment.ChannelError", err, err)
	}
	if ce.Retryable != want.retryable || ce.SubCode != want.subCode {
		t.Fatalf("error = %+v; want retryable=%v sub_code=%q", ce, want.retryable, want.subCode)
	}
	if payment.IsRetryable(err) != want.retryable {
		t.Fatalf("payment.IsRetryable disagrees")
	}
	if want.code != "" && payment.ErrorCode(err) != want.code {
		t.Fatalf("ErrorCode = %q; want %q", payment.ErrorCode(err), want.code)
	}
}

func TestQueryResultMapping(t *testing.T) {
	paid := func(status alipay.TradeStatus) *alipay.TradeQueryRsp {
		return &alipay.TradeQueryRsp{Error: answer("10000", ""), OutTradeNo: "P1", TradeNo: "T1", TradeStatus: status,
			TotalAmount: "9.90", BuyerUserId: "2088", SendPayDate: "2024-05-06 07:08:09"}
	}
	paidAt := time.Date(2024, 5, 6, 7, 8, 9, 0, cst)
	tests := []struct {
		name  string
		rsp   *alipay.TradeQueryRsp
		err   error
		want  payment.Trade
		wantE *wantErr
	}{
		{"TRADE_SUCCESS is paid", paid("TRADE_SUCCESS"), nil,
			payment.Trade{State: payment.TradePaid, PaymentNo: "P1", TradeNo: "T1", Amount: 990, BuyerID: "2088", PaidAt: paidAt, RawStatus: "TRADE_SUCCESS"}, nil},
		{"TRADE_FINISHED is paid", paid("TRADE_FINISHED"), nil,
			payment.Trade{State: payment.TradePaid, PaymentNo: "P1", TradeNo: "T1", Amount: 990, BuyerID: "2088", PaidAt: paidAt, RawStatus: "TRADE_FINISHED"}, nil},
		{"WAIT_BUYER_PAY is waiting", &alipay.TradeQueryRsp{Error: answer("10000", ""), OutTradeNo: "P1", TradeNo: "T1", TradeStatus: "WAIT_BUYER_PAY", TotalAmount: "10"}, nil,
			payment.Trade{State: payment.TradeWaiting, PaymentNo: "P1", TradeNo: "T1", Amount: 1000, RawStatus: "WAIT_BUYER_PAY"}, nil},
		{"TRADE_CLOSED is closed", &alipay.TradeQueryRsp{Error: answer("10000", ""), TradeNo: "T1", TradeStatus: "TRADE_CLOSED", TotalAmount: "0.01"}, nil,
			payment.Trade{State: payment.TradeClosed, PaymentNo: "P1", TradeNo: "T1", Amount: 1, RawStatus: "TRADE_CLOSED"}, nil},
		{"buyer_open_id when no user id", &alipay.TradeQueryRsp{Error: answer("10000", ""), TradeStatus: "TRADE_SUCCESS", TotalAmount: "1.5", BuyerOpenId: "open"}, nil,
			payment.Trade{State: payment.TradePaid, PaymentNo: "P1", Amount: 150, BuyerID: "open", RawStatus: "TRADE_SUCCESS"}, nil},
		{"ACQ.TRADE_NOT_EXIST is not-exist without error", &alipay.TradeQueryRsp{Error: answer("40004", "ACQ.TRADE_NOT_EXIST")}, nil,
			payment.Trade{State: payment.TradeNotExist, PaymentNo: "P1"}, nil},
		{"aop-prefixed not exist", &alipay.TradeQueryRsp{Error: answer("40004", "aop.ACQ.TRADE_NOT_EXIST")}, nil,
			payment.Trade{State: payment.TradeNotExist, PaymentNo: "P1"}, nil},
		{"ACQ.SYSTEM_ERROR is retryable", &alipay.TradeQueryRsp{Error: answer("40004", "ACQ.SYSTEM_ERROR")}, nil,
			payment.Trade{State: stateUnknown, PaymentNo: "P1"}, &wantErr{retryable: true, subCode: "ACQ.SYSTEM_ERROR"}},
		{"20000 service unavailable is retryable", &alipay.TradeQueryRsp{Error: answer("20000", "isp.unknow-error")}, nil,
			payment.Trade{State: stateUnknown, PaymentNo: "P1"}, &wantErr{retryable: true, subCode: "isp.unknow-error"}},
		{"ACQ.INVALID_PARAMETER is permanent", &alipay.TradeQueryRsp{Error: answer("40004", "ACQ.INVALID_PARAMETER")}, nil,
			payment.Trade{State: stateUnknown, PaymentNo: "P1"}, &wantErr{subCode: "ACQ.INVALID_PARAMETER"}},
		{"isv.invalid-signature is permanent", &alipay.TradeQueryRsp{Error: answer("40002", "isv.invalid-signature")}, nil,
			payment.Trade{State: stateUnknown, PaymentNo: "P1"}, &wantErr{subCode: "isv.invalid-signature"}},
		{"unknown trade_status", &alipay.TradeQueryRsp{Error: answer("10000", ""), TradeStatus: "NEW", TotalAmount: "1"}, nil,
			payment.Trade{State: stateUnknown, PaymentNo: "P1"}, &wantErr{code: payment.EINTERNAL}},
		{"float-looking amount with 3 decimals", &alipay.TradeQueryRsp{Error: answer("10000", ""), TradeStatus: "TRADE_SUCCESS", TotalAmount: "9.999"}, nil,
			payment.Trade{State: stateUnknown, PaymentNo: "P1"}, &wantErr{code: payment.EINTERNAL}},
		{"answer for another out_trade_no", &alipay.TradeQueryRsp{Error: answer("10000", ""), OutTradeNo: "P2", TradeStatus: "TRADE_SUCCESS", TotalAmount: "1"}, nil,
			payment.Trade{State: stateUnknown, PaymentNo: "P1"}, &wantErr{code: payment.EINTERNAL}},
		{"transport error is retryable", nil, errors.New("connection refused"),
			payment.Trade{State: stateUnknown, PaymentNo: "P1"}, &wantErr{retryable: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := queryResult("P1", tc.rsp, tc.err, cst)
			checkErr(t, err, tc.wantE)
			if !got.PaidAt.Equal(tc.want.PaidAt) {
				t.Fatalf("PaidAt = %v; want %v", got.PaidAt, tc.want.PaidAt)
			}
			got.PaidAt, tc.want.PaidAt = time.Time{}, time.Time{}
			if got != tc.want {
				t.Fatalf("trade = %+v; want %+v", got, tc.want)
			}
		})
	}
}

func TestCloseResultMapping(t *testing.T) {
	tests := []struct {
		name  string
		rsp   *alipay.TradeCloseRsp
		err   error
		want  payment.CloseOutcome
		wantE *wantErr
	}{
		{"success is done", &alipay.TradeCloseRsp{Error: answer("10000", "")}, nil, payment.CloseDone, nil},
		{"ACQ.TRADE_NOT_EXIST", &alipay.TradeCloseRsp{Error: answer("40004", "ACQ.TRADE_NOT_EXIST")}, nil, payment.CloseNotExist, nil},
		{"ACQ.TRADE_STATUS_ERROR is already paid", &alipay.TradeCloseRsp{Error: answer("40004", "ACQ.TRADE_STATUS_ERROR")}, nil, payment.CloseAlreadyPaid, nil},
		{"ACQ.TRADE_HAS_SUCCESS is already paid", &alipay.TradeCloseRsp{Error: answer("40004", "ACQ.TRADE_HAS_SUCCESS")}, nil, payment.CloseAlreadyPaid, nil},
		{"ACQ.SYSTEM_ERROR is retryable", &alipay.TradeCloseRsp{Error: answer("40004", "ACQ.SYSTEM_ERROR")}, nil, closeUnknown, &wantErr{retryable: true, subCode: "ACQ.SYSTEM_ERROR"}},
		{"other refusal is permanent", &alipay.TradeCloseRsp{Error: answer("40004", "ACQ.REASON_TRADE_STATUS_INVALID")}, nil, closeUnknown, &wantErr{subCode: "ACQ.REASON_TRADE_STATUS_INVALID"}},
		{"40006 permission denied is permanent", &alipay.TradeCloseRsp{Error: answer("40006", "isv.insufficient-isv-permissions")}, nil, closeUnknown, &wantErr{subCode: "isv.insufficient-isv-permissions"}},
		{"timeout is retryable", nil, context.DeadlineExceeded, closeUnknown, &wantErr{retryable: true}},
		{"unsigned not-exist is not an outcome", nil, &alipay.Error{Code: "40004", SubCode: "ACQ.TRADE_NOT_EXIST"}, closeUnknown, &wantErr{subCode: "ACQ.TRADE_NOT_EXIST"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := closeResult(tc.rsp, tc.err)
			checkErr(t, err, tc.wantE)
			if got != tc.want {
				t.Fatalf("outcome = %v; want %v", got, tc.want)
			}
		})
	}
}

func TestRefundResultMapping(t *testing.T) {
	req := payment.RefundRequest{PaymentNo: "P1", OutRequestNo: "R1", Amount: 300}
	tests := []struct {
		name  string
		rsp   *alipay.TradeRefundRsp
		want  payment.RefundResult
		wantE *wantErr
	}{
		{"fund_change Y", &alipay.TradeRefundRsp{Error: answer("10000", ""), TradeNo: "T1", FundChange: "Y", RefundFee: "8.00"},
			payment.RefundResult{TradeNo: "T1", FundChange: true, RefundAmount: 300, RefundedTotal: 800}, nil},
		{"fund_change N is a replay", &alipay.TradeRefundRsp{Error: answer("10000", ""), TradeNo: "T1", FundChange: "N", RefundFee: "3"},
			payment.RefundResult{TradeNo: "T1", FundChange: false, RefundAmount: 300, RefundedTotal: 300}, nil},
		{"ACQ.SYSTEM_ERROR is retryable", &alipay.TradeRefundRsp{Error: answer("40004", "ACQ.SYSTEM_ERROR")}, payment.RefundResult{}, &wantErr{retryable: true, subCode: "ACQ.SYSTEM_ERROR"}},
		{"over the paid amount is permanent", &alipay.TradeRefundRsp{Error: answer("40004", "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL")}, payment.RefundResult{}, &wantErr{subCode: "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL"}},
		{"unpaid trade is permanent", &alipay.TradeRefundRsp{Error: answer("40004", "ACQ.TRADE_STATUS_ERROR")}, payment.RefundResult{}, &wantErr{subCode: "ACQ.TRADE_STATUS_ERROR"}},
		{"unknown trade is permanent", &alipay.TradeRefundRsp{Error: answer("40004", "ACQ.TRADE_NOT_EXIST")}, payment.RefundResult{}, &wantErr{subCode: "ACQ.TRADE_NOT_EXIST"}},
		{"malformed refund_fee", &alipay.TradeRefundRsp{Error: answer("10000", ""), FundChange: "Y", RefundFee: "3.001"}, payment.RefundResult{}, &wantErr{code: payment.EINTERNAL}},
		{"unknown fund_change", &alipay.TradeRefundRsp{Error: answer("10000", ""), FundChange: "", RefundFee: "3.00"}, payment.RefundResult{}, &wantErr{code: payment.EINTERNAL}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := refundResult(req, tc.rsp, "", nil, cst)
			checkErr(t, err, tc.wantE)
			if got != tc.want {
				t.Fatalf("result = %+v; want %+v", got, tc.want)
			}
		})
	}
}

// TestRefundResultTakesAlipaysTime: a refund's time is Alipay's gmt_refund_pay, in China
// time, when the answer carries it; before, the local clock stood in for it, and a refund
// confirmed just after midnight landed on the wrong statement day.
func TestRefundResultTakesAlipaysTime(t *testing.T) {
	req := payment.RefundRequest{PaymentNo: "P1", OutRequestNo: "R1", Amount: 300}
	rsp := &alipay.TradeRefundRsp{Error: answer("10000", ""), TradeNo: "T1", FundChange: "Y", RefundFee: "3.00"}
	got, err := refundResult(req, rsp, "2026-12-01 23:59:58", nil, cst)
	if err != nil || !got.RefundedAt.Equal(time.Date(2026, 12, 1, 23, 59, 58, 0, cst)) {
		t.Fatalf("refunded_at = %v, %v; want 2026-12-01 23:59:58 China time", got.RefundedAt, err)
	}
	if _, err := refundResult(req, rsp, "yesterday", nil, cst); err == nil {
		t.Fatal("a malformed gmt_refund_pay was accepted")
	}
}

func TestPrecreateResultMapping(t *testing.T) {
	tests := []struct {
		name  string
		rsp   *alipay.TradePreCreateRsp
		err   error
		want  string
		wantE *wantErr
	}{
		{"qr code", &alipay.TradePreCreateRsp{Error: answer("10000", ""), QRCode: "https://qr.alipay.com/x"}, nil, "https://qr.alipay.com/x", nil},
		{"success without qr", &alipay.TradePreCreateRsp{Error: answer("10000", "")}, nil, "", &wantErr{code: payment.EINTERNAL}},
		{"already paid is permanent", &alipay.TradePreCreateRsp{Error: answer("40004", "ACQ.TRADE_HAS_SUCCESS")}, nil, "", &wantErr{subCode: "ACQ.TRADE_HAS_SUCCESS"}},
		{"system error is retryable", &alipay.TradePreCreateRsp{Error: answer("40004", "ACQ.SYSTEM_ERROR")}, nil, "", &wantErr{retryable: true, subCode: "ACQ.SYSTEM_ERROR"}},
		{"HTTP 503 is retryable", nil, &url.Error{Op: "Post", URL: "x", Err: &HTTPStatusError{StatusCode: 503}}, "", &wantErr{retryable: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := precreateResult(tc.rsp, tc.err)
			checkErr(t, err, tc.wantE)
			if got != tc.want {
				t.Fatalf("qr = %q; want %q", got, tc.want)
			}
		})
	}
}

func TestRefundQueryResultMapping(t *testing.T) {
	tests := []struct {
		name  string
		rsp   *alipay.TradeFastPayRefundQueryRsp
		want  RefundStatus
		wantE *wantErr
	}{
		{"refund found", &alipay.TradeFastPayRefundQueryRsp{Error: answer("10000", ""), TradeNo: "T1", RefundStatus: "REFUND_SUCCESS",
			RefundAmount: "1.00", TotalAmount: "9.90", GMTRefundPay: "2024-01-02 03:04:05"},
			RefundStatus{Found: true, PaymentNo: "P1", OutRequestNo: "R1", TradeNo: "T1", RefundAmount: 100, TotalAmount: 990,
				RefundedAt: time.Date(2024, 1, 2, 3, 4, 5, 0, cst)}, nil},
		{"success without refund_status means no refund", &alipay.TradeFastPayRefundQueryRsp{Error: answer("10000", ""), TradeNo: "T1"},
			RefundStatus{PaymentNo: "P1", OutRequestNo: "R1", TradeNo: "T1"}, nil},
		{"unknown trade", &alipay.TradeFastPayRefundQueryRsp{Error: answer("40004", "ACQ.TRADE_NOT_EXIST")},
			RefundStatus{PaymentNo: "P1", OutRequestNo: "R1"}, nil},
		{"system error", &alipay.TradeFastPayRefundQueryRsp{Error: answer("40004", "ACQ.SYSTEM_ERROR")},
			RefundStatus{PaymentNo: "P1", OutRequestNo: "R1"}, &wantErr{retryable: true, subCode: "ACQ.SYSTEM_ERROR"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := refundQueryResult("P1", "R1", tc.rsp, nil, cst)
			checkErr(t, err, tc.wantE)
			if !got.RefundedAt.Equal(tc.want.RefundedAt) {
				t.Fatalf("RefundedAt = %v", got.RefundedAt)
			}
			got.RefundedAt, tc.want.RefundedAt = time.Time{}, time.Time{}
			if got != tc.want {
				t.Fatalf("status = %+v; want %+v", got, tc.want)
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

func TestCallErrorClassification(t *testing.T) {
	var syn json.SyntaxError
	tests := []struct {
		name    string
		err     error
		want    wantErr
		message string
	}{
		{"unsigned ACQ.SYSTEM_ERROR", &alipay.Error{Code: "40004", SubCode: "ACQ.SYSTEM_ERROR"}, wantErr{retryable: true, subCode: "ACQ.SYSTEM_ERROR"}, ""},
		{"error_response invalid app id", &alipay.Error{Code: "40002", SubCode: "isv.invalid-app-id"}, wantErr{subCode: "isv.invalid-app-id"}, ""},
		{"40005 call limit", &alipay.Error{Code: "40005", SubCode: "aop.ACQ.CALL_LIMITED"}, wantErr{retryable: true, subCode: "aop.ACQ.CALL_LIMITED"}, ""},
		{"unsigned success answer", &alipay.Error{Code: "10000"}, wantErr{code: payment.EBADSIGNATURE}, "signature"},
		{"value alipay.Error", alipay.Error{Code: "40004", SubCode: "ACQ.TRADE_NOT_EXIST"}, wantErr{subCode: "ACQ.TRADE_NOT_EXIST"}, ""},
		{"rsa verification", fmt.Errorf("verify: %w", rsa.ErrVerification), wantErr{code: payment.EBADSIGNATURE}, "signature"},
		{"corrupt base64 signature", base64.CorruptInputError(3), wantErr{code: payment.EBADSIGNATURE}, "signature"},
		{"no public key", alipay.ErrAliPublicKeyNotFound, wantErr{code: payment.EBADSIGNATURE}, "signature"},
		{"HTTP 500", &url.Error{Op: "Post", Err: &HTTPStatusError{StatusCode: 500}}, wantErr{retryable: true}, "HTTP 500"},
		{"HTTP 502", &HTTPStatusError{StatusCode: 502}, wantErr{retryable: true}, "HTTP 502"},
		{"HTTP 429", &HTTPStatusError{StatusCode: 429}, wantErr{retryable: true}, "HTTP 429"},
		{"HTTP 404", &HTTPStatusError{StatusCode: 404}, wantErr{}, "HTTP 404"},
		{"malformed JSON", &syn, wantErr{retryable: true}, "malformed"},
		{"no response object", alipay.ErrBadResponse, wantErr{retryable: true}, "malformed"},
		{"context deadline", fmt.Errorf("post: %w", context.DeadlineExceeded), wantErr{retryable: true}, "timeout"},
		{"net timeout", &url.Error{Op: "Post", Err: timeoutErr{}}, wantErr{retryable: true}, "timeout"},
		{"connection refused", &url.Error{Op: "Post", Err: errors.New("connection refused")}, wantErr{retryable: true}, "transport"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ce := callError(opQuery, tc.err)
			checkErr(t, ce, &tc.want)
			if !strings.Contains(ce.Message, tc.message) {
				t.Fatalf("message %q lacks %q", ce.Message, tc.message)
			}
			if ce.Op != opQuery || !errors.Is(ce, tc.err) && tc.want.code == "" {
				t.Fatalf("op %q, cause not wrapped: %v", ce.Op, ce)
			}
		})
	}
}

func TestNewValidatesConfig(t *testing.T) {
	base := Config{AppID: "a", SellerID: "s", AppPrivateKeyPEM: "x", AlipayPublicKeyPEM: "y", NotifyURL: "https://m.example/notify"}
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no app id", func(c *Config) { c.AppID = "" }, "required"},
		{"no seller", func(c *Config) { c.SellerID = "" }, "required"},
		{"notify url with query", func(c *Config) { c.NotifyURL = "https://m.example/notify?tenant=1" }, "query"},
		{"relative notify url", func(c *Config) { c.NotifyURL = "/notify" }, "absolute"},
		{"bad gateway url", func(c *Config) { c.GatewayURL = "ftp://x" }, "absolute"},
		{"gateway url with query", func(c *Config) { c.GatewayURL = "https://openapi.alipay.com/gateway.do?charset=utf-8" }, "query"},
		{"bad private key", func(c *Config) {}, "private key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.mod(&c)
			_, err := New(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New error = %v; want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestTradeParamsTimeExpireInChinaTime(t *testing.T) {
	g := &Gateway{notifyURL: "https://m.example/n", returnURL: "https://m.example/r", loc: cst}
	tests := []struct {
		name     string
		expireAt time.Time
		want     string
	}{
		{"UTC", time.Date(2099, 3, 4, 23, 30, 0, 0, time.UTC), "2099-03-05 07:30:00"},
		{"sub-second truncated, never later", time.Date(2099, 3, 4, 23, 30, 0, 999_999_999, time.UTC), "2099-03-05 07:30:00"},
		{"another zone", time.Date(2099, 3, 4, 10, 0, 0, 0, time.FixedZone("X", -5*3600)), "2099-03-04 23:00:00"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := g.tradeParams(opPagePay, payment.TradeRequest{PaymentNo: "P1", Subject: "s", Amount: 1, ExpireAt: tc.expireAt}, productPagePay)
			if err != nil {
				t.Fatal(err)
			}
			if tr.TimeExpire != tc.want || tr.TotalAmount != "0.01" || tr.NotifyURL != g.notifyURL || tr.ReturnURL != g.returnURL {
				t.Fatalf("trade = %+v", tr)
			}
		})
	}
}
