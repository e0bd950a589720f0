package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/payment"
)

// CreateRefundRequest is the body of POST /v1/payments/{payment_no}/refunds.
type CreateRefundRequest struct {
	AmountFen int64  `json:"amount_fen"`
	Reason    string `json:"reason,omitempty"`
	// RefundNo is the merchant's own id for the refund. Without it, one is derived from
	// the Idempotency-Key, so that a retry lands on the same refund. A request with
	// neither is refused: its retry could not be told from a second refund.
	RefundNo string `json:"refund_no,omitempty"`
}

// createRefund reserves a refund of a paid payment and starts its workflow, under the
// Idempotency-Key protocol of payments.
func (s *Server) createRefund(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	run := func(idemKey string) (int, []byte, error) {
		return refund(c.Request().Context(), s.store.Refunds, s.orch, s.log, tenantIDOf(c), c.Param("payment_no"), body, idemKey)
	}
	key := c.Request().Header.Get("Idempotency-Key")
	if key == "" {
		status, resp, err := run("")
		if err != nil {
			return err
		}
		return c.JSONBlob(status, resp)
	}
	return s.idem.run(c, key, body, func() (int, []byte, error) { return run(key) })
}

// refundNoFor derives a refund_no from (tenant, Idempotency-Key).
func refundNoFor(tenantID, idemKey string) string {
	return "k" + HashAPIKey("refund\x00" + tenantID + "\x00" + idemKey)[:40]
}

// errRefundIdentity refuses a refund that has neither an Idempotency-Key nor a refund_no.
// Money goes back only once per refund, and without one of them a client's retry after a
// timeout or a double-clicked refund button would be a second refund.
var errRefundIdentity = payment.Errorf(payment.EINVALID,
	"a refund needs an Idempotency-Key header or a refund_no in the body, so that a retry is the same refund and never a second one")

// refund does the work of a refund request: the store reserves the amount and inserts
// the refund in one transaction (the database is what keeps the refunded total within
// the paid amount), then the refund's workflow is started. If the start fails the answer
// is 503 and the refund stays pending with its reservation: a retry of the request finds
// the same refund (same refund_no, or the same Idempotency-Key) and starts it again.
func refund(ctx context.Context, store payment.Refunds, orch Orchestrator, log *slog.Logger, tenantID, paymentNo string, body []byte, idemKey string) (int, []byte, error) {
	if err := payment.ValidatePaymentNo(paymentNo); err != nil {
		return 0, nil, err
	}
	var req CreateRefundRequest
	if err := decodeStrict(body, &req); err != nil {
		return 0, nil, err
	}
	if req.AmountFen <= 0 {
		return 0, nil, payment.Errorf(payment.EINVALID, "amount_fen must be a positive number of fen, got %d", req.AmountFen)
	}
	if req.RefundNo == "" {
		if idemKey == "" {
			return 0, nil, errRefundIdentity
		}
		req.RefundNo = refundNoFor(tenantID, idemKey)
	}
	nr := payment.NewRefund{RefundNo: req.RefundNo, TenantID: tenantID, PaymentNo: paymentNo,
		Amount: payment.Amount(req.AmountFen), Reason: req.Reason}
	if err := nr.Validate(); err != nil {
		return 0, nil, err
	}
	r, existed, err := store.CreateRefund(ctx, nr)
	if err != nil {
		switch payment.ErrorCode(err) {
		case payment.ENOTFOUND, payment.ENOTPAID, payment.EREFUNDEXCEEDS, payment.ECONFLICT, payment.EINVALID, payment.EUNPROCESSABLE:
			return 0, nil, err
		}
		return 0, nil, &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot record the refund right now, retry", Err: err}
	}
	if err := orch.StartRefund(ctx, r); err != nil {
		log.ErrorContext(ctx, "start refund workflow; the refund stays pending until a retry", "tenant_id", tenantID,
			"payment_no", paymentNo, "refund_no", r.RefundNo, "err", err)
		return 0, nil, &payment.Error{Code: payment.EUNAVAILABLE, Message: "the refund is recorded but could not be started; retry the request", Err: err}
	}
	status := http.StatusCreated
	if existed {
		status = http.StatusOK
	}
	out, err := json.Marshal(r)
	if err != nil {
		return 0, nil, err
	}
	return status, out, nil
}

func (s *Server) getRefund(c echo.Context) error {
	no := c.Param("refund_no")
	if err := payment.ValidateRefundNo(no); err != nil {
		return err
	}
	r, err := s.store.GetRefund(c.Request().Context(), tenantIDOf(c), no)
	if err != nil {
		if errors.Is(err, payment.ErrNotFound) {
			return payment.Errorf(payment.ENOTFOUND, "no refund %s", no)
		}
		return &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot read the refund right now", Err: err}
	}
	return c.JSON(http.StatusOK, r)
}

func (s *Server) listPaymentRefunds(c echo.Context) error {
	no := c.Param("payment_no")
	if err := payment.ValidatePaymentNo(no); err != nil {
		return err
	}
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	p, err := s.store.GetTenantPayment(ctx, tenantIDOf(c), no)
	if err != nil {
		if errors.Is(err, payment.ErrNotFound) {
			return payment.Errorf(payment.ENOTFOUND, "no payment %s", no)
		}
		return &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot read the payment right now", Err: err}
	}
	rs, err := s.store.ListPaymentRefunds(ctx, p.TenantID, p.PaymentNo)
	if err != nil {
		return &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot read refunds right now", Err: err}
	}
	refundNo := func(r payment.Refund) string { return r.RefundNo }
	if rs, err = after(rs, pg.after, refundNo); err != nil {
		return err
	}
	rs, more, next := cut(rs, pg.limit, refundNo)
	if rs == nil {
		rs = []payment.Refund{}
	}
	return c.JSON(http.StatusOK, map[string]any{
		"payment_no": p.PaymentNo, "amount_fen": p.Amount, "refunded_fen": p.Refunded, "refund_state": p.RefundState,
		"refunds": rs, "has_more": more, "next_cursor": next,
	})
}
