package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/payment"
)

func alipayReply(c echo.Context, ok bool) error {
	if ok {
		return c.String(http.StatusOK, "success")
	}
	return c.String(http.StatusOK, "failure")
}

// alipayCallback handles Alipay's asynchronous notification: the inbox verifies and
// records it, and says whether it is paykit's now (success) or must be delivered again
// (failure).
func (s *Server) alipayCallback(c echo.Context) error {
	raw, err := readBody(c)
	if err != nil {
		s.inbox.Unreadable(payment.ChannelAlipay)
		return alipayReply(c, false)
	}
	return alipayReply(c, s.inbox.Receive(c.Request().Context(), raw, requestID(c)))
}

// wechatpayFailure is the body WeChat Pay expects with a status that is not 2xx: it then
// delivers the notification again, freshly signed, on its schedule.
type wechatpayFailure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// wechatpayCallback handles WeChat Pay's notification: the inbox verifies it with its
// headers and exact body and records it, and it is answered 204 once it is paykit's
// (recorded now, or before: a redelivery). Anything else is refused with the status of
// its cause (400 for a notification that does not verify, a signature probe among them;
// 503 when it could not be recorded) and {"code":"FAIL"}, and nothing is recorded.
func (s *Server) wechatpayCallback(c echo.Context) error {
	raw, err := readBody(c)
	if err != nil {
		s.inbox.Unreadable(payment.ChannelWechatPay)
		status, _ := statusFor(err)
		return c.JSON(status, wechatpayFailure{Code: "FAIL", Message: "the body could not be read"})
	}
	err = s.inbox.ReceiveWechatPay(c.Request().Context(), payment.RawNotification{Header: c.Request().Header, Body: raw}, requestID(c))
	if err != nil {
		status, _ := statusFor(err)
		msg := payment.ErrorMessage(err)
		if status >= http.StatusInternalServerError {
			msg = "not recorded; deliver it again"
		}
		return c.JSON(status, wechatpayFailure{Code: "FAIL", Message: msg})
	}
	return c.NoContent(http.StatusNoContent)
}
