package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
)

// a references activities by method; Temporal calls them on the worker's instance.
var a *activities.Activities

const maxSeenNotifyIDs = 64

// paymentRun is the state of one run of PaymentWorkflow.
type paymentRun struct {
	in     PaymentInput
	timing Timing
	st     PaymentState
	logger interface {
		Info(string, ...interface{})
		Warn(string, ...interface{})
		Error(string, ...interface{})
	}
}

// PaymentWorkflow drives one order's payment: create it, wait for the callback signal,
// reconcile with Alipay on a timer, close it at expiry, and on success mark it paid,
// grant the benefit and notify the merchant. Its workflow ID is the business key
// payment:{tenant}:{order}.
func PaymentWorkflow(ctx workflow.Context, in PaymentInput) (PaymentState, error) {
	r := &paymentRun{in: in, timing: in.Timing.withDefaults(), logger: workflow.GetLogger(ctx)}
	if in.State != nil {
		r.st = *in.State
	} else {
		r.st = PaymentState{TenantID: in.TenantID, OrderID: in.OrderID, Amount: in.Amount, Currency: in.Currency, PaymentNo: in.PaymentNo}
	}
	if err := r.registerHandlers(ctx); err != nil {
		return r.st, err
	}
	if !r.st.Initialized {
		if err := r.initialize(ctx); err != nil {
			r.st.InitError = err.Error()
			_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
			return r.st, err
		}
	}
	if err := r.waitForOutcome(ctx); err != nil {
		return r.st, err
	}
	// An operator's cancel request cancels the payment: close it at Alipay and locally
	// (or take the success path if it turns out paid). That work must not be cancelled.
	cancelled := ctx.Err() != nil
	if cancelled {
		ctx, _ = workflow.NewDisconnectedContext(ctx)
		if r.st.Status == payment.StatusPending {
			r.closePath(ctx, "cancelled")
		}
	}
	if r.st.Status.Final() {
		r.afterFinal(ctx)
	}
	workflow.SetCurrentDetails(ctx, r.details())
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	if cancelled && r.st.Status == payment.StatusPending {
		return r.st, temporal.NewCanceledError("cancelled while pending; the sweeper re-drives the payment")
	}
	return r.st, nil
}

func (r *paymentRun) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, StateQuery, func() (PaymentState, error) { return r.st, nil }); err != nil {
		return fmt.Errorf("register query: %w", err)
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, CheckoutUpdate,
		func(ctx workflow.Context, req CheckoutRequest) (CheckoutResult, error) {
			if err := workflow.Await(ctx, func() bool { return r.st.Initialized || r.st.InitError != "" }); err != nil {
				return CheckoutResult{}, err
			}
			if r.st.InitError != "" {
				return CheckoutResult{}, temporal.NewNonRetryableApplicationError(r.st.InitError, activities.ErrTypeInvalid, nil)
			}
			if r.st.Amount != req.Amount {
				return CheckoutResult{}, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("order already has payment %s for %d fen", r.st.PaymentNo, r.st.Amount), "AmountConflict", nil)
			}
			return r.checkoutResult(), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req CheckoutRequest) error {
			if req.Amount != r.in.Amount || req.Currency != r.in.Currency {
				return temporal.NewApplicationError(
					fmt.Sprintf("order %s is already being paid with %d fen %s", r.in.OrderID, r.in.Amount, r.in.Currency), "AmountConflict")
			}
			return nil
		}})
	if err != nil {
		return fmt.Errorf("register update: %w", err)
	}
	return nil
}

func (r *paymentRun) checkoutResult() CheckoutResult {
	return CheckoutResult{
		PaymentNo: r.st.PaymentNo, TenantID: r.st.TenantID, OrderID: r.st.OrderID, Status: r.st.Status,
		Amount: r.st.Amount, Currency: r.st.Currency, Subject: r.in.Subject,
		PayURL: r.st.PayURL, QRCode: r.st.QRCode, ExpireAt: r.st.ExpireAt,
	}
}

// newPaymentNo derives the out_trade_no from the run ID: unique per run and identical on
// replay and on activity retries.
func newPaymentNo(ctx workflow.Context) string {
	info := workflow.GetInfo(ctx)
	run := strings.ReplaceAll(info.WorkflowExecution.RunID, "-", "")
	if len(run) > 24 {
		run = run[:24]
	}
	return "P" + workflow.Now(ctx).UTC().Format("20060102") + run
}

func localOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: 10 * time.Minute,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    200 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Second,
		},
	})
}

func channelOptions(ctx workflow.Context, attempts int32, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Second,
		Summary:             summary,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    attempts,
		},
	})
}

func (r *paymentRun) initialize(ctx workflow.Context) error {
	info := workflow.GetInfo(ctx)
	if r.st.PaymentNo == "" {
		r.st.PaymentNo = newPaymentNo(ctx)
	}
	if r.st.ExpireAt.IsZero() {
		r.st.ExpireAt = workflow.Now(ctx).Add(r.timing.PaymentTTL).UTC().Truncate(time.Second)
	}
	var created activities.CreatePaymentResult
	err := workflow.ExecuteLocalActivity(localOptions(ctx), a.CreatePayment, activities.CreatePaymentInput{
		PaymentNo: r.st.PaymentNo, TenantID: r.in.TenantID, OrderID: r.in.OrderID, Amount: r.in.Amount,
		Currency: r.in.Currency, Subject: r.in.Subject, Method: r.in.Method, ExpireAt: r.st.ExpireAt, WorkflowID: info.WorkflowExecution.ID,
	}).Get(ctx, &created)
	if err != nil {
		return fmt.Errorf("create payment: %w", err)
	}
	// Adopt whatever the database holds: a retry, a re-driven run, or a payment created
	// for this order by an earlier run all converge on one row.
	p := created.Payment
	r.st.PaymentNo, r.st.Amount, r.st.Currency = p.PaymentNo, p.Amount, p.Currency
	r.st.Status, r.st.ExpireAt, r.st.TradeNo, r.st.PaidAt = p.Status, p.ExpireAt.UTC(), p.TradeNo, p.PaidAt
	r.upsertSearchAttributes(ctx)
	if p.Status == payment.StatusPending {
		// An adopted payment keeps the kind of trade it was created with.
		method := r.in.Method
		if p.Method != "" {
			method = p.Method
		}
		var opened activities.OpenTradeResult
		err = workflow.ExecuteLocalActivity(localOptions(ctx), a.OpenTrade, activities.OpenTradeInput{
			PaymentNo: p.PaymentNo, Subject: p.Subject, Amount: p.Amount, ExpireAt: r.st.ExpireAt,
			Method: method, ReturnURL: r.in.ReturnURL,
		}).Get(ctx, &opened)
		if err != nil {
			var appErr *temporal.ApplicationError
			if errors.As(err, &appErr) && appErr.NonRetryable() {
				// Alipay refused the trade: close the payment so the order can be retried.
				r.logger.Error("alipay refused the trade; closing the payment", "payment_no", p.PaymentNo, "err", err)
				r.closeLocally(ctx, "channel_refused")
				r.st.Initialized = true
				return nil
			}
			return fmt.Errorf("open trade: %w", err)
		}
		r.st.PayURL, r.st.QRCode = opened.PayURL, opened.QRCode
	}
	r.st.Initialized = true
	workflow.SetCurrentDetails(ctx, r.details())
	return nil
}

func (r *paymentRun) upsertSearchAttributes(ctx workflow.Context) {
	err := workflow.UpsertTypedSearchAttributes(ctx,
		SATenantID.ValueSet(r.st.TenantID),
		SAOrderID.ValueSet(r.st.OrderID),
		SAPaymentNo.ValueSet(r.st.PaymentNo),
		SAPaymentStatus.ValueSet(r.st.Status.String()),
		SAAmountFen.ValueSet(int64(r.st.Amount)),
	)
	if err != nil {
		r.logger.Error("upsert search attributes", "err", err)
	}
}

func (r *paymentRun) details() string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** · payment `%s` · %s CNY · order `%s` · tenant `%s`\n\n",
		r.st.Status, r.st.PaymentNo, r.st.Amount.Yuan(), r.st.OrderID, r.st.TenantID)
	fmt.Fprintf(&b, "expires %s · reconciliations %d", r.st.ExpireAt.Format(time.RFC3339), r.st.Reconciliations)
	if r.st.TradeNo != "" {
		fmt.Fprintf(&b, " · alipay trade `%s`", r.st.TradeNo)
	}
	if r.st.Anomaly != "" {
		fmt.Fprintf(&b, "\n\n⚠ %s", r.st.Anomaly)
	}
	return b.String()
}

// waitForOutcome is the selector loop: callback signals, the reconciliation timer and
// expiry, until the payment is final.
func (r *paymentRun) waitForOutcome(ctx workflow.Context) error {
	signals := workflow.GetSignalChannel(ctx, NotificationSignal)
	var expiry workflow.Future
	if r.st.Status == payment.StatusPending {
		d := r.st.ExpireAt.Sub(workflow.Now(ctx))
		if d < 0 {
			d = 0
		}
		expiry = workflow.NewTimerWithOptions(ctx, d, workflow.TimerOptions{Summary: "payment expiry"})
	}
	for r.st.Status == payment.StatusPending {
		reconcileCtx, cancelReconcile := workflow.WithCancel(ctx)
		reconcile := workflow.NewTimerWithOptions(reconcileCtx, r.timing.ReconcileInterval, workflow.TimerOptions{Summary: "reconcile with alipay"})
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) {
			var n NotificationPayload
			c.Receive(ctx, &n)
			r.onNotification(ctx, n)
		})
		sel.AddFuture(reconcile, func(workflow.Future) { r.reconcile(ctx) })
		if expiry != nil {
			sel.AddFuture(expiry, func(workflow.Future) {
				expiry = nil
				r.closePath(ctx, "expired")
			})
		}
		sel.Select(ctx)
		cancelReconcile()
		if ctx.Err() != nil {
			return nil
		}
		if r.st.Status == payment.StatusPending && workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return r.continueAsNew(ctx, signals)
		}
	}
	// Drain signals that arrived with the final transition, so none is lost silently.
	for {
		var n NotificationPayload
		if !signals.ReceiveAsync(&n) {
			break
		}
		r.onNotification(ctx, n)
	}
	return nil
}

func (r *paymentRun) continueAsNew(ctx workflow.Context, signals workflow.ReceiveChannel) error {
	for {
		var n NotificationPayload
		if !signals.ReceiveAsync(&n) {
			break
		}
		r.onNotification(ctx, n)
	}
	if r.st.Status != payment.StatusPending {
		return nil
	}
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	st := r.st
	next := r.in
	next.State = &st
	next.PaymentNo = st.PaymentNo
	return workflow.NewContinueAsNewError(ctx, PaymentWorkflowName, next)
}

func (r *paymentRun) seen(notifyID string) bool {
	for _, id := range r.st.SeenNotifyIDs {
		if id == notifyID {
			return true
		}
	}
	return false
}

func (r *paymentRun) onNotification(ctx workflow.Context, n NotificationPayload) {
	if n.NotifyID != "" && r.seen(n.NotifyID) {
		r.logger.Info("duplicate notification ignored", "notify_id", n.NotifyID, "payment_no", r.st.PaymentNo)
		return
	}
	if n.NotifyID != "" {
		r.st.SeenNotifyIDs = append(r.st.SeenNotifyIDs, n.NotifyID)
		if len(r.st.SeenNotifyIDs) > maxSeenNotifyIDs {
			r.st.SeenNotifyIDs = r.st.SeenNotifyIDs[len(r.st.SeenNotifyIDs)-maxSeenNotifyIDs:]
		}
	}
	if n.PaymentNo != "" && n.PaymentNo != r.st.PaymentNo {
		r.logger.Error("notification for another payment ignored", "notify_id", n.NotifyID, "payment_no", n.PaymentNo)
		return
	}
	if n.State != payment.TradePaid || n.Amount != r.st.Amount {
		// Only a paid notification for the right amount advances the state machine.
		r.logger.Info("notification does not advance the payment", "notify_id", n.NotifyID, "trade_status", n.TradeStatus)
		return
	}
	if r.st.Status != payment.StatusPending {
		return
	}
	r.successPath(ctx, n.TradeNo, n.PaidAt, "callback")
}

func (r *paymentRun) reconcile(ctx workflow.Context) {
	r.st.Reconciliations++
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
		r.closePath(ctx, "expired")
	}
	workflow.SetCurrentDetails(ctx, r.details())
}

// closePath closes the trade at Alipay first, so it can no longer be paid, then closes
// the payment locally. A close refused because the trade is paid becomes a success.
func (r *paymentRun) closePath(ctx workflow.Context, reason string) {
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
			// Not closable yet and not paid: try again on the next tick.
			return
		}
	}
	r.closeLocally(ctx, reason)
}

func (r *paymentRun) closeLocally(ctx workflow.Context, reason string) {
	var t payment.Transition
	err := workflow.ExecuteLocalActivity(localOptions(ctx), a.ClosePayment, activities.ClosePaymentInput{
		PaymentNo: r.st.PaymentNo, Reason: reason,
	}).Get(ctx, &t)
	if err != nil {
		r.logger.Error("local close failed", "payment_no", r.st.PaymentNo, "err", err)
		return
	}
	r.adopt(t.Payment)
	if t.EventID != "" {
		r.st.EventID = t.EventID
	}
	r.upsertSearchAttributes(ctx)
}

func (r *paymentRun) adopt(p payment.Payment) {
	r.st.Status = p.Status
	if p.TradeNo != "" {
		r.st.TradeNo = p.TradeNo
	}
	if !p.PaidAt.IsZero() {
		r.st.PaidAt = p.PaidAt
	}
}

// paidAtAlipay takes the success path for a trade Alipay reports paid, unless the amount
// differs, which is recorded for an operator and never marked paid.
func (r *paymentRun) paidAtAlipay(ctx workflow.Context, trade payment.Trade, source string) {
	if trade.Amount != r.st.Amount {
		r.recordAnomaly(ctx, "amount_mismatch", trade.TradeNo,
			fmt.Sprintf("alipay reports %d fen paid (%s), payment is %d fen", trade.Amount, source, r.st.Amount))
		return
	}
	r.successPath(ctx, trade.TradeNo, trade.PaidAt, source)
}

// successPath is the one local transaction that marks the payment paid. Side effects
// (grant, webhook) follow in afterPaid, after the commit.
func (r *paymentRun) successPath(ctx workflow.Context, tradeNo string, paidAt time.Time, source string) {
	var t payment.Transition
	err := workflow.ExecuteLocalActivity(localOptions(ctx), a.MarkPaid, activities.MarkPaidInput{
		PaymentNo: r.st.PaymentNo, TenantID: r.st.TenantID, OrderID: r.st.OrderID, TradeNo: tradeNo, PaidAt: paidAt,
	}).Get(ctx, &t)
	if err != nil {
		r.logger.Error("mark paid failed; reconciliation will retry", "payment_no", r.st.PaymentNo, "err", err)
		return
	}
	r.adopt(t.Payment)
	if t.EventID != "" {
		r.st.EventID = t.EventID
	}
	if t.Payment.Status != payment.StatusPaid {
		// Money arrived for a payment that is no longer pending. Never drop it silently.
		r.recordAnomaly(ctx, "paid_after_close", tradeNo, fmt.Sprintf("alipay reports paid (%s) but payment is %s", source, t.Payment.Status))
		return
	}
	r.logger.Info("payment paid", "payment_no", r.st.PaymentNo, "trade_no", r.st.TradeNo, "source", source, "changed", t.Changed)
	r.upsertSearchAttributes(ctx)
}

func (r *paymentRun) recordAnomaly(ctx workflow.Context, kind, tradeNo, detail string) {
	r.st.Anomaly = kind + ": " + detail
	err := workflow.ExecuteLocalActivity(localOptions(ctx), a.RecordAnomaly, activities.AnomalyInput{
		Kind: kind, TenantID: r.st.TenantID, PaymentNo: r.st.PaymentNo, TradeNo: tradeNo, Amount: r.st.Amount, Detail: detail,
	}).Get(ctx, nil)
	if err != nil {
		r.logger.Error("record anomaly failed", "payment_no", r.st.PaymentNo, "err", err)
	}
	workflow.SetCurrentDetails(ctx, r.details())
}

// afterFinal runs the side effects of a committed final state, each its own idempotent
// step: the benefit grant for a paid payment, then the merchant webhook. Neither can roll
// the payment back; a merchant that is down only delays its webhook.
func (r *paymentRun) afterFinal(ctx workflow.Context) {
	if r.st.Status == payment.StatusPaid {
		var created bool
		err := workflow.ExecuteLocalActivity(localOptions(ctx), a.GrantBenefit, activities.GrantBenefitInput{
			TenantID: r.st.TenantID, PaymentNo: r.st.PaymentNo, OrderID: r.st.OrderID,
		}).Get(ctx, &created)
		if err != nil {
			r.logger.Error("grant benefit failed", "payment_no", r.st.PaymentNo, "err", err)
		} else {
			r.st.BenefitGranted = true
		}
	}
	if r.st.EventID == "" {
		return
	}
	webhookCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Second,
		Summary:             "deliver merchant webhook",
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    r.timing.WebhookInitialInterval,
			BackoffCoefficient: 2,
			MaximumInterval:    r.timing.WebhookMaxInterval,
			MaximumAttempts:    r.timing.WebhookMaxAttempts,
		},
	})
	if err := workflow.ExecuteActivity(webhookCtx, a.DeliverWebhook, r.st.EventID).Get(ctx, nil); err != nil {
		r.logger.Warn("merchant webhook not delivered; the sweeper will redeliver it", "payment_no", r.st.PaymentNo, "event_id", r.st.EventID, "err", err)
		return
	}
	r.st.WebhookSent = true
}
