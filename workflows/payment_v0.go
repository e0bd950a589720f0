package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/payment"
)

// closeOnAlipayWord is the change id of the version that closes a payment locally only on
// Alipay's word (the close path queries after any answer but a successful close, refused
// opens go through it, a cancel keeps closing until confirmed, money for a closed payment
// is always recorded, and a mismatched amount fails the payment). Runs that started before
// it (GetVersion answers DefaultVersion in their history) keep the steps they were recorded
// with, so they replay on this code; the legacy methods below are theirs. Remove them, and
// the check, once no run from before the change is open (a visibility query for running
// PaymentWorkflows started before the deploy answers none).
const closeOnAlipayWord = "close-on-alipay-word"

// legacyOpenRefused is what a pre-version run did when Alipay refused its trade: close
// the payment locally at once.
func (r *paymentRun) legacyOpenRefused(ctx workflow.Context) {
	r.closeLocally(ctx, "channel_refused")
}

// legacyCancelled is what a pre-version run did on an operator's cancel: one close path,
// then end, cancelled, if the payment was still pending.
func (r *paymentRun) legacyCancelled(ctx workflow.Context) (workflow.Context, error) {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	r.legacyClosePath(ctx, "cancelled")
	if r.st.Status.Final() {
		r.afterFinal(ctx)
	}
	workflow.SetCurrentDetails(ctx, r.details())
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	if r.st.Status == payment.StatusPending {
		return ctx, temporal.NewCanceledError("cancelled while pending; the sweeper re-drives the payment")
	}
	return ctx, errLegacyDone
}

// legacyReconcile queried first on every tick, and took the close path past expiry.
func (r *paymentRun) legacyReconcile(ctx workflow.Context) {
	var trade payment.Trade
	err := workflow.ExecuteActivity(channelOptions(ctx, 3, "query trade at alipay"), a.QueryTrade, r.st.PaymentNo).Get(ctx, &trade)
	if err != nil {
		r.logger.Warn("reconciliation query failed; will retry on the next tick", "payment_no", r.st.PaymentNo, "err", err)
		return
	}
	switch {
	case trade.State == payment.TradePaid:
		r.paidAtAlipay(ctx, trade, "reconciliation")
	case !workflow.Now(ctx).Before(r.st.ExpireAt):
		r.legacyClosePath(ctx, "expired")
	}
	workflow.SetCurrentDetails(ctx, r.details())
}

// legacyClosePath closed locally after any close answer but "already paid", and queried
// only after that one.
func (r *paymentRun) legacyClosePath(ctx workflow.Context, reason string) {
	if r.st.Status != payment.StatusPending {
		return
	}
	var out payment.CloseOutcome
	err := workflow.ExecuteActivity(channelOptions(ctx, 5, "close trade at alipay"), a.CloseTrade, r.st.PaymentNo).Get(ctx, &out)
	if err != nil {
		r.logger.Warn("close at alipay failed; reconciliation will retry", "payment_no", r.st.PaymentNo, "err", err)
		return
	}
	if out == payment.CloseAlreadyPaid {
		var trade payment.Trade
		err := workflow.ExecuteActivity(channelOptions(ctx, 5, "query trade after refused close"), a.QueryTrade, r.st.PaymentNo).Get(ctx, &trade)
		if err != nil {
			r.logger.Warn("query after refused close failed; reconciliation will retry", "payment_no", r.st.PaymentNo, "err", err)
			return
		}
		switch trade.State {
		case payment.TradePaid:
			r.paidAtAlipay(ctx, trade, "close refused: already paid")
			return
		case payment.TradeWaiting:
			return
		}
	}
	r.closeLocally(ctx, reason)
}
