package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/checkout"
	"github.com/paykit/paykit/payment"
)

// CreatePaymentRequest is the body of POST /v1/payments.
type CreatePaymentRequest = checkout.Request

// createCheckoutToken issues the entry layer's one-time token. The checkout page embeds
// it; a double click or a resubmitted form presents it twice and only one use passes.
func (s *Server) createCheckoutToken(c echo.Context) error {
	var req struct {
		OrderID string `json:"order_id"`
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeStrict(body, &req); err != nil {
			return err
		}
	}
	if req.OrderID != "" {
		if err := payment.ValidateOrderID(req.OrderID); err != nil {
			return err
		}
	}
	if s.cache == nil {
		return payment.Errorf(payment.EUNAVAILABLE, "checkout tokens need Redis, which is not configured")
	}
	tok, wait, err := s.cache.IssueToken(c.Request().Context(), tenantIDOf(c), req.OrderID, s.cfg.CheckoutTokenTTL, s.cfg.Limits.MaxOpenCheckoutTokens)
	if err != nil {
		return &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot issue a checkout token right now", Err: err}
	}
	if tok == "" {
		s.metrics.rateLimited.WithLabelValues(tenantIDOf(c), "open_checkout_tokens").Inc()
		return rateLimited(c, wait, "the tenant holds as many unspent checkout tokens as it may; spend some or wait for them to expire")
	}
	return c.JSON(http.StatusCreated, map[string]any{
		"checkout_token": tok,
		"order_id":       req.OrderID,
		"expires_in":     int(s.cfg.CheckoutTokenTTL.Seconds()),
	})
}

// createPayment is the checkout (package checkout), under the Idempotency-Key protocol
// of payments.
func (s *Server) createPayment(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	pay := func(idemKey string) (int, []byte, error) {
		var req CreatePaymentRequest
		if err := decodeStrict(body, &req); err != nil {
			return 0, nil, err
		}
		res, err := s.checkout.Pay(c.Request().Context(), tenantIDOf(c), req, idemKey)
		if err != nil {
			if payment.ErrorCode(err) == payment.EFINISHING {
				c.Response().Header().Set("Retry-After", "1")
			}
			return 0, nil, err
		}
		out, err := json.Marshal(res)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, out, nil
	}
	key := c.Request().Header.Get("Idempotency-Key")
	if key == "" {
		status, resp, err := pay("")
		if err != nil {
			return err
		}
		return c.JSONBlob(status, resp)
	}
	return s.idem.run(c, key, body, func() (int, []byte, error) { return pay(key) })
}

// noFault reports whether a failed checkout was no fault of the client's, so that its
// one-time token is given back for the retry: a 5xx, or a run of the order still ending.
func noFault(err error) bool {
	st, _ := statusFor(err)
	return st >= 500 || payment.ErrorCode(err) == payment.EFINISHING
}

func (s *Server) getPayment(c echo.Context) error {
	no := c.Param("payment_no")
	if err := payment.ValidatePaymentNo(no); err != nil {
		return err
	}
	p, err := s.store.GetTenantPayment(c.Request().Context(), tenantIDOf(c), no)
	if err != nil {
		if errors.Is(err, payment.ErrNotFound) {
			return payment.Errorf(payment.ENOTFOUND, "no payment %s", no)
		}
		return &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot read the payment right now", Err: err}
	}
	v := paymentView{Payment: p}
	if p.Status == payment.StatusPending {
		link, err := s.store.PendingPayLink(c.Request().Context(), p.TenantID, p.PaymentNo)
		if err != nil {
			return &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot read the payment right now", Err: err}
		}
		v.setPayLink(p.Method, link)
	}
	return c.JSON(http.StatusOK, v)
}

// paymentView is a payment as GET /v1/payments/{no} shows it: while it is pending, with
// the way to pay it that its checkout answered, so that a client that lost the answer
// can still pay. The store gives a link only for a pending payment.
type paymentView struct {
	payment.Payment
	PayURL      string `json:"pay_url,omitempty"`
	QRCode      string `json:"qr_code,omitempty"`
	OrderString string `json:"order_string,omitempty"`
}

func (v *paymentView) setPayLink(m payment.Method, link string) {
	h := payment.HandOffOf(m, link)
	v.PayURL, v.QRCode, v.OrderString = h.PayURL, h.QRCode, h.OrderString
}

func (s *Server) listOrderPayments(c echo.Context) error {
	orderID := c.Param("order_id")
	if err := payment.ValidateOrderID(orderID); err != nil {
		return err
	}
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	ps, err := s.store.ListOrderPayments(c.Request().Context(), tenantIDOf(c), orderID)
	if err != nil {
		return &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot read payments right now", Err: err}
	}
	paymentNo := func(p payment.Payment) string { return p.PaymentNo }
	if ps, err = after(ps, pg.after, paymentNo); err != nil {
		return err
	}
	ps, more, next := cut(ps, pg.limit, paymentNo)
	if ps == nil {
		ps = []payment.Payment{}
	}
	return c.JSON(http.StatusOK, map[string]any{"order_id": orderID, "payments": ps, "has_more": more, "next_cursor": next})
}
