package inbox

import (
	"context"
	"errors"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/wechatpay"
)

// ReceiveWechatPay takes a WeChat Pay notification as it arrived (its headers and the
// exact bytes of its body) and returns nil once it is paykit's: verified by the
// deployment's WeChat Pay merchant (the signature, the five-minute window, a signature
// probe refused, the resource decrypted and addressed to the merchant) and recorded in
// the inbox with the headers its signature needs, or recorded before (a redelivery). From
// then on it is handed to its payment as an Alipay notification is; a refund's is named a
// refund_unknown anomaly there, until WeChat Pay's refunds are paykit's. Anything else is
// an error, refused with nothing recorded: EBADSIGNATURE or EINVALID for a notification
// that does not verify (WeChat Pay delivers a genuine one again, freshly signed), the
// channel's EUNPROCESSABLE when the deployment has no merchant, EUNAVAILABLE when it could
// not be recorded. requestID names the request in log lines.
func (ib *Inbox) ReceiveWechatPay(ctx context.Context, raw payment.RawNotification, requestID string) error {
	n, err := ib.decodeNotification(ctx, payment.ChannelWechatPay, raw)
	if err != nil {
		ib.metrics.wechatpayCallbacks.WithLabelValues("unverified").Inc()
		keep, first := ib.unverified.take(string(payment.ChannelWechatPay), time.Now())
		switch {
		case keep:
			ib.log.ErrorContext(ctx, "wechat pay notification rejected", "request_id", requestID, "raw_len", len(raw.Body), "err", err)
		case first:
			ib.log.WarnContext(ctx, "unverified wechat pay notifications beyond the sample are only counted this minute",
				"per_app_per_minute", unverifiedPerAppPerMinute, "per_minute", unverifiedPerMinute)
		}
		var pe *payment.Error
		if errors.As(err, &pe) {
			return err
		}
		return &payment.Error{Code: payment.EUNAVAILABLE, Message: "the notification could not be verified right now", Err: err}
	}
	if n.IsRefund() {
		ib.log.WarnContext(ctx, "wechat pay refund notification: recorded, and an anomaly once handed over (wechat pay refunds are not paykit's yet)",
			"request_id", requestID, "notify_id", n.NotifyID, "payment_no", n.PaymentNo, "out_refund_no", n.OutBizNo, "refund_fen", int64(n.RefundFee))
	}
	kept := payment.RawNotification{Header: wechatpay.SignedHeaders(raw.Header), Body: raw.Body}
	if !ib.record(ctx, payment.ChannelWechatPay, kept, n) {
		return &payment.Error{Code: payment.EUNAVAILABLE, Message: "the notification could not be recorded; deliver it again"}
	}
	return nil
}
