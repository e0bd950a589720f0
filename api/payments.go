package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// CreatePaymentRequest is the body of POST /v1/payments.
type CreatePaymentRequest struct {
	OrderID   string         `json:"order_id"`
	AmountFen int64          `json:"amount_fen"`
	Currency  string         `json:"currency"`
	Subject   string         `json:"subject"`
	Method    payment.Method `json:"method"`
	ReturnURL string         `json:"return_url,omitempty"`
	// QuitURL is where the wap cashier sends a buyer who gives up (method wap only).
	QuitURL string `json:"quit_url,omitempty"`
	// CheckoutToken is the optional one-time token from POST /v1/checkout-tokens.
	CheckoutToken string `json:"checkout_token,omitempty"`
	// Repurchase opts in to charging an order again after one of its payments was PAID.
	// Without it a paid order is final: the answer is 409 order_already_paid.
	Repurchase bool `json:"repurchase,omitempty"`
}

func (r *CreatePaymentRequest) normalize() error {
	if r.Currency == "" {
		r.Currency = "CNY"
	}
	if r.Method == "" {
		r.Method = payment.MethodPage
	}
	if err := payment.ValidateOrderID(r.OrderID); err != nil {
		return err
	}
	if err := payment.Amount(r.AmountFen).Validate(); err != nil {
		return err
	}
	if r.Currency != "CNY" {
		return payment.Errorf(payment.EINVALID, "currency must be CNY")
	}
	if r.Subject == "" || len(r.Subject) > payment.MaxSubjectBytes {
		return payment.Errorf(payment.EINVALID, "subject must be 1-%d bytes", payment.MaxSubjectBytes)
	}
	if err := r.Method.Validate(); err != nil {
		return err
	}
	if err := checkPageURL("return_url", r.ReturnURL, payment.MaxReturnURLBytes); err != nil {
		return err
	}
	if err := checkPageURL("quit_url", r.QuitURL, payment.MaxQuitURLBytes); err != nil {
		return err
	}
	if r.QuitURL != "" && r.Method != payment.MethodWap {
		return payment.Errorf(payment.EINVALID, "quit_url is only for method %q", payment.MethodWap)
	}
	if r.ReturnURL != "" && r.Method == payment.MethodApp {
		// Alipay app pay returns the buyer to the merchant's app, never to a URL.
		return payment.Errorf(payment.EINVALID, "return_url is not used by method %q", payment.MethodApp)
	}
	if len(r.CheckoutToken) > 128 {
		return payment.Errorf(payment.EINVALID, "checkout_token is too long")
	}
	return nil
}

// checkPageURL checks a URL the cashier sends the buyer's browser to. Its bound is
// checked before anything is signed: the signed pay link must fit its column.
func checkPageURL(name, v string, maxBytes int) error {
	if len(v) > maxBytes {
		return payment.Errorf(payment.EINVALID, "%s must be at most %d bytes", name, maxBytes)
	}
	if v != "" && !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
		return payment.Errorf(payment.EINVALID, "%s must be an http(s) URL", name)
	}
	return nil
}

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

// createPayment is the checkout: Idempotency-Key, then the one-time token, then the
// payment: created here under the unique index and its workflow started (page, wap and
// app, directCheckout), or the workflow's UpdateWithStart, whose first activity inserts
// under the unique index (QR, whose code needs Alipay's precreate after the insert).
func (s *Server) createPayment(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	key := c.Request().Header.Get("Idempotency-Key")
	if key == "" {
		status, resp, err := s.checkout(c, body, "")
		if err != nil {
			return err
		}
		return c.JSONBlob(status, resp)
	}
	return s.idempotent(c, key, body, func() (int, []byte, error) { return s.checkout(c, body, key) })
}

// checkout returns the status and body to answer; errors are turned into problems by the
// caller (and stored for replay when they are the client's fault).
func (s *Server) checkout(c echo.Context, body []byte, idemKey string) (_ int, _ []byte, retErr error) {
	ctx := c.Request().Context()
	tenant := tenantOf(c)
	var req CreatePaymentRequest
	if err := decodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	if err := req.normalize(); err != nil {
		return 0, nil, err
	}
	pendingFound := false
	if !req.Repurchase {
		// A paid order is final, whatever the key or token. The store refuses a new
		// payment for it anyway; this read answers without starting a workflow run. The
		// same statement finds the order's pending payment, which a repeated checkout
		// joins through the workflow's update, writing nothing.
		paid, pending, err := s.store.OrderStanding(ctx, tenant.ID, req.OrderID)
		switch {
		case err != nil:
			s.log.WarnContext(ctx, "paid-order check skipped", "tenant_id", tenant.ID, "order_id", req.OrderID, "err", err)
		case paid != nil:
			s.metrics.checkouts.WithLabelValues(payment.EORDERPAID).Inc()
			return 0, nil, paidOrderProblem(req.OrderID, *paid)
		}
		pendingFound = pending != nil
	}
	if req.CheckoutToken != "" {
		binder, err := s.claimToken(c, tenant.ID, req, idemKey)
		if err != nil {
			s.metrics.checkouts.WithLabelValues("token_reused").Inc()
			return 0, nil, err
		}
		if binder != "" {
			defer func() {
				if retErr != nil {
					if st, _ := statusFor(retErr); st >= 500 || payment.ErrorCode(retErr) == payment.EFINISHING {
						s.releaseToken(c, tenant.ID, req, binder)
					}
				}
			}()
		}
	}
	updateID := "checkout-" + uuid.NewString()
	if idemKey != "" {
		// A retry that slips past the key store (e.g. after a lock takeover) lands on
		// the same update and so gets the same answer from Temporal.
		updateID = "checkout-" + HashAPIKey(tenant.ID + "\x00" + idemKey)[:40]
	}
	in := workflows.PaymentInput{
		TenantID: tenant.ID, OrderID: req.OrderID, Amount: payment.Amount(req.AmountFen), Currency: req.Currency,
		Subject: req.Subject, Method: req.Method, ReturnURL: req.ReturnURL, QuitURL: req.QuitURL, Repurchase: req.Repurchase,
	}
	var (
		res  workflows.CheckoutResult
		done bool
		err  error
	)
	if s.cfg.DirectCheckoutTTL > 0 && in.Method != payment.MethodQR && !pendingFound {
		res, done, err = s.directCheckout(ctx, in)
	}
	if !done {
		res, err = s.orch.Checkout(ctx, in, updateID)
	}
	for attempt := 1; !done && payment.ErrorCode(err) == payment.EFINISHING && attempt <= finishingRetries; attempt++ {
		// The order's last payment has just ended and its run is making way for a new
		// one; that takes a workflow task. Each try is a new update, since the ended
		// run keeps its answer to the old one.
		if serr := sleepCtx(ctx, time.Duration(attempt)*100*time.Millisecond); serr != nil {
			break
		}
		res, err = s.orch.Checkout(ctx, in, fmt.Sprintf("%s-%d", updateID, attempt))
	}
	if err != nil {
		s.metrics.checkouts.WithLabelValues(payment.ErrorCode(err)).Inc()
		switch payment.ErrorCode(err) {
		case payment.ECONFLICT:
			return 0, nil, s.withExistingPayment(c, tenant.ID, req.OrderID, err)
		case payment.EORDERPAID:
			if perr := s.refusePaidOrder(c, tenant.ID, req.OrderID); perr != nil {
				return 0, nil, perr
			}
		case payment.EFINISHING:
			c.Response().Header().Set("Retry-After", "1")
		}
		return 0, nil, err
	}
	s.metrics.checkouts.WithLabelValues("ok").Inc()
	if done {
		s.metrics.checkoutPaths.WithLabelValues("direct").Inc()
	} else {
		s.metrics.checkoutPaths.WithLabelValues("update").Inc()
	}
	out, err := json.Marshal(res)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, out, nil
}

// finishingRetries bounds how often a checkout that reached an ending run is tried again.
const finishingRetries = 4

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// refusePaidOrder answers 409 order_already_paid, carrying the PAID payment, if the order
// has one. A failed read lets the checkout go on: the store refuses it all the same.
func (s *Server) refusePaidOrder(c echo.Context, tenantID, orderID string) error {
	p, ok, err := s.store.OrderPaidPayment(c.Request().Context(), tenantID, orderID)
	if err != nil {
		s.log.WarnContext(c.Request().Context(), "paid-order check skipped", "tenant_id", tenantID, "order_id", orderID, "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	return paidOrderProblem(orderID, p)
}

// paidOrderProblem is the 409 order_already_paid answer, carrying the PAID payment.
func paidOrderProblem(orderID string, p payment.Payment) error {
	return &problemError{
		err: payment.Errorf(payment.EORDERPAID, "order %s is already paid by payment %s; send \"repurchase\": true to charge it again",
			orderID, p.PaymentNo),
		payment: p,
	}
}

// claimToken binds the one-time token to this request and returns the binder it used.
// The binder of a request with an Idempotency-Key is derived from (tenant, key), so the
// client's retry of a checkout that failed midway finds the token still its own, and the
// idempotency and workflow layers keep the retry exactly-once; any other request gets a
// random binder and so token_used. If Redis is down the token layer is skipped (binder
// ""): the layers below it still guarantee one payment per order.
func (s *Server) claimToken(c echo.Context, tenantID string, req CreatePaymentRequest, idemKey string) (string, error) {
	if s.cache == nil {
		return "", nil
	}
	binder := "r:" + uuid.NewString()
	if idemKey != "" {
		binder = "k:" + HashAPIKey("checkout-token\x00"+tenantID+"\x00"+idemKey)
	}
	issuedFor, ok, err := s.cache.ClaimToken(c.Request().Context(), tenantID, req.CheckoutToken, req.OrderID, binder)
	if err != nil {
		s.log.WarnContext(c.Request().Context(), "checkout token check skipped: redis unavailable", "tenant_id", tenantID,
			"order_id", req.OrderID, "err", err)
		return "", nil
	}
	if !ok && issuedFor != "" && issuedFor != req.OrderID {
		return "", payment.Errorf(payment.EUNPROCESSABLE, "checkout token was issued for another order")
	}
	if !ok {
		return "", s.withExistingPayment(c, tenantID, req.OrderID,
			payment.Errorf(payment.ETOKENUSED, "checkout token already used or expired"))
	}
	return binder, nil
}

// releaseToken gives the token back after a checkout failed through no fault of the
// client's (5xx), so that a retry, with or without an Idempotency-Key, can use it.
func (s *Server) releaseToken(c echo.Context, tenantID string, req CreatePaymentRequest, binder string) {
	if err := s.cache.ReleaseToken(detached(c), tenantID, req.CheckoutToken, binder); err != nil {
		s.log.WarnContext(c.Request().Context(), "release checkout token", "tenant_id", tenantID,
			"order_id", req.OrderID, "err", err)
	}
}

// withExistingPayment attaches the order's current payment to a conflict, so the client
// can show it instead of an error.
func (s *Server) withExistingPayment(c echo.Context, tenantID, orderID string, err error) error {
	ps, lerr := s.store.ListOrderPayments(c.Request().Context(), tenantID, orderID)
	if lerr != nil || len(ps) == 0 {
		return err
	}
	return &problemError{err: err, payment: ps[0]}
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
	switch m {
	case payment.MethodQR:
		v.QRCode = link
	case payment.MethodApp:
		v.OrderString = link
	default:
		v.PayURL = link
	}
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
