package alipay

import (
	"context"
	"net/url"
	"sort"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/smartwalle/alipay/v3"
)

// ParseNotificationBody reads the body of an asynchronous notification as Alipay posts it
// (application/x-www-form-urlencoded). Alipay never sends a parameter twice, and a form
// that does is refused before any signature is checked: which of two values a verifier
// signs and which one the code reads must never be a question.
func ParseNotificationBody(raw []byte) (url.Values, error) {
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		return nil, &payment.Error{Code: payment.EINVALID, Message: "notification body is not a form", Err: err}
	}
	if len(form) == 0 {
		return nil, payment.Errorf(payment.EINVALID, "notification body is empty")
	}
	if err := refuseRepeated(form); err != nil {
		return nil, err
	}
	return form, nil
}

// refuseRepeated is EINVALID naming the first parameter (in sorted order) that form
// carries more than once.
func refuseRepeated(form url.Values) error {
	var repeated []string
	for k, vs := range form {
		if len(vs) > 1 {
			repeated = append(repeated, k)
		}
	}
	if len(repeated) == 0 {
		return nil
	}
	sort.Strings(repeated)
	return payment.Errorf(payment.EINVALID, "notification repeats parameter %q", repeated[0])
}

// DecodeNotification implements payment.Gateway: the body is the notification's form
// (ParseNotificationBody), decoded by DecodeForm.
func (g *Gateway) DecodeNotification(ctx context.Context, raw payment.RawNotification) (payment.Notification, error) {
	form, err := ParseNotificationBody(raw.Body)
	if err != nil {
		return payment.Notification{}, err
	}
	return g.DecodeForm(ctx, form)
}

// DecodeForm verifies an asynchronous notification form (signature over every
// field but sign and sign_type) and checks that it is addressed to this app_id and
// seller_id. Signature failures are EBADSIGNATURE, foreign app or seller EUNPROCESSABLE,
// malformed fields EINVALID. It does not check out_trade_no or the amount against a
// payment: payment.CheckNotification does.
func (g *Gateway) DecodeForm(ctx context.Context, form url.Values) (payment.Notification, error) {
	if err := checkSigned(form); err != nil {
		return payment.Notification{}, err
	}
	n, err := g.client.DecodeNotification(ctx, form)
	if err != nil {
		return payment.Notification{}, &payment.Error{Code: payment.EBADSIGNATURE, Message: "notification signature did not verify", Err: err}
	}
	if err := g.checkOurs(n); err != nil {
		return payment.Notification{}, err
	}
	return g.decodeFields(n)
}

// checkSigned refuses a form with a repeated parameter, without a signature, or signed
// otherwise than RSA2, before its signature is checked.
func checkSigned(form url.Values) error {
	if err := refuseRepeated(form); err != nil {
		return err
	}
	if len(form) == 0 || form.Get("sign") == "" {
		return payment.Errorf(payment.EBADSIGNATURE, "notification is not signed")
	}
	if st := form.Get("sign_type"); st != "" && st != "RSA2" {
		return payment.Errorf(payment.EBADSIGNATURE, "notification sign_type %q is not RSA2", st)
	}
	return nil
}

// checkOurs refuses a verified notification of another app or seller, or without the
// ids that place it.
func (g *Gateway) checkOurs(n *alipay.Notification) error {
	if n.AppId != g.appID {
		return payment.Errorf(payment.EUNPROCESSABLE, "notification app_id %q is not ours", n.AppId)
	}
	if n.SellerId != g.sellerID {
		return payment.Errorf(payment.EUNPROCESSABLE, "notification seller_id %q is not ours", n.SellerId)
	}
	if n.NotifyId == "" || n.OutTradeNo == "" {
		return payment.Errorf(payment.EINVALID, "notification lacks notify_id or out_trade_no")
	}
	return nil
}

// decodeFields parses the verified notification's state, amounts and times.
func (g *Gateway) decodeFields(n *alipay.Notification) (payment.Notification, error) {
	state, ok := tradeState(n.TradeStatus)
	if !ok {
		return payment.Notification{}, payment.Errorf(payment.EINVALID, "notification trade_status %q is unknown", n.TradeStatus)
	}
	total, err := payment.ParseYuan(n.TotalAmount)
	if err != nil {
		return payment.Notification{}, &payment.Error{Code: payment.EINVALID, Message: "notification total_amount is malformed", Err: err}
	}
	notifyTime, err := g.parseTime(n.NotifyTime)
	if err != nil {
		return payment.Notification{}, &payment.Error{Code: payment.EINVALID, Message: "notification notify_time is malformed", Err: err}
	}
	paidAt, err := g.parseTime(n.GmtPayment)
	if err != nil {
		return payment.Notification{}, &payment.Error{Code: payment.EINVALID, Message: "notification gmt_payment is malformed", Err: err}
	}
	out := notificationFrom(n, state, total, notifyTime, paidAt)
	if n.RefundFee != "" {
		if out.RefundFee, err = payment.ParseYuan(n.RefundFee); err != nil {
			return payment.Notification{}, &payment.Error{Code: payment.EINVALID, Message: "notification refund_fee is malformed", Err: err}
		}
	}
	return out, nil
}

func notificationFrom(n *alipay.Notification, state payment.TradeState, total payment.Amount, notifyTime, paidAt time.Time) payment.Notification {
	return payment.Notification{
		NotifyID:    n.NotifyId,
		NotifyType:  n.NotifyType,
		NotifyTime:  notifyTime,
		AppID:       n.AppId,
		SellerID:    n.SellerId,
		BuyerID:     n.BuyerId,
		TradeNo:     n.TradeNo,
		PaymentNo:   n.OutTradeNo,
		TradeStatus: string(n.TradeStatus),
		State:       state,
		TotalAmount: total,
		PaidAt:      paidAt,
		OutBizNo:    n.OutBizNo,
		GmtRefund:   n.GmtRefund,
	}
}

// parseTime parses a China-time timestamp; empty is the zero time.
func (g *Gateway) parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.ParseInLocation(timeLayout, s, g.loc)
}
