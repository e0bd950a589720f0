package alipay

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"strings"

	"github.com/paykit/paykit/payment"
	"github.com/smartwalle/alipay/v3"
)

// Alipay sub_codes the adapter turns into domain outcomes.
const (
	SubCodeTradeNotExist    = "ACQ.TRADE_NOT_EXIST"
	SubCodeTradeStatusError = "ACQ.TRADE_STATUS_ERROR"
	SubCodeTradeHasSuccess  = "ACQ.TRADE_HAS_SUCCESS"
	SubCodeSystemError      = "ACQ.SYSTEM_ERROR"
)

// Operation names used in ChannelError.Op.
const (
	opPagePay     = "alipay.trade.page.pay"
	opPrecreate   = "alipay.trade.precreate"
	opQuery       = "alipay.trade.query"
	opClose       = "alipay.trade.close"
	opRefund      = "alipay.trade.refund"
	opRefundQuery = "alipay.trade.fastpay.refund.query"
)

// subCode normalises the "aop." prefix some gateways put on sub_codes.
func subCode(e alipay.Error) string { return strings.TrimPrefix(e.SubCode, "aop.") }

// retryableAnswer reports whether a failure answer is transient: ACQ.SYSTEM_ERROR, the
// generic "service unavailable" code 20000 (isp.unknow-error), and 40005 (call limit).
func retryableAnswer(e alipay.Error) bool {
	switch subCode(e) {
	case SubCodeSystemError, "isp.unknow-error", "isp.unknown-error":
		return true
	}
	return e.Code == alipay.CodeUnknowError || e.Code == alipay.CodeCallLimited
}

// businessError is the ChannelError for a failure answer.
func businessError(op string, e alipay.Error, cause error) *payment.ChannelError {
	msg := e.SubMsg
	if msg == "" {
		msg = e.Msg
	}
	return &payment.ChannelError{
		Op:        op,
		Code:      string(e.Code),
		SubCode:   e.SubCode,
		Message:   msg,
		Retryable: retryableAnswer(e),
		Err:       cause,
	}
}

// invalidRequest is the ChannelError for a request the adapter refuses to send.
func invalidRequest(op string, err error) *payment.ChannelError {
	return &payment.ChannelError{Op: op, Message: "invalid request", Retryable: false, Err: err}
}

// badAnswer is the ChannelError for a verified answer that makes no sense (an unknown
// trade_status, a malformed amount). Retrying would get the same answer.
func badAnswer(op, msg string, err error) *payment.ChannelError {
	return &payment.ChannelError{Op: op, Message: msg, Retryable: false,
		Err: &payment.Error{Code: payment.EINTERNAL, Message: msg, Err: err}}
}

// callError classifies an error returned by the client library. Nothing here can yield a
// domain outcome: an answer that arrives as an error was not signature-verified.
func callError(op string, err error) *payment.ChannelError {
	var ae *alipay.Error
	if errors.As(err, &ae) && ae != nil {
		if ae.Code.IsSuccess() {
			// A success answer without a signature: never trust it.
			return signatureError(op, err)
		}
		return businessError(op, *ae, err)
	}
	var av alipay.Error
	if errors.As(err, &av) {
		if av.Code.IsSuccess() {
			return signatureError(op, err)
		}
		return businessError(op, av, err)
	}
	if isSignatureError(err) {
		return signatureError(op, err)
	}
	var se *HTTPStatusError
	if errors.As(err, &se) {
		return &payment.ChannelError{Op: op, Message: se.Error(), Err: err,
			Retryable: se.StatusCode >= 500 || se.StatusCode == 429}
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) || errors.Is(err, alipay.ErrBadResponse) {
		return &payment.ChannelError{Op: op, Message: "malformed response", Retryable: true, Err: err}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return &payment.ChannelError{Op: op, Message: "timeout", Retryable: true, Err: err}
	}
	return &payment.ChannelError{Op: op, Message: "transport error", Retryable: true, Err: err}
}

func isSignatureError(err error) bool {
	var b64 base64.CorruptInputError
	return errors.Is(err, rsa.ErrVerification) ||
		errors.Is(err, alipay.ErrAliPublicKeyNotFound) ||
		errors.Is(err, alipay.ErrSignNotFound) ||
		errors.As(err, &b64)
}

// signatureError is a response whose signature did not verify. It is not retryable: it
// means tampering or a wrong Alipay public key, and needs a human.
func signatureError(op string, err error) *payment.ChannelError {
	return &payment.ChannelError{
		Op:        op,
		Message:   "response signature did not verify",
		Retryable: false,
		Err:       &payment.Error{Code: payment.EBADSIGNATURE, Message: "alipay response signature did not verify", Err: err},
	}
}
