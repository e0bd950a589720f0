package system

import (
	"context"
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/payment"
	wxsimtest "github.com/paykit/paykit/wechatpaysim/simtest"
)

// Without WECHATPAY_MCHID the gateways offer Alipay alone and refuse WeChat Pay as not
// configured; with it, every tenant's WeChat Pay payments open on the merchant, whose
// gateway verifies with the WeChat Pay public key (built with no call to WeChat Pay), and
// a payment of another mchid is not its.
func TestNewGatewaysOffersWechatPayOnlyWhenConfigured(t *testing.T) {
	ctx := context.Background()
	ks := wxsimtest.Keys(t)
	load := func(env map[string]string) config.Config {
		t.Helper()
		cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	alipayOnly, err := NewGateways(ctx, load(nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := alipayOnly.Offers(payment.ChannelWechatPay); payment.ErrorCode(err) != payment.EUNPROCESSABLE ||
		!strings.Contains(err.Error(), "WeChat Pay is not configured") {
		t.Fatalf("without WECHATPAY_MCHID: %v, want WeChat Pay not configured", err)
	}
	if err := alipayOnly.Offers(payment.ChannelAlipay); err != nil {
		t.Fatalf("Alipay: %v", err)
	}

	gws, err := NewGateways(ctx, load(map[string]string{
		"WECHATPAY_MCHID": ks.MchID, "WECHATPAY_APPID": ks.AppID, "WECHATPAY_MERCHANT_SERIAL": ks.MerchantSerialNo,
		"WECHATPAY_PRIVATE_KEY": ks.MerchantPrivateKeyPEM, "WECHATPAY_APIV3_KEY": ks.APIv3Key,
		"WECHATPAY_PUBLIC_KEY": ks.PublicKeyPEM, "WECHATPAY_PUBLIC_KEY_ID": ks.PublicKeyID,
		"WECHATPAY_BASE_URL": "http://127.0.0.1:1", "PAYKIT_PUBLIC_URL": "https://pay.example.com",
	}), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	app, err := gws.For(ctx, "t1", payment.ChannelWechatPay)
	if err != nil || app.ID != ks.MchID || app.AppID != ks.AppID || app.SellerID != ks.MchID || app.Gateway == nil {
		t.Fatalf("a WeChat Pay payment opens on %+v (%v), want the merchant %s", app, err, ks.MchID)
	}
	if _, err := gws.ForPayment(ctx, "t1", payment.ChannelWechatPay, "1999999999"); err == nil {
		t.Fatal("a payment of another mchid resolved to this merchant")
	}
}
