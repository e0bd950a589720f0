package alipaysim_test

import (
	"context"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"
)

// TestRefundProcessingAnswersFundChangeN: with processing_next, a first refund call is
// answered success with fund_change "N" while no money has moved; the refund query does
// not know it (no refund_status) and a replay answers "N" too, until it settles. Then
// the money moves, the query confirms it, and the refund notification goes out. With
// fail, the refund is forgotten and the same out_request_no sent again is a new refund.
func TestRefundProcessingAnswersFundChangeN(t *testing.T) {
	ctx := context.Background()
	for _, fail := range []bool{false, true} {
		h := newHarness(t, nil, nil)
		no := "S_processing"
		h.precreate(t, no, "9.90")
		if _, err := h.sim.Pay("", no, ""); err != nil {
			t.Fatal(err)
		}
		h.sink.next(t, 5*time.Second) // the payment's notification
		body := `{"processing_next":1,"settle_ms":400,"fail":false}`
		if fail {
			body = `{"processing_next":1,"settle_ms":400,"fail":true}`
		}
		if code := h.controlJSON(t, "POST", "/_sim/faults/refunds", body, nil); code != 200 {
			t.Fatalf("set refund faults: HTTP %d", code)
		}
		refund := func() *alipay.TradeRefundRsp {
			rsp, err := h.client.TradeRefund(ctx, alipay.TradeRefund{OutTradeNo: no, RefundAmount: "1.00", OutRequestNo: "R1"})
			if err != nil || !rsp.IsSuccess() {
				t.Fatalf("refund: %+v %v", rsp, err)
			}
			return rsp
		}
		query := func() string {
			rsp, err := h.client.TradeFastPayRefundQuery(ctx, alipay.TradeFastPayRefundQuery{OutTradeNo: no, OutRequestNo: "R1"})
			if err != nil || !rsp.IsSuccess() {
				t.Fatalf("refund query: %+v %v", rsp, err)
			}
			return rsp.RefundStatus
		}
		if rsp := refund(); rsp.FundChange != "N" || rsp.RefundFee != "0.00" {
			t.Fatalf("first call while processing: fund_change %q refund_fee %q, want N and 0.00", rsp.FundChange, rsp.RefundFee)
		}
		if st := query(); st != "" {
			t.Fatalf("query while processing: refund_status %q, want none", st)
		}
		if rsp := refund(); rsp.FundChange != "N" {
			t.Fatalf("replay while processing: fund_change %q, want N", rsp.FundChange)
		}
		time.Sleep(700 * time.Millisecond)
		if !fail {
			if st := query(); st != "REFUND_SUCCESS" {
				t.Fatalf("query after it settled: refund_status %q", st)
			}
			if d := h.sink.next(t, 5*time.Second); d.form.Get("refund_fee") != "1.00" || d.form.Get("out_biz_no") != "R1" {
				t.Fatalf("refund notification: %v", d.form)
			}
			if rs := h.sim.Refunds(); len(rs) != 1 || rs[0].State != "succeeded" {
				t.Fatalf("ledger: %+v", rs)
			}
			continue
		}
		if st := query(); st != "" {
			t.Fatalf("query after it failed: refund_status %q, want none", st)
		}
		if rsp := refund(); rsp.FundChange != "Y" || rsp.RefundFee != "1.00" {
			t.Fatalf("sent again after the failure: fund_change %q refund_fee %q, want a new refund (Y, 1.00)", rsp.FundChange, rsp.RefundFee)
		}
	}
}

// TestRefundQueryLag: with query_lag_ms the refund query does not see a refund until
// that long after it succeeded.
func TestRefundQueryLag(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil, nil)
	no := "S_lag"
	h.precreate(t, no, "9.90")
	if _, err := h.sim.Pay("", no, ""); err != nil {
		t.Fatal(err)
	}
	if code := h.controlJSON(t, "POST", "/_sim/faults/refunds", `{"query_lag_ms":500}`, nil); code != 200 {
		t.Fatalf("HTTP %d", code)
	}
	rsp, err := h.client.TradeRefund(ctx, alipay.TradeRefund{OutTradeNo: no, RefundAmount: "1.00", OutRequestNo: "R1"})
	if err != nil || rsp.FundChange != "Y" {
		t.Fatalf("refund: %+v %v", rsp, err)
	}
	status := func() string {
		q, err := h.client.TradeFastPayRefundQuery(ctx, alipay.TradeFastPayRefundQuery{OutTradeNo: no, OutRequestNo: "R1"})
		if err != nil {
			t.Fatal(err)
		}
		return q.RefundStatus
	}
	if st := status(); st != "" {
		t.Fatalf("query at once: %q, want none (lagging)", st)
	}
	time.Sleep(700 * time.Millisecond)
	if st := status(); st != "REFUND_SUCCESS" {
		t.Fatalf("query after the lag: %q", st)
	}
}
