package alipay_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/payment"
)

// noRedirect is a client that shows redirects instead of following them.
func noRedirect() *http.Client {
	return &http.Client{
		Timeout:       5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := noRedirect().Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPagePayRoundTrip: PagePayURL → the buyer opens the cashier over HTTP → presses Pay
// (the form the page posts) → the return_url redirect → the signed notification arrives
// at notify_url and the adapter verifies it.
func TestPagePayRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	expire := time.Date(2099, 1, 2, 3, 4, 5, 999, time.UTC) // 2099-01-02 11:04:05 in China
	req := payment.TradeRequest{PaymentNo: "P_pagepay", Subject: "会员月卡 <VIP>", Amount: 2990, ExpireAt: expire,
		ReturnURL: "https://shop.example/return"}

	payURL, err := e.gw.PagePayURL(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(payURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	var biz map[string]any
	if err := json.Unmarshal([]byte(q.Get("biz_content")), &biz); err != nil {
		t.Fatal(err)
	}
	if biz["time_expire"] != "2099-01-02 11:04:05" || biz["total_amount"] != "29.90" ||
		biz["product_code"] != "FAST_INSTANT_TRADE_PAY" || biz["out_trade_no"] != "P_pagepay" {
		t.Fatalf("biz_content = %v", biz)
	}
	if q.Get("notify_url") != e.sink.URL() || q.Get("return_url") != req.ReturnURL || q.Get("method") != "alipay.trade.page.pay" {
		t.Fatalf("query = %v", q)
	}

	// Before the buyer opens the cashier the trade does not exist.
	if tr, err := e.gw.Query(ctx, req.PaymentNo); err != nil || tr.State != payment.TradeNotExist {
		t.Fatalf("query before open = %+v, %v", tr, err)
	}

	status, page := get(t, payURL)
	if status != http.StatusOK {
		t.Fatalf("cashier: HTTP %d\n%s", status, page)
	}
	for _, want := range []string{"29.90", "会员月卡 &lt;VIP&gt;", `id="pay"`, "P_pagepay", "2099-01-02 11:04:05"} {
		if !strings.Contains(page, want) {
			t.Fatalf("cashier page lacks %q:\n%s", want, page)
		}
	}
	tr, err := e.gw.Query(ctx, req.PaymentNo)
	if err != nil || tr.State != payment.TradeWaiting {
		t.Fatalf("query after open = %+v, %v", tr, err)
	}
	// Opening the same URL again shows the same trade.
	if status, page2 := get(t, payURL); status != http.StatusOK || !strings.Contains(page2, tr.TradeNo) {
		t.Fatalf("reopen: HTTP %d", status)
	}

	// Submit the form the page posts.
	action := regexp.MustCompile(`action="([^"]+)"`).FindStringSubmatch(page)
	tradeNo := regexp.MustCompile(`name="trade_no" value="([^"]+)"`).FindStringSubmatch(page)
	if action == nil || tradeNo == nil {
		t.Fatalf("no pay form in page:\n%s", page)
	}
	resp, err := noRedirect().PostForm(e.srv.URL+action[1], url.Values{"trade_no": {tradeNo[1]}, "buyer_id": {"2088000011112222"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("pay: HTTP %d", resp.StatusCode)
	}
	ret, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(ret.String(), req.ReturnURL+"?") {
		t.Fatalf("redirect to %q", resp.Header.Get("Location"))
	}
	if rq := ret.Query(); rq.Get("out_trade_no") != req.PaymentNo || rq.Get("total_amount") != "29.90" ||
		rq.Get("method") != "alipay.trade.page.pay.return" || rq.Get("sign") == "" {
		t.Fatalf("return params = %v", rq)
	}

	n := e.sink.next(t, 5*time.Second)
	note, err := e.gw.DecodeForm(ctx, n.form)
	if err != nil {
		t.Fatal(err)
	}
	if note.State != payment.TradePaid || note.TradeStatus != "TRADE_SUCCESS" || note.TotalAmount != 2990 ||
		note.BuyerID != "2088000011112222" || note.PaymentNo != req.PaymentNo || note.NotifyID == "" ||
		note.AppID != testAppID || note.SellerID != testSellerID || note.PaidAt.IsZero() || note.NotifyType != "trade_status_sync" {
		t.Fatalf("notification = %+v", note)
	}
	if err := payment.CheckNotification(note, payment.Payment{PaymentNo: req.PaymentNo, Amount: 2990}); err != nil {
		t.Fatal(err)
	}
	if err := payment.CheckNotification(note, payment.Payment{PaymentNo: req.PaymentNo, Amount: 2999}); err == nil {
		t.Fatal("amount mismatch accepted")
	}

	// Paying twice is refused, and the page says so.
	resp, err = noRedirect().PostForm(e.srv.URL+action[1], url.Values{"trade_no": {tradeNo[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("second pay: HTTP %d", resp.StatusCode)
	}
	if status, _ := get(t, payURL); status != http.StatusConflict {
		t.Fatalf("reopening a paid trade: HTTP %d", status)
	}
}

// TestPagePayExpiry: a cashier opened after time_expire cannot create a payable trade, and
// an opened but unpaid trade closes by itself at time_expire with a TRADE_CLOSED notification.
func TestPagePayExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	expire := time.Now().Add(2500 * time.Millisecond)
	late := payment.TradeRequest{PaymentNo: "P_late", Subject: "late", Amount: 100, ExpireAt: expire}
	opened := payment.TradeRequest{PaymentNo: "P_opened", Subject: "opened", Amount: 100, ExpireAt: expire}
	lateURL, err := e.gw.PagePayURL(ctx, late)
	if err != nil {
		t.Fatal(err)
	}
	openedURL, err := e.gw.PagePayURL(ctx, opened)
	if err != nil {
		t.Fatal(err)
	}
	if status, page := get(t, openedURL); status != http.StatusOK {
		t.Fatalf("open before expiry: HTTP %d\n%s", status, page)
	}

	n := e.sink.next(t, 5*time.Second) // the opened trade closes by itself
	note, err := e.gw.DecodeForm(ctx, n.form)
	if err != nil {
		t.Fatal(err)
	}
	if note.PaymentNo != "P_opened" || note.State != payment.TradeClosed {
		t.Fatalf("notification = %+v", note)
	}
	if time.Now().Before(expire.Truncate(time.Second)) {
		t.Fatal("closed before time_expire")
	}
	if tr, err := e.gw.Query(ctx, "P_opened"); err != nil || tr.State != payment.TradeClosed {
		t.Fatalf("query opened = %+v, %v", tr, err)
	}
	if _, err := e.sim.Pay("", "P_opened", ""); err == nil {
		t.Fatal("paid an expired trade")
	}

	status, page := get(t, lateURL)
	if status != http.StatusGone || !strings.Contains(page, "ACQ.TRADE_HAS_CLOSE") {
		t.Fatalf("open after expiry: HTTP %d\n%s", status, page)
	}
	if tr, err := e.gw.Query(ctx, "P_late"); err != nil || tr.State != payment.TradeNotExist {
		t.Fatalf("query late = %+v, %v", tr, err)
	}
	if _, err := e.sim.Pay("", "P_late", ""); err == nil {
		t.Fatal("paid a trade opened after expiry")
	}
	trades := e.sim.Trades()
	if len(trades) != 1 || trades[0].CloseReason != alipaysim.CloseReasonExpired {
		t.Fatalf("trades = %+v", trades)
	}
}
