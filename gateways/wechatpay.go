package gateways

import (
	"context"

	"github.com/paykit/paykit/wechatpay"
)

// WechatPay builds the gateway of the deployment's WeChat Pay merchant, its calls on
// paykit's own initiative taken from limiter under its mchid as an Alipay app's are
// under its app_id (nil: no limit). New verifies the answers with the WeChat Pay public
// key, or fetches the platform certificates now.
func WechatPay(ctx context.Context, cfg wechatpay.Config, limiter Limiter) (Merchant, error) {
	gw, err := wechatpay.New(ctx, cfg)
	if err != nil {
		return Merchant{}, err
	}
	return Merchant{ID: cfg.MchID, AppID: cfg.AppID, SellerID: cfg.MchID, Gateway: Limited(gw, cfg.MchID, limiter)}, nil
}
