package wechatpay

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	wechat "github.com/go-pay/gopay/wechat/v3"

	"github.com/paykit/paykit/payment"
)

// NotifyWindow is how far a notification's Wechatpay-Timestamp may be from now: WeChat
// Pay signs each delivery afresh, and its own clients refuse one older than five minutes.
const NotifyWindow = 5 * time.Minute

// signatureProbe starts the Wechatpay-Signature of WeChat Pay's signature probes, which
// must be refused like any signature that does not verify.
const signatureProbe = "WECHATPAY/SIGNTEST/"

// certRefresh bounds how often an unknown platform certificate serial makes the gateway
// fetch the certificates again.
const certRefresh = time.Minute

// notifyKeys finds the key of a notification's Wechatpay-Serial: the WeChat Pay public
// key or a platform certificate (both while a merchant switches), fetching the platform
// certificates again, at most once a minute, for a serial it does not know.
type notifyKeys struct {
	mu          sync.Mutex
	lastRefresh time.Time
}

// DecodeNotification verifies a WeChat Pay notification and decrypts it: the signature
// over the raw body with the key its Wechatpay-Serial names, its timestamp within
// NotifyWindow of now (of its receipt: not for a notification read back from the inbox,
// raw.Recorded, whose receipt that window guarded), a signature probe refused, the
// resource decrypted with the APIv3 key and addressed to this merchant and app.
// Signature failures are EBADSIGNATURE, another merchant's notification EUNPROCESSABLE,
// a malformed one EINVALID. A refund's notification (REFUND.*) decodes as one
// (Notification.IsRefund: out_refund_no as OutBizNo, the refund's amount as RefundFee),
// which no payment takes as paid. It does not check out_trade_no or the amount against
// a payment: payment.CheckNotification does.
func (g *Gateway) DecodeNotification(ctx context.Context, raw payment.RawNotification) (payment.Notification, error) {
	if err := g.verifyNotification(raw, time.Now()); err != nil {
		return payment.Notification{}, err
	}
	var env wechat.V3NotifyReq
	if err := json.Unmarshal(raw.Body, &env); err != nil || env.Resource == nil || env.Id == "" {
		return payment.Notification{}, &payment.Error{Code: payment.EINVALID, Message: "notification body is not a WeChat Pay notification", Err: err}
	}
	if strings.HasPrefix(env.EventType, "REFUND.") && env.Resource.OriginalType == "refund" {
		return g.decodeRefund(env)
	}
	if env.EventType != "TRANSACTION.SUCCESS" || env.Resource.OriginalType != "transaction" {
		return payment.Notification{}, &payment.Error{Code: payment.EUNPROCESSABLE,
			Message: fmt.Sprintf("notification %s is a %s, not a payment's", env.Id, env.EventType)}
	}
	if env.Resource.Algorithm != "AEAD_AES_256_GCM" {
		return payment.Notification{}, &payment.Error{Code: payment.EINVALID, Message: "notification resource algorithm " + env.Resource.Algorithm}
	}
	res, err := wechat.V3DecryptPayNotifyCipherText(env.Resource.Ciphertext, env.Resource.Nonce, env.Resource.AssociatedData, g.cfg.APIv3Key)
	if err != nil {
		return payment.Notification{}, &payment.Error{Code: payment.EBADSIGNATURE, Message: "notification resource does not decrypt with the merchant's APIv3 key", Err: err}
	}
	if res.Mchid != g.cfg.MchID || res.Appid != g.cfg.AppID {
		return payment.Notification{}, &payment.Error{Code: payment.EUNPROCESSABLE,
			Message: fmt.Sprintf("notification for merchant %s app %s, not %s app %s", res.Mchid, res.Appid, g.cfg.MchID, g.cfg.AppID)}
	}
	return decodePayment(env, res)
}

// decodeRefund decrypts a refund's notification and maps it into the domain as a refund
// notification of the merchant's app: a refund's resource names the mchid but no appid.
func (g *Gateway) decodeRefund(env wechat.V3NotifyReq) (payment.Notification, error) {
	if env.Resource.Algorithm != "AEAD_AES_256_GCM" {
		return payment.Notification{}, &payment.Error{Code: payment.EINVALID, Message: "notification resource algorithm " + env.Resource.Algorithm}
	}
	res, err := wechat.V3DecryptRefundNotifyCipherText(env.Resource.Ciphertext, env.Resource.Nonce, env.Resource.AssociatedData, g.cfg.APIv3Key)
	if err != nil {
		return payment.Notification{}, &payment.Error{Code: payment.EBADSIGNATURE, Message: "notification resource does not decrypt with the merchant's APIv3 key", Err: err}
	}
	if res.Mchid != g.cfg.MchID {
		return payment.Notification{}, &payment.Error{Code: payment.EUNPROCESSABLE,
			Message: fmt.Sprintf("refund notification for merchant %s, not %s", res.Mchid, g.cfg.MchID)}
	}
	if res.OutRefundNo == "" || res.OutTradeNo == "" {
		return payment.Notification{}, &payment.Error{Code: payment.EINVALID, Message: fmt.Sprintf("refund notification %s without out_refund_no or out_trade_no", env.Id)}
	}
	n := payment.Notification{NotifyID: env.Id, NotifyType: env.EventType, AppID: g.cfg.AppID, SellerID: res.Mchid,
		TradeNo: res.TransactionId, PaymentNo: res.OutTradeNo, TradeStatus: res.RefundStatus,
		OutBizNo: res.OutRefundNo, GmtRefund: res.SuccessTime}
	if res.Amount != nil {
		n.TotalAmount, n.RefundFee = payment.Amount(res.Amount.Total), payment.Amount(res.Amount.Refund)
	}
	if n.NotifyTime, err = time.Parse(time.RFC3339, env.CreateTime); err != nil {
		return payment.Notification{}, &payment.Error{Code: payment.EINVALID, Message: "notification create_time " + env.CreateTime, Err: err}
	}
	return n, nil
}

// decodePayment maps a decrypted payment notification into the domain.
func decodePayment(env wechat.V3NotifyReq, res *wechat.V3DecryptPayResult) (payment.Notification, error) {
	n := payment.Notification{NotifyID: env.Id, NotifyType: env.EventType, AppID: res.Appid, SellerID: res.Mchid,
		TradeNo: res.TransactionId, PaymentNo: res.OutTradeNo, TradeStatus: res.TradeState}
	if res.Payer != nil {
		n.BuyerID = res.Payer.Openid
	}
	if res.Amount != nil {
		n.TotalAmount = payment.Amount(res.Amount.Total)
	}
	var err error
	if n.NotifyTime, err = time.Parse(time.RFC3339, env.CreateTime); err != nil {
		return payment.Notification{}, &payment.Error{Code: payment.EINVALID, Message: "notification create_time " + env.CreateTime, Err: err}
	}
	if res.TradeState != "SUCCESS" || res.TransactionId == "" {
		return payment.Notification{}, &payment.Error{Code: payment.EUNPROCESSABLE,
			Message: fmt.Sprintf("payment notification %s in trade_state %q", env.Id, res.TradeState)}
	}
	n.State = payment.TradePaid
	if n.PaidAt, err = time.Parse(time.RFC3339, res.SuccessTime); err != nil {
		return payment.Notification{}, &payment.Error{Code: payment.EINVALID, Message: "notification success_time " + res.SuccessTime, Err: err}
	}
	return n, nil
}

// verifyNotification checks the signature headers of raw at now, the timestamp's window
// only at its receipt (not raw.Recorded).
func (g *Gateway) verifyNotification(raw payment.RawNotification, now time.Time) error {
	h := raw.Header
	ts, nonce, sig, serial := h.Get(wechat.HeaderTimestamp), h.Get(wechat.HeaderNonce), h.Get(wechat.HeaderSignature), h.Get(wechat.HeaderSerial)
	if ts == "" || nonce == "" || sig == "" || serial == "" {
		return &payment.Error{Code: payment.EBADSIGNATURE, Message: "notification without its Wechatpay signature headers"}
	}
	if t := h.Get("Wechatpay-Signature-Type"); t != "" && t != "WECHATPAY2-SHA256-RSA2048" {
		return &payment.Error{Code: payment.EBADSIGNATURE, Message: "notification signature type " + t}
	}
	if strings.HasPrefix(sig, signatureProbe) {
		return &payment.Error{Code: payment.EBADSIGNATURE, Message: "a WeChat Pay signature probe"}
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return &payment.Error{Code: payment.EBADSIGNATURE, Message: "notification timestamp " + ts, Err: err}
	}
	if d := now.Sub(time.Unix(secs, 0)); !raw.Recorded && (d > NotifyWindow || d < -NotifyWindow) {
		return &payment.Error{Code: payment.EBADSIGNATURE, Message: fmt.Sprintf("notification signed %s from now, outside %s", d.Round(time.Second), NotifyWindow)}
	}
	key, err := g.keyOf(serial)
	if err != nil {
		return &payment.Error{Code: payment.EBADSIGNATURE, Message: "notification signed with key " + serial, Err: err}
	}
	if err := wechat.V3VerifySignByPK(ts, nonce, string(raw.Body), sig, key); err != nil {
		return &payment.Error{Code: payment.EBADSIGNATURE, Message: "notification signature did not verify", Err: err}
	}
	return nil
}

// keyOf is the verifying key of serial: the WeChat Pay public key's ID or a platform
// certificate's serial.
func (g *Gateway) keyOf(serial string) (*rsa.PublicKey, error) {
	if k := g.client.WxPublicKeyMap()[serial]; k != nil {
		return k, nil
	}
	if strings.HasPrefix(serial, "PUB_KEY_ID_") || g.cfg.PublicKeyPEM != "" && !g.cfg.PlatformCertificatesToo {
		return nil, errors.New("not this merchant's WeChat Pay key")
	}
	g.keys.mu.Lock()
	defer g.keys.mu.Unlock()
	if time.Since(g.keys.lastRefresh) < certRefresh {
		return nil, errors.New("unknown platform certificate serial")
	}
	g.keys.lastRefresh = time.Now()
	// Fetching the certificates makes the newest one the serial requests name; a
	// merchant on the public key keeps naming it.
	named := g.client.WxSerialNo
	if err := g.client.AutoVerifySign(false); err != nil {
		return nil, fmt.Errorf("fetch the platform certificates: %w", err)
	}
	if g.cfg.PublicKeyPEM != "" {
		g.client.WxSerialNo = named
	}
	if k := g.client.WxPublicKeyMap()[serial]; k != nil {
		return k, nil
	}
	return nil, errors.New("unknown platform certificate serial")
}

// SignedHeaders are the headers of a notification that its signature covers or names,
// which verify it again with its body: the only ones to keep with it.
func SignedHeaders(h http.Header) http.Header {
	kept := http.Header{}
	for _, k := range []string{wechat.HeaderTimestamp, wechat.HeaderNonce, wechat.HeaderSignature, wechat.HeaderSerial, "Wechatpay-Signature-Type"} {
		if v := h.Values(k); len(v) > 0 {
			kept[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
		}
	}
	return kept
}
