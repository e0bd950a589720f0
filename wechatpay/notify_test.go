package wechatpay_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/wechatpay"
	"github.com/paykit/paykit/wechatpaysim"
	"github.com/paykit/paykit/wechatpaysim/simtest"
)

// inbox records every notification delivered to it, as it arrived, and answers 204.
type inbox struct {
	mu  sync.Mutex
	got []payment.RawNotification
}

func (b *inbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.got = append(b.got, payment.RawNotification{Header: r.Header.Clone(), Body: body})
	b.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// wait returns the n-th notification delivered (from 1), waiting for it.
func (b *inbox) wait(tb testing.TB, n int) payment.RawNotification {
	tb.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b.mu.Lock()
		if len(b.got) >= n {
			raw := b.got[n-1]
			b.mu.Unlock()
			return raw
		}
		b.mu.Unlock()
	}
	tb.Fatalf("notification %d never delivered", n)
	return payment.RawNotification{}
}

// A paid order's TRANSACTION.SUCCESS, as the simulator delivers it, verifies and decodes
// to the payment: its notify id, out_trade_no, transaction_id, amount, payer and time.
// What must not pay is refused: a body changed by a byte, a replay of a genuine delivery
// signed six minutes ago, a signature probe, the delivery of another merchant (valid
// for its own), and a delivery without its signature headers.
func TestNotificationsVerifyAndDecode(t *testing.T) {
	for _, publicKey := range []bool{true, false} {
		in := &inbox{}
		notify := httptest.NewServer(in)
		t.Cleanup(notify.Close)
		sim, srv := simtest.Start(t, nil)
		ks := simtest.Keys(t)
		gw, err := wechatpay.New(context.Background(), wechatpay.Config{MchID: ks.MchID, AppID: ks.AppID,
			MerchantSerialNo: ks.MerchantSerialNo, MerchantPrivateKeyPEM: ks.MerchantPrivateKeyPEM, APIv3Key: ks.APIv3Key,
			BaseURL: srv.URL, NotifyURL: notify.URL + "/callbacks/wechatpay",
			PublicKeyPEM: map[bool]string{true: ks.PublicKeyPEM}[publicKey], PublicKeyID: map[bool]string{true: ks.PublicKeyID}[publicKey]})
		if err != nil {
			t.Fatal(err)
		}
		if publicKey {
			if err := sim.SetNotifySigner(ks.MchID, wechatpaysim.SignerPublicKey); err != nil {
				t.Fatal(err)
			}
		}
		ctx := context.Background()
		req := tradeRequest("P20261207notify01", payment.MethodWechatNative)
		if _, err := gw.Open(ctx, req); err != nil {
			t.Fatal(err)
		}
		if _, err := sim.Pay(ks.MchID, req.PaymentNo, wechatpaysim.PayOptions{OpenID: "o-buyer-9"}); err != nil {
			t.Fatal(err)
		}
		raw := in.wait(t, 1)
		n, err := gw.DecodeNotification(ctx, raw)
		if err != nil {
			t.Fatalf("public key %v: genuine notification: %v", publicKey, err)
		}
		if n.PaymentNo != req.PaymentNo || n.State != payment.TradePaid || n.TotalAmount != 990 || n.TradeNo == "" ||
			n.BuyerID != "o-buyer-9" || n.NotifyID == "" || n.PaidAt.IsZero() || n.SellerID != ks.MchID {
			t.Fatalf("decoded %+v", n)
		}
		if err := payment.CheckNotification(n, payment.Payment{PaymentNo: req.PaymentNo, Amount: 990}); err != nil {
			t.Fatalf("the decoded notification does not check against its payment: %v", err)
		}

		tampered := raw
		tampered.Body = bytes.Replace(raw.Body, []byte(`"`), []byte(` "`), 1)
		wantRefused(t, gw, "a body changed", tampered, payment.EBADSIGNATURE)
		noHeaders := raw
		noHeaders.Header = http.Header{}
		wantRefused(t, gw, "no signature headers", noHeaders, payment.EBADSIGNATURE)

		if _, err := sim.ReplayNotification(n.NotifyID, 6*time.Minute); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, gw, "a replay signed six minutes ago", in.wait(t, 2), payment.EBADSIGNATURE)
		if _, err := sim.ProbeNotification(n.NotifyID); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, gw, "a signature probe", in.wait(t, 3), payment.EBADSIGNATURE)
	}
}

// Another merchant's notification, genuinely signed by WeChat Pay and encrypted with
// that merchant's APIv3 key, never decodes for this one.
func TestAnotherMerchantsNotificationIsRefused(t *testing.T) {
	in := &inbox{}
	notify := httptest.NewServer(in)
	t.Cleanup(notify.Close)
	sim, srv := simtest.Start(t, nil)
	ks := simtest.Keys(t)
	other, err := wechatpaysim.GenerateKeys("1900000002", "wx00000000000002", 2048)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.AddMerchant(other.Merchant()); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetNotifySigner(other.MchID, wechatpaysim.SignerPublicKey); err != nil {
		t.Fatal(err)
	}
	cfgOf := func(k wechatpaysim.KeySet) wechatpay.Config {
		return wechatpay.Config{MchID: k.MchID, AppID: k.AppID, MerchantSerialNo: k.MerchantSerialNo,
			MerchantPrivateKeyPEM: k.MerchantPrivateKeyPEM, APIv3Key: k.APIv3Key, BaseURL: srv.URL,
			NotifyURL: notify.URL + "/callbacks/wechatpay", PublicKeyPEM: ks.PublicKeyPEM, PublicKeyID: ks.PublicKeyID}
	}
	mine, err := wechatpay.New(context.Background(), cfgOf(ks))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := wechatpay.New(context.Background(), cfgOf(other))
	if err != nil {
		t.Fatal(err)
	}
	req := tradeRequest("P20261207other001", payment.MethodWechatNative)
	if _, err := theirs.Open(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Pay(other.MchID, req.PaymentNo, wechatpaysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	raw := in.wait(t, 1)
	if _, err := theirs.DecodeNotification(context.Background(), raw); err != nil {
		t.Fatalf("the other merchant's own gateway: %v", err)
	}
	wantRefused(t, mine, "another merchant's notification", raw, payment.EBADSIGNATURE)
}

func wantRefused(t *testing.T, gw *wechatpay.Gateway, name string, raw payment.RawNotification, code string) {
	t.Helper()
	n, err := gw.DecodeNotification(context.Background(), raw)
	if payment.ErrorCode(err) != code {
		t.Fatalf("%s: decoded %+v, %v; want refused %s", name, n, err, code)
	}
}

// While a merchant switches to the WeChat Pay public key, WeChat Pay signs some
// notifications with the platform certificate and some with the public key, each naming
// its key in Wechatpay-Serial: a gateway with PlatformCertificatesToo verifies both; one
// on the public key alone refuses the platform-signed one.
func TestNotificationsDuringASwitchToThePublicKey(t *testing.T) {
	in := &inbox{}
	notify := httptest.NewServer(in)
	t.Cleanup(notify.Close)
	sim, srv := simtest.Start(t, nil)
	ks := simtest.Keys(t)
	cfg := wechatpay.Config{MchID: ks.MchID, AppID: ks.AppID, MerchantSerialNo: ks.MerchantSerialNo,
		MerchantPrivateKeyPEM: ks.MerchantPrivateKeyPEM, APIv3Key: ks.APIv3Key, BaseURL: srv.URL,
		NotifyURL: notify.URL + "/callbacks/wechatpay", PublicKeyPEM: ks.PublicKeyPEM, PublicKeyID: ks.PublicKeyID}
	alone, err := wechatpay.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.PlatformCertificatesToo = true
	switching, err := wechatpay.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, signer := range []string{wechatpaysim.SignerPlatform, wechatpaysim.SignerPublicKey} {
		if err := sim.SetNotifySigner(ks.MchID, signer); err != nil {
			t.Fatal(err)
		}
		req := tradeRequest("P20261207switch0"+string(rune('1'+i)), payment.MethodWechatNative)
		if _, err := switching.Open(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if _, err := sim.Pay(ks.MchID, req.PaymentNo, wechatpaysim.PayOptions{}); err != nil {
			t.Fatal(err)
		}
		raw := in.wait(t, i+1)
		if n, err := switching.DecodeNotification(context.Background(), raw); err != nil || n.PaymentNo != req.PaymentNo {
			t.Fatalf("signed by the %s: %+v %v", signer, n, err)
		}
		_, err := alone.DecodeNotification(context.Background(), raw)
		if signer == wechatpaysim.SignerPlatform && payment.ErrorCode(err) != payment.EBADSIGNATURE {
			t.Fatalf("a gateway on the public key alone took a platform-signed notification: %v", err)
		}
		if signer == wechatpaysim.SignerPublicKey && err != nil {
			t.Fatalf("a gateway on the public key alone: %v", err)
		}
	}
}

// A notification read back from where it was recorded (Recorded) is verified again
// without the five-minute window, which guards its receipt only: a genuine delivery
// signed six minutes ago decodes then, never on receipt; a probe or a changed body never
// does. A refund's notification decodes as a refund (out_refund_no, the refund's amount),
// which nothing takes as a payment.
func TestRecordedNotificationsAndRefunds(t *testing.T) {
	in := &inbox{}
	notify := httptest.NewServer(in)
	t.Cleanup(notify.Close)
	sim, srv := simtest.Start(t, nil)
	ks := simtest.Keys(t)
	gw, err := wechatpay.New(context.Background(), wechatpay.Config{MchID: ks.MchID, AppID: ks.AppID,
		MerchantSerialNo: ks.MerchantSerialNo, MerchantPrivateKeyPEM: ks.MerchantPrivateKeyPEM, APIv3Key: ks.APIv3Key,
		BaseURL: srv.URL, NotifyURL: notify.URL + "/callbacks/wechatpay"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := tradeRequest("P20261207record01", payment.MethodWechatNative)
	if _, err := gw.Open(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Pay(ks.MchID, req.PaymentNo, wechatpaysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	first, err := gw.DecodeNotification(ctx, in.wait(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.ReplayNotification(first.NotifyID, 6*time.Minute); err != nil {
		t.Fatal(err)
	}
	old := in.wait(t, 2)
	wantRefused(t, gw, "a delivery signed six minutes ago, on receipt", old, payment.EBADSIGNATURE)
	old.Recorded = true
	if n, err := gw.DecodeNotification(ctx, old); err != nil || n.NotifyID != first.NotifyID || n.State != payment.TradePaid {
		t.Fatalf("the same delivery read back from the inbox: %+v, %v; want it decoded", n, err)
	}
	tampered := old
	tampered.Body = bytes.Replace(old.Body, []byte(`"`), []byte(` "`), 1)
	wantRefused(t, gw, "a recorded body changed", tampered, payment.EBADSIGNATURE)
	if _, err := sim.ProbeNotification(first.NotifyID); err != nil {
		t.Fatal(err)
	}
	probe := in.wait(t, 3)
	probe.Recorded = true
	wantRefused(t, gw, "a recorded signature probe", probe, payment.EBADSIGNATURE)
	if len(wechatpay.SignedHeaders(probe.Header)) != 5 {
		t.Fatalf("signed headers %v: want the timestamp, nonce, signature, serial and signature type", wechatpay.SignedHeaders(probe.Header))
	}

	r, err := sim.ConsoleRefund(ks.MchID, req.PaymentNo, wechatpaysim.ConsoleRefund{Refund: 300})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.SettleRefund(ks.MchID, r.OutRefundNo, "SUCCESS"); err != nil {
		t.Fatal(err)
	}
	n, err := gw.DecodeNotification(ctx, in.wait(t, 4))
	if err != nil {
		t.Fatalf("a refund's notification: %v", err)
	}
	if !n.IsRefund() || n.OutBizNo != r.OutRefundNo || n.RefundFee != 300 || n.TotalAmount != 990 || n.PaymentNo != req.PaymentNo ||
		n.State == payment.TradePaid || n.AppID != ks.AppID || n.SellerID != ks.MchID {
		t.Fatalf("refund notification decoded %+v; want a refund of 300 of 990 under %s", n, r.OutRefundNo)
	}
}
