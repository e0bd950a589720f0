package gateways_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/paykit/paykit/gateways"
	"github.com/paykit/paykit/gateways/gatewaystest"
	"github.com/paykit/paykit/payment"
)

// alipayApps is an Alipay channel whose every answer names the app it was asked about.
type alipayApps struct{}

func (alipayApps) For(context.Context, string) (payment.App, error) {
	return payment.App{ID: "2021A", AppID: "2021A", Gateway: gatewaystest.Named{App: "2021A"}}, nil
}
func (alipayApps) ForPayment(_ context.Context, _, appID string) (payment.App, error) {
	return payment.App{ID: appID, AppID: appID, Gateway: gatewaystest.Named{App: appID}}, nil
}
func (alipayApps) ForApp(_ context.Context, appID string) (payment.Gateway, error) {
	return gatewaystest.Named{App: appID}, nil
}

// Channels routes each call to the channel it names (a payment from before its channel
// was recorded to Alipay), the WeChat Pay merchant serves its own mchid only, and a
// channel the deployment is not configured for is refused as such.
func TestChannelsRouteByChannel(t *testing.T) {
	ctx := context.Background()
	merchant := gateways.Merchant{ID: "1230000109", AppID: "wxapp", SellerID: "1230000109", Gateway: gatewaystest.Named{App: "wechat"}}
	both := gateways.Channels{payment.ChannelAlipay: alipayApps{}, payment.ChannelWechatPay: merchant}
	alipayOnly := gateways.Channels{payment.ChannelAlipay: alipayApps{}}

	named := func(t *testing.T, gw payment.Gateway, err error, want string) {
		t.Helper()
		if err != nil || gw == nil || gw.(gatewaystest.Named).App != want {
			t.Fatalf("gateway %v (%v), want %s's", gw, err, want)
		}
	}
	t.Run("for", func(t *testing.T) {
		for ch, want := range map[payment.Channel]string{payment.ChannelAlipay: "2021A", "": "2021A", payment.ChannelWechatPay: "wechat"} {
			app, err := both.For(ctx, "t1", ch)
			named(t, app.Gateway, err, want)
		}
		if app, _ := both.For(ctx, "t1", payment.ChannelWechatPay); app.ID != "1230000109" || app.AppID != "wxapp" || app.SellerID != "1230000109" {
			t.Fatalf("the WeChat Pay merchant's app %+v: want ID and seller its mchid, AppID its appid", app)
		}
	})
	t.Run("for payment", func(t *testing.T) {
		app, err := both.ForPayment(ctx, "t1", "", "2021OLD")
		named(t, app.Gateway, err, "2021OLD")
		app, err = both.ForPayment(ctx, "t1", payment.ChannelWechatPay, "1230000109")
		named(t, app.Gateway, err, "wechat")
		// A payment that recorded another merchant is not this one's to serve.
		if _, err := both.ForPayment(ctx, "t1", payment.ChannelWechatPay, "1999999999"); !errors.Is(err, payment.ErrNotFound) {
			t.Fatalf("another mchid: %v, want not found", err)
		}
	})
	t.Run("for app", func(t *testing.T) {
		gw, err := both.ForApp(ctx, payment.ChannelAlipay, "2021B")
		named(t, gw, err, "2021B")
		gw, err = both.ForApp(ctx, payment.ChannelWechatPay, "")
		named(t, gw, err, "wechat")
		gw, err = both.ForApp(ctx, payment.ChannelWechatPay, "1230000109")
		named(t, gw, err, "wechat")
		if _, err := both.ForApp(ctx, payment.ChannelWechatPay, "1999999999"); !errors.Is(err, payment.ErrNotFound) {
			t.Fatalf("another mchid: %v, want not found", err)
		}
		gw, err = both.ForNotification(ctx, payment.ChannelWechatPay, payment.RawNotification{Body: []byte(`{"id":"EV-1"}`)})
		named(t, gw, err, "wechat")
		gw, err = both.ForNotification(ctx, payment.ChannelAlipay, payment.RawNotification{Body: []byte("app_id=2021B")})
		named(t, gw, err, "from-notification")
	})
	t.Run("not configured", func(t *testing.T) {
		if err := both.Offers(payment.ChannelWechatPay); err != nil {
			t.Fatalf("configured WeChat Pay: %v", err)
		}
		if err := alipayOnly.Offers(payment.ChannelAlipay); err != nil {
			t.Fatalf("Alipay: %v", err)
		}
		calls := map[string]func() error{
			"offers": func() error { return alipayOnly.Offers(payment.ChannelWechatPay) },
			"for":    func() error { _, err := alipayOnly.For(ctx, "t1", payment.ChannelWechatPay); return err },
			"for payment": func() error {
				_, err := alipayOnly.ForPayment(ctx, "t1", payment.ChannelWechatPay, "1230000109")
				return err
			},
			"for app": func() error { _, err := alipayOnly.ForApp(ctx, payment.ChannelWechatPay, ""); return err },
			"for notification": func() error {
				_, err := alipayOnly.ForNotification(ctx, payment.ChannelWechatPay, payment.RawNotification{})
				return err
			},
		}
		for name, call := range calls {
			err := call()
			if payment.ErrorCode(err) != payment.EUNPROCESSABLE || !strings.Contains(err.Error(), "WeChat Pay is not configured") {
				t.Errorf("%s: %v, want unprocessable: WeChat Pay is not configured", name, err)
			}
		}
	})
}

// WeChat Pay's FREQUENCY_LIMITED holds the merchant's limited calls as Alipay's 40005
// holds an app's.
func TestLimitedGatewayHearsWechatPayThrottling(t *testing.T) {
	limited := &payment.ChannelError{Op: "wechatpay.transactions.query", Code: "429", SubCode: gateways.SubCodeFrequencyLimited, Retryable: true}
	l := &countingLimiter{}
	if _, err := gateways.Limited(answering{err: limited}, "1230000109", l).Query(context.Background(), "P1"); !errors.Is(err, limited) || l.throttled != 1 {
		t.Fatalf("a 429 FREQUENCY_LIMITED query: %v, %d throttled; want the answer and 1", err, l.throttled)
	}
}

func (a alipayApps) ForNotification(ctx context.Context, raw payment.RawNotification) (payment.Gateway, error) {
	return a.ForApp(ctx, "from-notification")
}
