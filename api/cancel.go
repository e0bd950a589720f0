package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/payment"
)

// merchantRoutes adds the merchant's operations on payments and on its event feed.
func (s *Server) merchantRoutes(v1 routeGroup) {
	v1.POST("/payments/:payment_no/cancel", s.limited(RouteCancels, s.cancelPayment))
	v1.GET("/events", s.listEvents)
	v1.POST("/events/:event_id/redeliver", s.limited(RouteRedeliveries, s.redeliverEvent))
}

// cancelPayment cancels a pending payment through its workflow, under the
// Idempotency-Key protocol of payments. The body, if any, must be {}.
func (s *Server) cancelPayment(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if err := decodeNone(body); err != nil {
		return err
	}
	run := func() (int, []byte, error) {
		return cancel(c.Request().Context(), s.store.Payments, s.orch, s.cfg.CancelWait, tenantIDOf(c), c.Param("payment_no"))
	}
	key := c.Request().Header.Get("Idempotency-Key")
	if key == "" {
		status, resp, err := run()
		if err != nil {
			return err
		}
		return c.JSONBlob(status, resp)
	}
	return s.idem.run(c, key, body, run)
}

// cancel asks the payment's workflow to cancel it and waits up to CancelWait for the
// outcome: 200 with the payment closed (or failed), 409 order_already_paid with the
// payment if Alipay said it was paid (or it already was), and 202 with the payment still
// pending if Alipay has not yet confirmed that the trade cannot be paid (a cashier link
// handed out stays payable until its expiry, so the close waits for that). The workflow
// keeps the cancel in every case; a later GET shows the outcome.
func cancel(ctx context.Context, store payment.Payments, orch Orchestrator, wait time.Duration, tenantID, no string) (int, []byte, error) {
	if err := payment.ValidatePaymentNo(no); err != nil {
		return 0, nil, err
	}
	p, err := tenantPayment(ctx, store, tenantID, no)
	if err != nil {
		return 0, nil, err
	}
	if p.Status == payment.StatusPending {
		if cerr := orch.CancelPayment(ctx, p); cerr != nil {
			// It may have ended meanwhile, which is an answer too.
			q, err := tenantPayment(ctx, store, tenantID, no)
			if err != nil || !q.Status.Final() {
				return 0, nil, cerr
			}
			p = q
		} else if p, err = awaitFinal(ctx, store, p, wait); err != nil {
			return 0, nil, err
		}
	}
	if p.Status == payment.StatusPaid {
		return 0, nil, &problemError{
			err:     payment.Errorf(payment.EORDERPAID, "payment %s is already paid; refund it instead", p.PaymentNo),
			payment: p,
		}
	}
	status := http.StatusOK
	if p.Status == payment.StatusPending {
		status = http.StatusAccepted
	}
	out, err := json.Marshal(p)
	if err != nil {
		return 0, nil, err
	}
	return status, out, nil
}

// awaitFinal polls the payment until it is final or wait (CancelWait) has passed.
func awaitFinal(ctx context.Context, store payment.Payments, p payment.Payment, wait time.Duration) (payment.Payment, error) {
	deadline := time.Now().Add(wait)
	for step := 50 * time.Millisecond; ; step = min(2*step, 500*time.Millisecond) {
		if time.Now().Add(step).After(deadline) {
			return p, nil
		}
		if err := sleepCtx(ctx, step); err != nil {
			return p, nil
		}
		q, err := tenantPayment(ctx, store, p.TenantID, p.PaymentNo)
		if err != nil {
			return payment.Payment{}, err
		}
		if p = q; p.Status.Final() {
			return p, nil
		}
	}
}

// tenantPayment reads a tenant's payment: 404 for another tenant's, 503 if the store fails.
func tenantPayment(ctx context.Context, store payment.Payments, tenantID, no string) (payment.Payment, error) {
	p, err := store.GetTenantPayment(ctx, tenantID, no)
	if errors.Is(err, payment.ErrNotFound) {
		return payment.Payment{}, payment.Errorf(payment.ENOTFOUND, "no payment %s", no)
	}
	if err != nil {
		return payment.Payment{}, &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot read the payment right now", Err: err}
	}
	return p, nil
}

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
