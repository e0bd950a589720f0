// Package checkout decides a checkout: a paid order is refused, a one-time token is spent,
// and the payment is created and its workflow started here (page, wap and app: the direct
// path) or left to the workflow's checkout update (QR, or an order already being paid),
// which joins a concurrent checkout of the same order. The HTTP layer decodes the request
// and answers what Pay returns.
package checkout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/runs"
)

// Stores are the records a checkout reads and writes, one interface per noun of package
// payment. New refuses a Stores with one left nil.
type Stores struct {
	payment.Payments // the order's standing, the direct path's pending payment
	payment.PayLinks // the pay link of a pending payment another checkout created
}

// Orchestrator is what a checkout needs from the workflow engine.
type Orchestrator interface {
	// Checkout runs the workflow's checkout update (UpdateWithStart) of the order.
	Checkout(ctx context.Context, in runs.PaymentInput, updateID string) (runs.CheckoutResult, error)
	// StartOpened starts the run of a payment the checkout created and opened itself;
	// started=false means a run of the order is already running.
	StartOpened(ctx context.Context, in runs.PaymentInput) (started bool, err error)
}

// Tokens are the one-time checkout tokens (Redis); every call may fail, and a checkout
// then goes on without the token layer.
type Tokens interface {
	// ClaimToken binds a checkout token to one request (binder): ok=true for the first
	// claim and for later claims with the same binder. A token issued for an order other
	// than orderID gives ok=false with issuedFor naming that order.
	ClaimToken(ctx context.Context, tenantID, token, orderID, binder string) (issuedFor string, ok bool, err error)
	// ReleaseToken makes a token claimed by binder unspent again.
	ReleaseToken(ctx context.Context, tenantID, token, binder string) error
}

// Config tunes the checkout.
type Config struct {
	// DirectTTL, when set, is the lifetime of the page, wap and app payments that the
	// checkout creates and opens itself before starting their workflow (direct.go); zero
	// leaves every checkout to the workflow's checkout update.
	DirectTTL time.Duration
	// QueryInterval, when set, gives each payment the checkout creates its first query
	// by the scheduled reconciler (payment.NewPayment.QueryInterval), and its run no
	// reconciliation timer of its own.
	QueryInterval time.Duration
	// NoFault reports whether a failed checkout was no fault of the client's (a retry
	// may succeed): its one-time token is then given back. Nil: none is.
	NoFault func(error) bool
}

// Checkout runs checkouts; it is safe for concurrent use.
type Checkout struct {
	cfg      Config
	store    Stores
	gateways payment.Gateways
	orch     Orchestrator
	tokens   Tokens
	log      *slog.Logger
	metrics  *Metrics
}

// New builds a Checkout. tokens may be nil (no Redis: no token layer), logger nil is
// slog.Default, metrics nil a set registered nowhere. It panics if a noun of store is not
// set: that is a wiring mistake.
func New(cfg Config, store Stores, gateways payment.Gateways, orch Orchestrator, tokens Tokens, logger *slog.Logger, metrics *Metrics) *Checkout {
	if err := payment.UnsetNoun(store); err != nil {
		panic(err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	if cfg.NoFault == nil {
		cfg.NoFault = func(error) bool { return false }
	}
	return &Checkout{cfg: cfg, store: store, gateways: gateways, orch: orch, tokens: tokens, log: logger, metrics: metrics}
}

// PaymentError is a refusal that carries the order's payment, for the client to show
// instead of an error: the PAID payment of a paid order, the pending one of a conflict.
type PaymentError struct {
	Err     error
	Payment payment.Payment
}

func (e *PaymentError) Error() string { return e.Err.Error() }
func (e *PaymentError) Unwrap() error { return e.Err }

// The paths of paykit_checkout_paths_total.
const (
	pathDirect = "direct"
	pathUpdate = "update"
)

// finishingRetries bounds how often a checkout that reached an ending run is tried again.
const finishingRetries = 4

// Pay is the checkout of one of tenantID's orders: the paid-order refusal, then the
// one-time token, then the payment, created here under the unique index and its workflow
// started (page, wap and app, directCheckout), or the workflow's UpdateWithStart, whose
// first activity inserts under the unique index (QR, whose code needs Alipay's precreate
// after the insert). idemKey is the request's Idempotency-Key, if any: a retry with it
// lands on the same workflow update and may spend the same token again.
func (co *Checkout) Pay(ctx context.Context, tenantID string, req Request, idemKey string) (_ runs.CheckoutResult, retErr error) {
	if err := req.Normalize(); err != nil {
		return runs.CheckoutResult{}, err
	}
	if offers, ok := co.gateways.(payment.ChannelOffers); ok {
		// A method of a channel the deployment has no account at is refused before
		// anything is written or started.
		if err := offers.Offers(req.Method.Channel()); err != nil {
			return runs.CheckoutResult{}, err
		}
	}
	pendingFound, err := co.standing(ctx, tenantID, req)
	if err != nil {
		return runs.CheckoutResult{}, err
	}
	binder, err := co.claimToken(ctx, tenantID, req, idemKey)
	if err != nil {
		co.metrics.checkouts.WithLabelValues("token_reused").Inc()
		return runs.CheckoutResult{}, err
	}
	if binder != "" {
		defer func() {
			if retErr != nil && co.cfg.NoFault(retErr) {
				co.releaseToken(ctx, tenantID, req, binder)
			}
		}()
	}
	in := runs.PaymentInput{
		TenantID: tenantID, OrderID: req.OrderID, Amount: payment.Amount(req.AmountFen), Currency: req.Currency,
		Subject: req.Subject, Method: req.Method, ReturnURL: req.ReturnURL, QuitURL: req.QuitURL, Repurchase: req.Repurchase,
		Payer: req.Payer,
	}
	res, path, err := co.run(ctx, in, updateID(tenantID, idemKey), pendingFound)
	if err != nil {
		co.metrics.checkouts.WithLabelValues(payment.ErrorCode(err)).Inc()
		return runs.CheckoutResult{}, co.refused(ctx, tenantID, req.OrderID, err)
	}
	co.metrics.checkouts.WithLabelValues("ok").Inc()
	co.metrics.paths.WithLabelValues(path).Inc()
	return res, nil
}

// standing refuses a paid order, whatever the key or token, unless the request is a
// repurchase. The store refuses a new payment for it anyway; this read answers without
// starting a workflow run. The same statement finds the order's pending payment, which a
// repeated checkout joins through the workflow's update, writing nothing (pendingFound).
func (co *Checkout) standing(ctx context.Context, tenantID string, req Request) (pendingFound bool, err error) {
	if req.Repurchase {
		return false, nil
	}
	paid, pending, err := co.store.OrderStanding(ctx, tenantID, req.OrderID)
	switch {
	case err != nil:
		co.log.WarnContext(ctx, "paid-order check skipped", "tenant_id", tenantID, "order_id", req.OrderID, "err", err)
	case paid != nil:
		co.metrics.checkouts.WithLabelValues(payment.EORDERPAID).Inc()
		return false, paidOrderProblem(req.OrderID, *paid)
	}
	return pending != nil, nil
}

// updateID names the checkout's workflow update. A retry that slips past the key store
// (e.g. after a lock takeover) lands on the same update and so gets the same answer from
// Temporal.
func updateID(tenantID, idemKey string) string {
	if idemKey == "" {
		return "checkout-" + uuid.NewString()
	}
	return "checkout-" + hash(tenantID + "\x00" + idemKey)[:40]
}

// run takes the direct path when it may (a method whose link the channel lets paykit
// sign: directCheckout says), and the workflow's checkout update otherwise, and says
// which answered.
func (co *Checkout) run(ctx context.Context, in runs.PaymentInput, updateID string, pendingFound bool) (runs.CheckoutResult, string, error) {
	if co.cfg.DirectTTL > 0 && !pendingFound {
		res, done, err := co.directCheckout(ctx, in)
		if done {
			return res, pathDirect, err
		}
	}
	res, err := co.orch.Checkout(ctx, in, updateID)
	for attempt := 1; payment.ErrorCode(err) == payment.EFINISHING && attempt <= finishingRetries; attempt++ {
		// The order's last payment has just ended and its run is making way for a new
		// one; that takes a workflow task. Each try is a new update, since the ended
		// run keeps its answer to the old one.
		if serr := sleepCtx(ctx, time.Duration(attempt)*100*time.Millisecond); serr != nil {
			break
		}
		res, err = co.orch.Checkout(ctx, in, fmt.Sprintf("%s-%d", updateID, attempt))
	}
	return res, pathUpdate, err
}

// refused adds to a failed checkout the order's payment the client should see: the
// pending one of a conflict, the PAID one of a paid order.
func (co *Checkout) refused(ctx context.Context, tenantID, orderID string, err error) error {
	switch payment.ErrorCode(err) {
	case payment.ECONFLICT:
		return co.withExistingPayment(ctx, tenantID, orderID, err)
	case payment.EORDERPAID:
		if perr := co.refusePaidOrder(ctx, tenantID, orderID); perr != nil {
			return perr
		}
	}
	return err
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

// refusePaidOrder answers 409 order_already_paid, carrying the PAID payment, if the order
// has one. A failed read lets the checkout go on: the store refuses it all the same.
func (co *Checkout) refusePaidOrder(ctx context.Context, tenantID, orderID string) error {
	p, ok, err := co.store.OrderPaidPayment(ctx, tenantID, orderID)
	if err != nil {
		co.log.WarnContext(ctx, "paid-order check skipped", "tenant_id", tenantID, "order_id", orderID, "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	return paidOrderProblem(orderID, p)
}

// paidOrderProblem is the 409 order_already_paid answer, carrying the PAID payment.
func paidOrderProblem(orderID string, p payment.Payment) error {
	return &PaymentError{
		Err: payment.Errorf(payment.EORDERPAID, "order %s is already paid by payment %s; send \"repurchase\": true to charge it again",
			orderID, p.PaymentNo),
		Payment: p,
	}
}

// claimToken binds the one-time token to this request and returns the binder it used
// ("" for a request without a token). The binder of a request with an Idempotency-Key is
// derived from (tenant, key), so the client's retry of a checkout that failed midway
// finds the token still its own, and the idempotency and workflow layers keep the retry
// exactly-once; any other request gets a random binder and so token_used. If Redis is
// down the token layer is skipped (binder ""): the layers below it still guarantee one
// payment per order.
func (co *Checkout) claimToken(ctx context.Context, tenantID string, req Request, idemKey string) (string, error) {
	if req.CheckoutToken == "" || co.tokens == nil {
		return "", nil
	}
	binder := "r:" + uuid.NewString()
	if idemKey != "" {
		binder = "k:" + hash("checkout-token\x00"+tenantID+"\x00"+idemKey)
	}
	issuedFor, ok, err := co.tokens.ClaimToken(ctx, tenantID, req.CheckoutToken, req.OrderID, binder)
	if err != nil {
		co.log.WarnContext(ctx, "checkout token check skipped: redis unavailable", "tenant_id", tenantID,
			"order_id", req.OrderID, "err", err)
		return "", nil
	}
	if !ok && issuedFor != "" && issuedFor != req.OrderID {
		return "", payment.Errorf(payment.EUNPROCESSABLE, "checkout token was issued for another order")
	}
	if !ok {
		return "", co.withExistingPayment(ctx, tenantID, req.OrderID,
			payment.Errorf(payment.ETOKENUSED, "checkout token already used or expired"))
	}
	return binder, nil
}

// releaseToken gives the token back after a checkout failed through no fault of the
// client's, so that a retry, with or without an Idempotency-Key, can use it.
func (co *Checkout) releaseToken(ctx context.Context, tenantID string, req Request, binder string) {
	if err := co.tokens.ReleaseToken(context.WithoutCancel(ctx), tenantID, req.CheckoutToken, binder); err != nil {
		co.log.WarnContext(ctx, "release checkout token", "tenant_id", tenantID, "order_id", req.OrderID, "err", err)
	}
}

// withExistingPayment attaches the order's current payment to a conflict, so the client
// can show it instead of an error.
func (co *Checkout) withExistingPayment(ctx context.Context, tenantID, orderID string, err error) error {
	ps, lerr := co.store.ListOrderPayments(ctx, tenantID, orderID)
	if lerr != nil || len(ps) == 0 {
		return err
	}
	return &PaymentError{Err: err, Payment: ps[0]}
}

// hash is hex SHA-256, the form API keys are stored in, here deriving stable ids.
func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
