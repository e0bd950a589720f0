package statement_test

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/alipaysim/simtest"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/statement"
)

// simGateway starts a simulator and the Alipay adapter pointed at it.
func simGateway(t *testing.T) (*alipaysim.Simulator, *alipay.Gateway) {
	t.Helper()
	sim, srv := simtest.Start(t, func(c *alipaysim.Config) { c.PaymentNotificationsOnly = true })
	keys := simtest.Keys(t)
	gw, err := alipay.New(alipay.Config{
		AppID: simtest.AppID, SellerID: simtest.SellerID,
		AppPrivateKeyPEM: keys.AppPrivateKeyPEM, AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM,
		GatewayURL: srv.URL + alipaysim.GatewayPath, NotifyURL: "http://127.0.0.1:9/notify",
	})
	if err != nil {
		t.Fatal(err)
	}
	return sim, gw
}

func download(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("download: HTTP %d", resp.StatusCode)
	}
	path := filepath.Join(t.TempDir(), "bill.zip")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	return path
}

// TestBillRoundTrip: the simulator's bill of today, published early, carries every
// payment and refund of the day in Alipay's GBK format, and the reader gets the Chinese
// subjects and the amounts back exactly.
func TestBillRoundTrip(t *testing.T) {
	sim, gw := simGateway(t)
	ctx := context.Background()
	today := time.Now().In(statement.China).Format(statement.DateLayout)

	_, err := gw.BillDownloadURL(ctx, today)
	if !errors.Is(err, payment.ErrBillNotAvailable) {
		t.Fatalf("today before publication: %v, want ErrBillNotAvailable", err)
	}
	if payment.IsRetryable(err) {
		t.Fatalf("a bill not yet available must not be a retryable channel error: %v", err)
	}

	subjects := map[string]string{"STMA1": "会员年费·高级版（含税）", "STMA2": "咖啡, \"双份\" 浓缩", "STMA3": "Plain subject"}
	amounts := map[string]payment.Amount{"STMA1": 12345, "STMA2": 990, "STMA3": 1}
	for no, subject := range subjects {
		if _, err := gw.Precreate(ctx, payment.TradeRequest{PaymentNo: no, Subject: subject, Amount: amounts[no], ExpireAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, err := sim.Pay("", no, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := gw.Refund(ctx, payment.RefundRequest{PaymentNo: "STMA1", OutRequestNo: "R1", Amount: 345}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Refund(ctx, payment.RefundRequest{PaymentNo: "STMA3", OutRequestNo: "R3", Amount: 1}); err != nil {
		t.Fatal(err)
	}
	if err := sim.PublishBills("today"); err != nil {
		t.Fatal(err)
	}
	url, err := gw.BillDownloadURL(ctx, today)
	if err != nil {
		t.Fatal(err)
	}
	var lines []payment.BillLine
	foot, err := statement.ReadBill(download(t, url), func(l payment.BillLine) error {
		lines = append(lines, l)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 5 {
		t.Fatalf("got %d lines, want 3 payments and 2 refunds: %+v", len(lines), lines)
	}
	var trades, refunds int
	for _, l := range lines {
		switch l.Kind {
		case payment.BillLineTrade:
			trades++
			if l.Subject != subjects[l.OutTradeNo] {
				t.Errorf("%s: subject %q, want %q", l.OutTradeNo, l.Subject, subjects[l.OutTradeNo])
			}
			if l.Amount != amounts[l.OutTradeNo] {
				t.Errorf("%s: amount %d, want %d", l.OutTradeNo, l.Amount, amounts[l.OutTradeNo])
			}
			if l.TradeNo == "" || l.FinishedAt.IsZero() {
				t.Errorf("%s: no trade_no or finish time: %+v", l.OutTradeNo, l)
			}
		case payment.BillLineRefund:
			refunds++
			want := map[string]payment.Amount{"R1": 345, "R3": 1}[l.OutRequestNo]
			if l.Amount != want {
				t.Errorf("refund %s: amount %d, want %d", l.OutRequestNo, l.Amount, want)
			}
		}
	}
	if trades != 3 || refunds != 2 {
		t.Errorf("%d payments and %d refunds, want 3 and 2", trades, refunds)
	}
	if !foot.Found || foot.Trades != 3 || foot.Refunds != 2 || foot.TradeFen != 12345+990+1 || foot.RefundFen != -346 {
		t.Errorf("footer %+v", foot)
	}

	// A planted change of amount shows in the next download.
	if err := sim.CorruptBill(today, alipaysim.BillCorruption{Op: alipaysim.CorruptAmount, OutTradeNo: "STMA2", Amount: "9.91"}); err != nil {
		t.Fatal(err)
	}
	url, err = gw.BillDownloadURL(ctx, today)
	if err != nil {
		t.Fatal(err)
	}
	var got payment.Amount
	if _, err := statement.ReadBill(download(t, url), func(l payment.BillLine) error {
		if l.OutTradeNo == "STMA2" {
			got = l.Amount
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got != 991 {
		t.Errorf("corrupted amount %d, want 991", got)
	}

	// A dropped line is gone, and the footer agrees with what is left.
	if err := sim.CorruptBill(today, alipaysim.BillCorruption{Op: alipaysim.CorruptDrop, OutTradeNo: "STMA3"}); err != nil {
		t.Fatal(err)
	}
	url, err = gw.BillDownloadURL(ctx, today)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	foot, err = statement.ReadBill(download(t, url), func(l payment.BillLine) error {
		if l.OutTradeNo == "STMA3" && l.Kind == payment.BillLineTrade {
			t.Error("dropped line still in the bill")
		}
		seen++
		return nil
	})
	if err != nil || seen != 4 || foot.Trades != 2 {
		t.Errorf("after drop: %d lines, footer %+v, %v", seen, foot, err)
	}
	for _, bad := range []alipaysim.BillCorruption{{Op: "shuffle", OutTradeNo: "x"}, {Op: alipaysim.CorruptAmount, OutTradeNo: "x", Amount: "1.234"}, {Op: alipaysim.CorruptDrop}} {
		if err := sim.CorruptBill(today, bad); err == nil {
			t.Errorf("corruption %+v accepted", bad)
		}
	}
	if err := sim.PublishBills("2026-13-01"); err == nil {
		t.Error("an impossible publication date was accepted")
	}

	// A tampered URL is refused.
	resp, err := http.Get(url + "0")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("tampered token: HTTP %d, want 403", resp.StatusCode)
	}
}

// TestZipWithManyEntriesIsRefusedUnread: a zip whose central directory holds more than
// statement.MaxZipEntries files is refused as malformed before archive/zip reads the
// directory (which it would read whole, however many entries it lists), and a real
// bill's two files pass.
func TestZipWithManyEntriesIsRefusedUnread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "many.zip")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for i := range 5000 {
		if _, err := zw.Create(fmt.Sprintf("e%05d.csv", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = statement.OpenBill(path)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, statement.ErrMalformedBill) || !strings.Contains(err.Error(), "more than 64 files") {
		t.Fatalf("a zip of 5,000 entries: %v, want it refused as malformed for its entry count", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("refusing it allocated %d bytes; the directory must not be read", grew)
	}
}
