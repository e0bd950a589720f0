package gateways

import (
	"context"
	"fmt"
	"net/url"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/wechatpay"
)

// WechatPay builds the gateway of the deployment's WeChat Pay merchant, its calls on
// paykit's own initiative taken from limiter under its mchid as an Alipay app's are
// under its app_id (nil: no limit). New verifies the answers with the WeChat Pay public
// key, or fetches the platform certificates now. cashierBase, if set, replaces the
// scheme and host of an H5 payment's h5_url (WECHATPAY_CASHIER_BASE_URL).
func WechatPay(ctx context.Context, cfg wechatpay.Config, limiter Limiter, cashierBase string) (Merchant, error) {
	wx, err := wechatpay.New(ctx, cfg)
	if err != nil {
		return Merchant{}, err
	}
	var gw payment.Gateway = wx
	if cashierBase != "" {
		base, err := url.Parse(cashierBase)
		if err != nil || base.Host == "" {
			return Merchant{}, fmt.Errorf("WECHATPAY_CASHIER_BASE_URL=%q is not an absolute URL", cashierBase)
		}
		gw = cashierRewrite{Gateway: wx, base: base}
	}
	return Merchant{ID: cfg.MchID, AppID: cfg.AppID, SellerID: cfg.MchID, Gateway: Limited(gw, cfg.MchID, limiter)}, nil
}
