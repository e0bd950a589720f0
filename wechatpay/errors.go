package wechatpay

import (
	"errors"
	"fmt"
	"net/http"

	wechat "github.com/go-pay/gopay/wechat/v3"

	"github.com/paykit/paykit/payment"
)

// The operations, as ChannelError.Op names them.
const (
	opNative = "wechatpay.transactions.native"
	opJSAPI  = "wechatpay.transactions.jsapi"
	opH5     = "wechatpay.transactions.h5"
	opApp    = "wechatpay.transactions.app"
	opQuery  = "wechatpay.transactions.query"
	opClose  = "wechatpay.transactions.close"
)

// answerError judges gopay's answer to a call: nil for a 2xx whose signature verified.
// gopay gives a non-2xx as code (the HTTP status) with err == nil, and a 2xx whose
// signature failed as code 0 with an error: that answer is not WeChat's word, and the
// call's outcome is unknown (retried, or asked about with a query).
func answerError(op string, code int, er wechat.ErrResponse, err error) error {
	switch {
	case code == wechat.Success && err == nil:
		return nil
	case code == wechat.Success:
		return &payment.ChannelError{Op: op, SubCode: "ANSWER_NOT_VERIFIED",
			Message: "the answer's signature did not verify; its outcome is unknown", Retryable: true, Err: err}
	}
	return businessError(op, code, er)
}

// businessError is WeChat Pay's refusal, or its failure, as a ChannelError. A 5xx
// (SYSTEM_ERROR: the order may have been taken) and 429 (FREQUENCY_LIMITED) leave the
// outcome unknown and are retried with the same parameters; the other 4xx are refusals
// that nothing was done for.
func businessError(op string, status int, er wechat.ErrResponse) *payment.ChannelError {
	msg := er.Message
	if er.Detail.Issue != "" {
		msg += " (" + er.Detail.Field + ": " + er.Detail.Issue + ")"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &payment.ChannelError{Op: op, Code: fmt.Sprint(status), SubCode: er.Code, Message: msg,
		Retryable: status >= 500 || status == http.StatusTooManyRequests}
}

// transportError is a call that got no answer: its outcome is unknown.
func transportError(op string, err error) *payment.ChannelError {
	if err == nil {
		err = errors.New("no answer")
	}
	return &payment.ChannelError{Op: op, Message: "no answer from wechat pay", Retryable: true, Err: err}
}

// invalidRequest is a request the adapter refuses to send.
func invalidRequest(op string, err error) *payment.ChannelError {
	return &payment.ChannelError{Op: op, SubCode: "INVALID_REQUEST", Message: err.Error(), Retryable: false,
		Err: &payment.Error{Code: payment.EINVALID, Message: err.Error(), Err: err}}
}

// nonEmpty refuses a success answer without the field it exists for.
func nonEmpty(op, field, v string) error {
	if v != "" {
		return nil
	}
	return &payment.ChannelError{Op: op, Message: "success answer without " + field, Retryable: false,
		Err: &payment.Error{Code: payment.EINTERNAL, Message: "success answer without " + field}}
}
