// Package wechatpay is the WeChat Pay (API v3, direct merchant) adapter, on gopay's
// wechat/v3 client. It opens the trades of the WeChat methods (Native, JSAPI, H5, App),
// queries and closes them, and never takes an answer as WeChat's word unless gopay
// verified its signature: gopay answers a non-2xx with err == nil (Code set), and a 2xx
// whose signature fails with the parsed answer and an error; the adapter turns both into
// *payment.ChannelError. Refunds and bills are the channel's next part: Refund and
// QueryRefund refuse, calling nothing.
package wechatpay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-pay/gopay"
	wechat "github.com/go-pay/gopay/wechat/v3"

	"github.com/paykit/paykit/payment"
)

// ProductionBaseURL is WeChat Pay's API host.
const ProductionBaseURL = "https://api.mch.weixin.qq.com"

// Config is one WeChat Pay merchant (mchid) and the app (appid) its payments are for.
type Config struct {
	MchID string
	AppID string
	// MerchantSerialNo is the serial of the merchant's API certificate, and
	// MerchantPrivateKeyPEM its key (PKCS#1 or PKCS#8): requests are signed with it.
	MerchantSerialNo      string
	MerchantPrivateKeyPEM string
	// APIv3Key (32 bytes) decrypts the platform certificates and the notifications.
	APIv3Key string
	// PublicKeyPEM and PublicKeyID (PUB_KEY_ID_…) are the WeChat Pay public key that
	// answers are verified with. Without them the platform certificates are fetched from
	// GET /v3/certificates at New, and again when an answer names another serial.
	PublicKeyPEM string
	PublicKeyID  string
	// PlatformCertificatesToo, with the public key, fetches the platform certificates as
	// well: while a merchant switches to the public key, WeChat Pay signs some
	// notifications with either, and each names its key in Wechatpay-Serial.
	PlatformCertificatesToo bool
	// BaseURL replaces ProductionBaseURL (a simulator, a proxy).
	BaseURL string
	// NotifyURL is where WeChat Pay sends the merchant's notifications.
	NotifyURL string
}

// Gateway is the WeChat Pay channel of one merchant.
type Gateway struct {
	cfg    Config
	client *wechat.ClientV3
	loc    *time.Location
	keys   notifyKeys
}

// New builds the gateway of cfg's merchant, with answer verification on: the public key
// given, or the platform certificates fetched now.
func New(ctx context.Context, cfg Config) (*Gateway, error) {
	if cfg.MchID == "" || cfg.AppID == "" || cfg.MerchantSerialNo == "" || cfg.MerchantPrivateKeyPEM == "" {
		return nil, errors.New("wechatpay: MchID, AppID, MerchantSerialNo and MerchantPrivateKeyPEM are required")
	}
	if len(cfg.APIv3Key) != 32 {
		return nil, fmt.Errorf("wechatpay: the APIv3 key is %d bytes, want 32", len(cfg.APIv3Key))
	}
	if u, err := url.Parse(cfg.NotifyURL); err != nil || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("wechatpay: NotifyURL %q must be an absolute URL without a query", cfg.NotifyURL)
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = ProductionBaseURL
	}
	c, err := wechat.NewClientV3(cfg.MchID, cfg.MerchantSerialNo, cfg.APIv3Key, cfg.MerchantPrivateKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("wechatpay: client: %w", err)
	}
	c.SetProxyHost(cfg.BaseURL)
	if err := verifyAnswers(c, cfg); err != nil {
		return nil, err
	}
	return &Gateway{cfg: cfg, client: c, loc: time.FixedZone("CST", 8*3600)}, nil
}

// verifyAnswers turns on gopay's verification of every answer: with the platform
// certificates (fetched now), the WeChat Pay public key, or both during a switch (the
// public key last, so that requests name it and answers are signed with it).
func verifyAnswers(c *wechat.ClientV3, cfg Config) error {
	if cfg.PublicKeyPEM == "" || cfg.PlatformCertificatesToo {
		if err := c.AutoVerifySign(false); err != nil {
			return fmt.Errorf("wechatpay: fetch the platform certificates: %w", err)
		}
	}
	if cfg.PublicKeyPEM == "" {
		return nil
	}
	if !strings.HasPrefix(cfg.PublicKeyID, "PUB_KEY_ID_") {
		return fmt.Errorf("wechatpay: PublicKeyID %q must start with PUB_KEY_ID_", cfg.PublicKeyID)
	}
	if err := c.AutoVerifySignByPublicKey([]byte(cfg.PublicKeyPEM), cfg.PublicKeyID); err != nil {
		return fmt.Errorf("wechatpay: the WeChat Pay public key: %w", err)
	}
	return nil
}

// SignedHandOff implements payment.Gateway: every WeChat method's hand-off comes from
// WeChat Pay's answer to placing the order (Open).
func (g *Gateway) SignedHandOff(context.Context, payment.TradeRequest) (payment.HandOff, bool, error) {
	return payment.HandOff{}, false, nil
}

// Open implements payment.Gateway: it places the order of req.Method and returns the
// buyer's hand-off. WeChat Pay answers a repeat with the same parameters as the first
// (out_trade_no is the key), so a retry places no second order.
func (g *Gateway) Open(ctx context.Context, req payment.TradeRequest) (payment.HandOff, error) {
	bm, err := g.orderBody(req)
	if err != nil {
		return payment.HandOff{}, err
	}
	switch req.Method {
	case payment.MethodWechatNative:
		rsp, err := g.client.V3TransactionNative(ctx, bm)
		if rsp == nil {
			return payment.HandOff{}, transportError(opNative, err)
		}
		if err := answerError(opNative, rsp.Code, rsp.ErrResponse, err); err != nil {
			return payment.HandOff{}, err
		}
		return payment.HandOff{QRCode: rsp.Response.CodeUrl}, nonEmpty(opNative, "code_url", rsp.Response.CodeUrl)
	case payment.MethodWechatH5:
		rsp, err := g.client.V3TransactionH5(ctx, bm)
		if rsp == nil {
			return payment.HandOff{}, transportError(opH5, err)
		}
		if err := answerError(opH5, rsp.Code, rsp.ErrResponse, err); err != nil {
			return payment.HandOff{}, err
		}
		return payment.HandOff{PayURL: rsp.Response.H5Url}, nonEmpty(opH5, "h5_url", rsp.Response.H5Url)
	case payment.MethodWechatJSAPI:
		return g.prepay(ctx, opJSAPI, bm, g.client.V3TransactionJsapi, func(id string) (any, error) { return g.client.PaySignOfJSAPI(g.cfg.AppID, id) })
	case payment.MethodWechatApp:
		return g.prepay(ctx, opApp, bm, g.client.V3TransactionApp, func(id string) (any, error) { return g.client.PaySignOfApp(g.cfg.AppID, id) })
	}
	return payment.HandOff{}, invalidRequest("wechatpay.open", fmt.Errorf("method %q is not WeChat Pay's", req.Method))
}

// prepay places a JSAPI or App order and signs the parameters the buyer's page or app
// hands to WeChat with its prepay_id: the hand-off's OrderString, as JSON.
func (g *Gateway) prepay(ctx context.Context, op string, bm gopay.BodyMap,
	place func(context.Context, gopay.BodyMap) (*wechat.PrepayRsp, error), sign func(string) (any, error)) (payment.HandOff, error) {
	rsp, err := place(ctx, bm)
	if rsp == nil {
		return payment.HandOff{}, transportError(op, err)
	}
	if err := answerError(op, rsp.Code, rsp.ErrResponse, err); err != nil {
		return payment.HandOff{}, err
	}
	if err := nonEmpty(op, "prepay_id", rsp.Response.PrepayId); err != nil {
		return payment.HandOff{}, err
	}
	params, err := sign(rsp.Response.PrepayId)
	if err != nil {
		return payment.HandOff{}, invalidRequest(op, fmt.Errorf("sign the pay parameters: %w", err))
	}
	b, err := json.Marshal(params)
	if err != nil {
		return payment.HandOff{}, invalidRequest(op, err)
	}
	return payment.HandOff{OrderString: string(b)}, nil
}

// orderBody is the body of an order: time_expire never later than the local expiry.
func (g *Gateway) orderBody(req payment.TradeRequest) (gopay.BodyMap, error) {
	if req.Amount <= 0 {
		return nil, invalidRequest("wechatpay.open", fmt.Errorf("amount %d fen: must be positive", req.Amount))
	}
	if n := len(req.PaymentNo); n < 6 || n > 32 {
		return nil, invalidRequest("wechatpay.open", fmt.Errorf("out_trade_no %q: WeChat Pay takes 6 to 32 characters", req.PaymentNo))
	}
	bm := make(gopay.BodyMap)
	bm.Set("appid", g.cfg.AppID).
		Set("mchid", g.cfg.MchID).
		Set("description", truncateRunes(req.Subject, 127)).
		Set("out_trade_no", req.PaymentNo).
		Set("notify_url", g.cfg.NotifyURL).
		SetBodyMap("amount", func(b gopay.BodyMap) { b.Set("total", int64(req.Amount)).Set("currency", "CNY") })
	if !req.ExpireAt.IsZero() {
		bm.Set("time_expire", req.ExpireAt.In(g.loc).Truncate(time.Second).Format(time.RFC3339))
	}
	switch req.Method {
	case payment.MethodWechatJSAPI:
		if req.OpenID == "" {
			return nil, invalidRequest(opJSAPI, errors.New("a JSAPI payment needs the payer's openid"))
		}
		bm.SetBodyMap("payer", func(b gopay.BodyMap) { b.Set("openid", req.OpenID) })
	case payment.MethodWechatH5:
		if req.ClientIP == "" {
			return nil, invalidRequest(opH5, errors.New("an H5 payment needs the buyer's IP address"))
		}
		bm.SetBodyMap("scene_info", func(b gopay.BodyMap) {
			b.Set("payer_client_ip", req.ClientIP).SetBodyMap("h5_info", func(h gopay.BodyMap) { h.Set("type", "Wap") })
		})
	}
	return bm, nil
}

// truncateRunes keeps the first n characters of s.
func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
