package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
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
		s.inbox.Unreadable()
		return alipayReply(c, false)
	}
	return alipayReply(c, s.inbox.Receive(c.Request().Context(), raw, requestID(c)))
}
