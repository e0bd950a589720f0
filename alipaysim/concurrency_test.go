package alipaysim_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paykit/paykit/alipaysim"
	"github.com/smartwalle/alipay/v3"
)

// TestPayCloseQueryRace: many goroutines pay (control API), close (gateway) and query
// (gateway) the same trade at once. Exactly one of pay/close wins, the trade ends in
// exactly one final state, every query saw either the initial or that final state, and
// exactly one notification describes the outcome.
func TestPayCloseQueryRace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	const rounds, payers, closers, queriers = 12, 8, 8, 8
	ctx := context.Background()
	var paidWins, closeWins int
	for round := range rounds {
		no := fmt.Sprintf("S_race_%d", round)
		h.precreate(t, no, "5.00")
		var (
			start            = make(chan struct{})
			wg               sync.WaitGroup
			pays, closes     atomic.Int32
			alreadyPaidOrBad atomic.Int32
			seen             sync.Map
		)
		for i := range payers + closers + queriers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				switch {
				case i < payers:
					req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/_sim/trades/"+no+"/pay", nil)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
					switch resp.StatusCode {
					case http.StatusOK:
						pays.Add(1)
					case http.StatusConflict:
					default:
						t.Errorf("pay: HTTP %d", resp.StatusCode)
					}
				case i < payers+closers:
					rsp, err := h.client.TradeClose(ctx, alipay.TradeClose{OutTradeNo: no})
					switch {
					case err != nil:
						t.Error(err)
					case rsp.IsSuccess():
						closes.Add(1)
					case rsp.SubCode == "ACQ.TRADE_STATUS_ERROR":
						alreadyPaidOrBad.Add(1)
					default:
						t.Errorf("close answered %+v", rsp.Error)
					}
				default:
					rsp, err := h.client.TradeQuery(ctx, alipay.TradeQuery{OutTradeNo: no})
					if err != nil || !rsp.IsSuccess() {
						t.Errorf("query: %+v, %v", rsp, err)
						return
					}
					seen.Store(rsp.TradeStatus, true)
				}
			}()
		}
		close(start)
		wg.Wait()

		if got := pays.Load() + closes.Load(); got != 1 {
			t.Fatalf("round %d: %d pays and %d closes succeeded; want exactly one winner", round, pays.Load(), closes.Load())
		}
		final := alipaysim.StatusClosed
		if pays.Load() == 1 {
			final = alipaysim.StatusSuccess
			paidWins++
		} else {
			closeWins++
		}
		if alreadyPaidOrBad.Load() != closers-closes.Load() {
			t.Fatalf("round %d: %d closes refused, want %d", round, alreadyPaidOrBad.Load(), closers-closes.Load())
		}
		seen.Range(func(k, _ any) bool {
			if s := string(k.(alipay.TradeStatus)); s != alipaysim.StatusWaitBuyerPay && s != final {
				t.Errorf("round %d: a query saw %s; final is %s", round, s, final)
			}
			return true
		})
		tr, err := h.sim.Trade("", no)
		if err != nil || tr.TradeStatus != final {
			t.Fatalf("round %d: trade = %+v, %v; want %s", round, tr, err, final)
		}
		d := h.sink.next(t, 5*time.Second)
		if d.form.Get("out_trade_no") != no || d.form.Get("trade_status") != final {
			t.Fatalf("round %d: notification %v", round, d.form)
		}
	}
	h.sink.none(t, 200*time.Millisecond)
	t.Logf("%d rounds × (%d payers, %d closers, %d queriers): pay won %d, close won %d",
		rounds, payers, closers, queriers, paidWins, closeWins)
}

// TestConcurrentRefundsNeverExceedPaidAmount: 20 goroutines refund 1.00 each (distinct
// out_request_no) from a 9.90 trade, and 20 replay one request; exactly 9 new refunds
// succeed and the total stays within the paid amount.
func TestConcurrentRefundsNeverExceedPaidAmount(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.precreate(t, "S_refund_race", "9.90")
	if _, err := h.sim.Pay("", "S_refund_race", ""); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var moved, replays, refused atomic.Int32
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqNo := fmt.Sprintf("R%d", i)
			if i >= 20 {
				reqNo = "R_same"
			}
			rsp, err := h.client.TradeRefund(context.Background(), alipay.TradeRefund{OutTradeNo: "S_refund_race", RefundAmount: "1.00", OutRequestNo: reqNo})
			switch {
			case err != nil:
				t.Error(err)
			case rsp.IsSuccess() && rsp.FundChange == "Y":
				moved.Add(1)
			case rsp.IsSuccess() && rsp.FundChange == "N":
				replays.Add(1)
			case rsp.SubCode == "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL":
				refused.Add(1)
			default:
				t.Errorf("refund answered %+v", rsp.Error)
			}
		}()
	}
	wg.Wait()
	var total int64
	for _, r := range h.sim.Refunds() {
		total += r.RefundFen
	}
	t.Logf("40 concurrent refunds: %d moved money, %d replays, %d refused; refunded %d fen", moved.Load(), replays.Load(), refused.Load(), total)
	if moved.Load() != 9 || total != 900 {
		t.Fatalf("%d refunds moved money (total %d fen); want 9 (900)", moved.Load(), total)
	}
	if moved.Load()+replays.Load()+refused.Load() != 40 {
		t.Fatal("some refunds unaccounted for")
	}
}
