package alipaysim_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/csv"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/smartwalle/alipay/v3"
	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/paykit/paykit/alipaysim"
)

// billFile is one CSV of a bill zip, decoded from GBK: its # lines and its rows by
// column name.
type billFile struct {
	comments []string
	rows     []map[string]string
}

// getBill downloads the simulator's bill of day and decodes its two files, keyed
// "detail" and "summary".
func (h *harness) getBill(tb testing.TB, day string) map[string]billFile {
	tb.Helper()
	resp, err := http.Get(h.srv.URL + "/_sim/bills/" + day)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("bill: HTTP %d %s", resp.StatusCode, body)
	}
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]billFile{}
	for _, f := range zr.File {
		name, _ := simplifiedchinese.GBK.NewDecoder().String(f.Name)
		key := "detail"
		if strings.HasSuffix(name, "(汇总).csv") {
			key = "summary"
		}
		rc, err := f.Open()
		if err != nil {
			tb.Fatal(err)
		}
		raw, _ := io.ReadAll(simplifiedchinese.GBK.NewDecoder().Reader(rc))
		rc.Close()
		var bf billFile
		var header []string
		for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
			if strings.HasPrefix(line, "#") {
				bf.comments = append(bf.comments, line)
				continue
			}
			rec, err := csv.NewReader(strings.NewReader(line)).Read()
			if err != nil {
				tb.Fatalf("%s: %q: %v", name, line, err)
			}
			if header == nil {
				header = rec
				continue
			}
			row := map[string]string{}
			for i, v := range rec {
				row[header[i]] = strings.TrimSpace(v)
			}
			bf.rows = append(bf.rows, row)
		}
		out[key] = bf
	}
	return out
}

// TestDiscountedPaymentAndItsRefunds: a payment with a merchant discount and a red
// packet is notified, queried and billed with 订单金额 the total and 商家实收 the total
// less both; its refunds give back their shares, and the footer and the summary total
// the same columns.
func TestDiscountedPaymentAndItsRefunds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.precreate(t, "S_disc", "100.00")
	h.precreate(t, "S_plain", "9.99")
	h.precreate(t, "S_bad", "1.00")

	var errBody map[string]any
	for _, body := range []string{`{"merchant_discount_fen":100}`, `{"red_packet_fen":-1}`, `{"merchant_discount_fen":60,"red_packet_fen":40}`} {
		if code := h.controlJSON(t, "POST", "/_sim/trades/S_bad/pay", body, &errBody); code != http.StatusBadRequest {
			t.Errorf("pay %s on a trade of 100 fen: %d %v, want 400", body, code, errBody)
		}
	}
	var tr alipaysim.Trade
	if code := h.controlJSON(t, "POST", "/_sim/trades/S_disc/pay", `{"merchant_discount_fen":1000,"red_packet_fen":500}`, &tr); code != 200 ||
		tr.TotalFen != 10000 || tr.MerchantDiscountFen != 1000 || tr.RedPacketFen != 500 || tr.ReceiptFen != 8500 {
		t.Fatalf("discounted pay: %d %+v", code, tr)
	}
	n := h.sink.next(t, 5*time.Second).form
	if n.Get("out_trade_no") != "S_disc" || n.Get("total_amount") != "100.00" || n.Get("receipt_amount") != "85.00" ||
		n.Get("buyer_pay_amount") != "85.00" ||
		n.Get("fund_bill_list") != `[{"amount":"85.00","fundChannel":"ALIPAYACCOUNT"},{"amount":"10.00","fundChannel":"MDISCOUNT"},{"amount":"5.00","fundChannel":"MCOUPON"}]` {
		t.Errorf("notification of the discounted payment: %v", n)
	}
	q, err := h.client.TradeQuery(context.Background(), alipay.TradeQuery{OutTradeNo: "S_disc"})
	if err != nil || q.TotalAmount != "100.00" || q.ReceiptAmount != "85.00" || q.BuyerPayAmount != "85.00" {
		t.Errorf("query of the discounted payment: %+v %v", q, err)
	}
	if code := h.controlJSON(t, "POST", "/_sim/trades/S_plain/pay", "", &tr); code != 200 || tr.ReceiptFen != 999 {
		t.Fatalf("plain pay: %d %+v", code, tr)
	}
	key := parsePriv(t, h.keys.AppPrivateKeyPEM)
	for _, r := range []struct{ req, amount string }{{"RR1", "30.00"}, {"RR2", "70.00"}} {
		a := h.postRaw(t, nil, signedForm(t, key, "alipay.trade.refund", map[string]string{"out_trade_no": "S_disc", "refund_amount": r.amount, "out_request_no": r.req}))
		if a.get("code") != "10000" {
			t.Fatalf("refund %s: %v", r.req, a.fields)
		}
	}
	var refunds []alipaysim.Refund
	h.controlJSON(t, "GET", "/_sim/refunds", "", &refunds)
	if len(refunds) != 2 || refunds[0].MerchantDiscountFen != 300 || refunds[0].RedPacketFen != 150 ||
		refunds[1].MerchantDiscountFen != 700 || refunds[1].RedPacketFen != 350 {
		t.Fatalf("refund shares %+v, want 300+150 then the rest, 700+350", refunds)
	}

	today := time.Now().In(time.FixedZone("CST", 8*3600)).Format("2006-01-02")
	if err := h.sim.CorruptBill(today, alipaysim.BillCorruption{Op: alipaysim.CorruptReceived, OutTradeNo: "S_plain", Amount: "9.98"}); err != nil {
		t.Fatal(err)
	}
	bill := h.getBill(t, today)
	type line struct{ amount, received, discount, redPacket, fee string }
	want := map[string]line{
		"交易 S_disc":  {"100.00", "85.00", "10.00", "5.00", "-0.51"},
		"交易 S_plain": {"9.99", "9.98", "0.00", "0.00", "-0.06"}, // 商家实收 planted
		"退款 RR1":     {"-30.00", "-25.50", "-3.00", "-1.50", "0.15"},
		"退款 RR2":     {"-70.00", "-59.50", "-7.00", "-3.50", "0.36"},
	}
	got := map[string]line{}
	for _, r := range bill["detail"].rows {
		k := r["业务类型"] + " " + r["商户订单号"]
		if r["业务类型"] == alipaysim.BillTypeRefund {
			k = r["业务类型"] + " " + r["退款批次号/请求号"]
		}
		got[k] = line{r["订单金额（元）"], r["商家实收（元）"], r["商家优惠（元）"], r["商家红包消费金额（元）"], r["服务费（元）"]}
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: 订单金额, 商家实收, 商家优惠, 商家红包, 服务费 = %v, want %v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("bill lines %v, want %v", got, want)
	}
	footer := strings.Join(bill["detail"].comments, "\n")
	for _, w := range []string{"#交易合计：2笔，商家实收共94.98元，商家优惠共10.00元", "#退款合计：2笔，商家实收退款共-85.00元，商家优惠退款共-10.00元"} {
		if !strings.Contains(footer, w) {
			t.Errorf("footer lacks %q:\n%s", w, footer)
		}
	}
	sum := bill["summary"].rows
	wantSum := map[string]string{"门店名称": "合计", "交易订单总笔数": "2", "退款订单总笔数": "2", "订单金额（元）": "9.99",
		"商家实收（元）": "9.98", "商家优惠（元）": "0.00", "服务费（元）": "-0.06", "实收净额（元）": "9.92"}
	if len(sum) != 1 {
		t.Fatalf("summary rows %v, want one 合计", sum)
	}
	for col, w := range wantSum {
		if sum[0][col] != w {
			t.Errorf("summary %s = %q, want %q", col, sum[0][col], w)
		}
	}
}
