package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
)

// a references activities by method; Temporal calls them on the worker's instance.
var a *activities.Activities

// errLegacyDone ends a pre-version run that has already finished its cancelled path.
var errLegacyDone = errors.New("legacy run done")

const maxSeenNotifyIDs = 64

// paymentRun is the state of one run of PaymentWorkflow.
type paymentRun struct {
	in     PaymentInput
	timing Timing
	st     PaymentState
	// legacy is true for a run that started before closeOnAlipayWord (payment_v0.go).
	legacy bool
	// current is true for a run that started on PaymentChangesID: every change below is on
	// without asking for its own id.
	current bool
	// makingWay and cancelWebhook let a checkout for a new payment end a finished run early.
	makingWay     bool
	cancelWebhook workflow.CancelFunc
	// drain and localClose remember whether this run has signalsToTheEnd and
	// closePathLocal, asked once at their first use.
	drain, localClose versionGate
	// forgetFailed remembers whether this run has forgetFailedSignals, asked at the first
	// notification signal whose MarkPaid failed.
	forgetFailed versionGate
	// beforeCAN remembers whether this run has signalsBeforeContinueAsNew, asked at the
	// first signal that arrives while it waits for its handlers before continuing as new.
	beforeCAN versionGate
	// v2 is true for a run that started on version 2 of PaymentChangesID or later: it
	// leaves to the close path a backoff query due less than half its step before expiry.
	// v3 (version 3 or later): a run for an Opened payment reads the payment's row before
	// it answers a joining checkout. v4: a run whose payment the scheduled reconciler
	// queries keeps no reconciliation timer before expiry (reconcile.go).
	v2, v3, v4 bool
	logger     interface {
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
	r := &paymentRun{in: in, timing: in.Timing.WithDefaults(), logger: workflow.GetLogger(ctx)}
	changes := workflow.GetVersion(ctx, PaymentChangesID, workflow.DefaultVersion, PaymentChangesVersion)
	r.current, r.v2, r.v3, r.v4 = changes >= 1, changes >= 2, changes >= 3, changes >= 4
	if r.current {
		r.drain, r.localClose = versionOn, versionOn
	} else {
		r.legacy = workflow.GetVersion(ctx, closeOnAlipayWord, workflow.DefaultVersion, 1) == workflow.DefaultVersion
	}
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
			var appErr *temporal.ApplicationError
			if errors.As(err, &appErr) {
				r.st.InitErrorType = appErr.Type()
			}
			workflow.SetCurrentDetails(ctx, r.details())
			if r.readsSignalsToTheEnd(ctx) {
				// A notification may be why this run exists (a SignalWithStart that adopts a
				// pending payment): Alipay's word that it is paid holds even though the
				// trade could not be opened again.
				r.drainSignals(ctx)
				if r.st.Status == payment.StatusPaid {
					r.afterFinal(ctx)
					return r.finish(ctx)
				}
			}
			_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
			if r.st.InitErrorType == activities.ErrTypeOrderPaid {
				// Not a failure: the order is paid and this checkout was answered so.
				return r.st, nil
			}
			return r.st, err
		}
	}
	ctx, err := r.waitForOutcome(ctx)
	if errors.Is(err, errLegacyDone) {
		return r.st, nil
	}
	if err != nil {
		return r.st, err
	}
	if r.st.Status.Final() {
		r.afterFinal(ctx)
	}
	return r.finish(ctx)
}

// signalsToTheEnd is the change id of the version that reads every notification signal
// until the run returns: after the grant and the webhook (which can take an hour of
// retries), after making way for a new checkout, and after an init error. Before it, a
// signal that arrived on those paths was accepted by Temporal, acknowledged to Alipay and
// never read.
const signalsToTheEnd = "signals-to-the-end"

// readsSignalsToTheEnd reports whether this run drains its signals on every way out; it is
// asked once per run, at its first way out.
func (r *paymentRun) readsSignalsToTheEnd(ctx workflow.Context) bool {
	return !r.legacy && r.drain.on(ctx, signalsToTheEnd)
}

// PaymentChangesID is the change id of the version that has every earlier change of the
// payment workflow at once: closeOnAlipayWord, webhookLocalFirst, reconcileBackoff,
// signalsToTheEnd and closePathLocal. For each first GetVersion of a change id, the SDK
// records a marker and upserts the TemporalChangeVersion search attribute, a visibility
// write on the server: a run that asks this one id pays for one of each instead of one
// per change (four on a paid payment's path). Runs recorded before it answer
// DefaultVersion here (no command is written in a replay) and ask each change's own id,
// as they were recorded. A later change gets its own id, asked only by runs on this one.
// Once no run from before payment-changes-1 is open (a visibility query for running
// PaymentWorkflows started before its deploy answers none), and no worker records each
// change (worker.Config.EachPaymentChange), the per-change gates and the legacy steps of
// payment_v0.go can go: every open run then answers 1 here.
//
// Version 2 of it adds one change for runs that start on it: a backoff query that would
// fall less than half its step before expiry is left to the close path's query at expiry
// (an early jitter on the first three queries used to buy an abandoned checkout a fourth
// query seconds before the close path's). Runs recorded on version 1 keep their schedule.
// Version 3 adds, for runs that start on it, confirmOpened: a run for a payment the API
// opened reads the payment's row once before it answers a joining checkout. Version 4
// adds, for runs that start on it, the scheduled reconciler: a run whose payment was
// created with a first query (payments.next_query_at) keeps no timer of its own before
// expiry; the reconciler queries Alipay on the payment's schedule and wakes the run with
// ReconcileSignal when Alipay says paid. A worker from
// before version N fails the workflow task of a version-N run until a newer worker takes
// it, so a deploy replaces every worker before old ones pick up new runs.
const PaymentChangesID = "payment-changes-1"

// PaymentChangesVersion is the version of PaymentChangesID a new run records.
const PaymentChangesVersion = 4

// versionGate asks workflow.GetVersion for one change id once per run, at its first use,
// and remembers the answer: the change's version 1 is on, DefaultVersion off.
type versionGate struct{ asked, yes bool }

// versionOn is a gate whose change is known to be on (a run on PaymentChangesID).
var versionOn = versionGate{asked: true, yes: true}

func (g *versionGate) on(ctx workflow.Context, changeID string) bool {
	if !g.asked {
		g.asked = true
		g.yes = workflow.GetVersion(ctx, changeID, workflow.DefaultVersion, 1) == 1
	}
	return g.yes
}

// drainSignals handles every notification still in the channel: a paid one for this run's
// closed or failed payment records paid_after_close, one for another payment of the
// order is settled on that payment, one for a pending payment takes the success path.
func (r *paymentRun) drainSignals(ctx workflow.Context) {
	signals := workflow.GetSignalChannel(ctx, NotificationSignal)
	for r.takeSignal(ctx, signals, false) {
	}
}

// takeSignal takes the next notification signal off c, waiting for one if wait is true,
// and acts on it; false if there was none to take. The signal is received raw and decoded
// here: a payload that does not decode (anyone who can reach Temporal can send one) is
// recorded as an unverified signal and ignored, never left to the SDK, which would drop
// it silently and, inside a selector's callback, block the run until the next signal.
func (r *paymentRun) takeSignal(ctx workflow.Context, c workflow.ReceiveChannel, wait bool) bool {
	var raw converter.RawValue
	if wait {
		c.Receive(ctx, &raw)
	} else if !c.ReceiveAsync(&raw) {
		return false
	}
	var n NotificationPayload
	err := errors.New("the signal carries no payload")
	if p := raw.Payload(); p != nil {
		err = converter.GetDefaultDataConverter().FromPayload(p, &n)
	}
	if err != nil {
		r.logger.Error("notification signal that does not decode ignored", "payment_no", r.st.PaymentNo, "err", err)
		r.recordAnomaly(ctx, payment.AnomalyUnverifiedSignal, "",
			fmt.Sprintf("a notification signal whose payload does not decode was ignored: %v", err))
		return true
	}
	r.onNotification(ctx, n)
	return true
}

// finish ends a run that got past its init: every handler done and, from
// signalsToTheEnd on, every signal read, including those that arrive while the handlers
// finish.
func (r *paymentRun) finish(ctx workflow.Context) (PaymentState, error) {
	drain := r.readsSignalsToTheEnd(ctx)
	for {
		if drain {
			r.drainSignals(ctx)
		}
		workflow.SetCurrentDetails(ctx, r.details())
		_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
		if !drain || workflow.GetSignalChannel(ctx, NotificationSignal).Len() == 0 {
			return r.st, nil
		}
	}
}

func (r *paymentRun) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, StateQuery, func() (PaymentState, error) { return r.st, nil }); err != nil {
		return fmt.Errorf("register query: %w", err)
	}
	err := workflow.SetUpdateHandlerWithOptions(ctx, CheckoutUpdate,
		func(ctx workflow.Context, req CheckoutRequest) (CheckoutResult, error) {
			joinedDuringInit := !r.st.Initialized
			if err := workflow.Await(ctx, func() bool { return r.st.Initialized || r.st.InitError != "" }); err != nil {
				return CheckoutResult{}, err
			}
			if err := r.confirmOpened(ctx); err != nil {
				return CheckoutResult{}, err
			}
			return r.answerCheckout(req, joinedDuringInit)
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req CheckoutRequest) error {
			return r.amountConflict(req)
		}})
	if err != nil {
		return fmt.Errorf("register update: %w", err)
	}
	return nil
}

// confirmOpened reads the row of a payment the API opened before this run began, once,
// before the run answers a joining checkout with it: the run was handed "pending" and a
// pay link, and never hands them on without the row's word. A payment that is no longer
// pending answers the checkout "retry" (the run learns why from its signal or its next
// tick, and the retry gets the final answer); a read that fails answers "unavailable".
func (r *paymentRun) confirmOpened(ctx workflow.Context) error {
	if !r.v3 || r.in.Opened == nil || r.st.OpenedConfirmed || r.st.Status != payment.StatusPending || r.st.InitError != "" {
		return nil
	}
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: 15 * time.Second, StartToCloseTimeout: 5 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 2 * time.Second},
	})
	var p payment.Payment
	if err := workflow.ExecuteLocalActivity(ctx, a.ReadPayment, r.st.PaymentNo).Get(ctx, &p); err != nil {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("payment %s of order %s could not be read: %v", r.st.PaymentNo, r.st.OrderID, err), activities.ErrTypeUnavailable, nil)
	}
	if p.Status != payment.StatusPending {
		r.logger.Info("opened payment is no longer pending; the joining checkout retries", "payment_no", r.st.PaymentNo, "status", p.Status)
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("payment %s of order %s is %s; retry", r.st.PaymentNo, r.st.OrderID, p.Status), activities.ErrTypeFinishing, nil)
	}
	r.st.OpenedConfirmed = true
	return nil
}

// amountConflict refuses a checkout whose amount or currency differs from the payment
// the run holds (for an adopting run, the adopted payment's).
func (r *paymentRun) amountConflict(req CheckoutRequest) error {
	if req.Amount != r.st.Amount || req.Currency != r.st.Currency {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("order %s is already being paid with %d fen %s (payment %s)", r.st.OrderID, r.st.Amount, r.st.Currency, r.st.PaymentNo),
			"AmountConflict", nil)
	}
	if r.st.Method != "" && req.Method.OrPage() != r.st.Method.OrPage() {
		// A joining checkout never gets a link of a method it did not ask for. The state
		// of a run from before Method was kept has none, and answers as it did.
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("order %s is already being paid by a %s payment (%s); pay that one, or cancel it before a checkout of another method",
				r.st.OrderID, r.st.Method, r.st.PaymentNo),
			"AmountConflict", nil)
	}
	return nil
}

// answerCheckout answers a checkout by the payment's status; it never hands out a dead
// payment. joinedDuringInit is true for the checkouts that started this run (or joined it
// before its trade was open): a refusal of the trade is their answer.
func (r *paymentRun) answerCheckout(req CheckoutRequest, joinedDuringInit bool) (CheckoutResult, error) {
	if r.st.InitError != "" {
		errType := r.st.InitErrorType
		switch errType {
		case activities.ErrTypeOrderPaid, activities.ErrTypeInvalid:
		default:
			// Not a refusal of the request (MySQL or the worker failed for longer than the
			// retries): the client may retry it.
			errType = activities.ErrTypeUnavailable
		}
		return CheckoutResult{}, temporal.NewNonRetryableApplicationError(r.st.InitError, errType, nil)
	}
	if err := r.amountConflict(req); err != nil {
		return CheckoutResult{}, err
	}
	switch {
	case r.st.Status == payment.StatusPaid && !req.Repurchase:
		return CheckoutResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("order %s is already paid by payment %s", r.st.OrderID, r.st.PaymentNo), activities.ErrTypeOrderPaid, nil)
	case r.st.OpenRefused != "" && !r.st.Adopted && (joinedDuringInit || r.st.Status == payment.StatusPending):
		return CheckoutResult{}, temporal.NewNonRetryableApplicationError(
			"alipay refused the trade: "+r.st.OpenRefused, activities.ErrTypeChannelRefused, nil)
	case r.st.OpenRefused != "" && r.st.Status == payment.StatusPending:
		// An adopted payment that can no longer be paid and that Alipay has not yet
		// confirmed closed: the order's next payment must wait for it, so the checkout is
		// answered as retryable, never refused for good.
		return CheckoutResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("payment %s of order %s is being closed; retry", r.st.PaymentNo, r.st.OrderID), activities.ErrTypeFinishing, nil)
	case r.st.Status.Final():
		// A new payment for this order needs a new run: stop the side work that keeps this
		// one open (the outbox and the sweeper deliver what it leaves) and let the caller
		// retry.
		r.makeWay()
		return CheckoutResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("payment %s of order %s is %s and its run is ending; retry", r.st.PaymentNo, r.st.OrderID, r.st.Status),
			activities.ErrTypeFinishing, nil)
	}
	return r.checkoutResult(), nil
}

// makeWay cancels the run's merchant webhook, if it is being delivered, so that the run
// ends and a new checkout of the order can start the next one. The event stays in the
// outbox, where the sweeper delivers it.
func (r *paymentRun) makeWay() {
	r.makingWay = true
	if r.cancelWebhook != nil {
		r.cancelWebhook()
	}
}

func (r *paymentRun) checkoutResult() CheckoutResult {
	return CheckoutResult{
		PaymentNo: r.st.PaymentNo, TenantID: r.st.TenantID, OrderID: r.st.OrderID, Status: r.st.Status,
		Amount: r.st.Amount, Currency: r.st.Currency, Subject: r.in.Subject,
		PayURL: r.st.PayURL, QRCode: r.st.QRCode, OrderString: r.st.OrderString, ExpireAt: r.st.ExpireAt,
	}
}

// newPaymentNo derives the out_trade_no of a payment at ch from the run ID: unique per
// run and identical on replay and on activity retries. An Alipay payment's is what every
// earlier build computed (its first 24 digits); a shorter one leaves out the UUID's
// version digit, which says nothing of the run, so that the digits kept carry 4 more
// bits of it.
func newPaymentNo(ctx workflow.Context, ch payment.Channel) string {
	return paymentNoOf(workflow.GetInfo(ctx).WorkflowExecution.RunID, workflow.Now(ctx), ch)
}

// paymentNoOf is newPaymentNo of the run runID at now.
func paymentNoOf(runID string, now time.Time, ch payment.Channel) string {
	run := strings.ReplaceAll(runID, "-", "")
	digits := ch.PaymentNoRandomDigits()
	if len(run) == 32 && digits < 24 {
		run = run[:12] + run[13:]
	}
	if len(run) > digits {
		run = run[:digits]
	}
	return "P" + now.UTC().Format("20060102") + run
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

// initialize gives the run its payment: the one the API opened, or the one it creates (or
// finds in the database), whose trade it opens at Alipay if the payment is pending.
func (r *paymentRun) initialize(ctx workflow.Context) error {
	if o := r.in.Opened; o != nil && r.in.PaymentNo != "" {
		r.adoptOpened(ctx, o)
		return nil
	}
	created, err := r.createPayment(ctx)
	if err != nil {
		return err
	}
	p := created.Payment
	r.upsertSearchAttributes(ctx)
	if p.Status == payment.StatusPending {
		refused, err := r.openTrade(ctx, p, created.Existed)
		if err != nil || refused {
			return err
		}
	}
	r.st.Initialized = true
	workflow.SetCurrentDetails(ctx, r.details())
	return nil
}

// adoptOpened takes o, the pending payment and pay link the API committed before starting
// this run (and answered the checkout with): nothing to create or open. Its status may
// have moved on since; every transition is a compare-and-set on the row, and a
// notification for it reaches this run as a signal.
func (r *paymentRun) adoptOpened(ctx workflow.Context, o *OpenedPayment) {
	r.st.Status, r.st.ExpireAt, r.st.Method = payment.StatusPending, o.ExpireAt.UTC(), r.in.Method.OrPage()
	r.st.PayURL, r.st.QRCode, r.st.OrderString = o.PayURL, o.QRCode, o.OrderString
	r.st.PayLinkIssued = true
	r.st.QueryScheduled = r.v4 && o.QueryScheduled
	r.st.Initialized = true
	workflow.SetCurrentDetails(ctx, r.details())
}

// createPayment creates the run's payment (its number and expiry chosen here unless the
// input carries them) and adopts whatever the database holds: a retry, a re-driven run,
// or a payment created for this order by an earlier run all converge on one row.
func (r *paymentRun) createPayment(ctx workflow.Context) (activities.CreatePaymentResult, error) {
	info := workflow.GetInfo(ctx)
	if r.st.PaymentNo == "" {
		r.st.PaymentNo = newPaymentNo(ctx, r.in.Method.Channel())
	}
	if r.st.ExpireAt.IsZero() {
		r.st.ExpireAt = workflow.Now(ctx).Add(r.timing.PaymentTTL).UTC().Truncate(time.Second)
	}
	var created activities.CreatePaymentResult
	err := workflow.ExecuteLocalActivity(localOptions(ctx), a.CreatePayment, activities.CreatePaymentInput{
		PaymentNo: r.st.PaymentNo, TenantID: r.in.TenantID, OrderID: r.in.OrderID, Amount: r.in.Amount,
		Currency: r.in.Currency, Subject: r.in.Subject, Method: r.in.Method, Repurchase: r.in.Repurchase,
		ExpireAt: r.st.ExpireAt, WorkflowID: info.WorkflowExecution.ID, QueryInterval: r.queryInterval(),
	}).Get(ctx, &created)
	if err != nil {
		return created, fmt.Errorf("create payment: %w", err)
	}
	p := created.Payment
	r.st.PaymentNo, r.st.Amount, r.st.Currency = p.PaymentNo, p.Amount, p.Currency
	r.st.Status, r.st.ExpireAt, r.st.TradeNo, r.st.PaidAt = p.Status, p.ExpireAt.UTC(), p.TradeNo, p.PaidAt
	r.st.Method = r.in.Method.OrPage()
	if p.Method != "" {
		r.st.Method = p.Method
	}
	r.st.QueryScheduled = r.v4 && created.QueryScheduled
	return created, nil
}

// openTrade opens the trade of p, a pending payment (existed: adopted from an earlier
// run), at Alipay and keeps its pay link. refused is true when Alipay refused the trade
// and openRefused has put the run on its way: initialize has nothing left to do.
func (r *paymentRun) openTrade(ctx workflow.Context, p payment.Payment, existed bool) (refused bool, err error) {
	// An adopted payment keeps the kind of trade it was created with.
	method := r.in.Method
	if p.Method != "" {
		method = p.Method
	}
	if existed {
		// An earlier run may have handed this payment's cashier URL or QR code to the
		// buyer.
		r.st.Adopted, r.st.PayLinkIssued = true, true
	}
	var opened activities.OpenTradeResult
	err = workflow.ExecuteLocalActivity(localOptions(ctx), a.OpenTrade, activities.OpenTradeInput{
		PaymentNo: p.PaymentNo, Subject: p.Subject, Amount: p.Amount, ExpireAt: r.st.ExpireAt,
		Method: method, ReturnURL: r.in.ReturnURL, QuitURL: r.in.QuitURL, Payer: r.in.Payer,
	}).Get(ctx, &opened)
	if err != nil {
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || !appErr.NonRetryable() {
			return false, fmt.Errorf("open trade: %w", err)
		}
		r.openRefused(ctx, p.PaymentNo, appErr.Message(), err)
		return true, nil
	}
	r.st.PayURL, r.st.QRCode, r.st.OrderString = opened.PayURL, opened.QRCode, opened.OrderString
	// An app order string is a pay link like a cashier URL: the buyer's Alipay app
	// creates the trade with it until time_expire. No recorded history carries one
	// (app pay is newer than every run that may replay), so this needs no version.
	if opened.PayURL != "" || opened.QRCode != "" || opened.OrderString != "" {
		r.st.PayLinkIssued = true
	}
	return false, nil
}

// openRefused takes payment paymentNo through the close path after Alipay (or the adapter)
// refused to open its trade with refusal (err). For an adopted payment that may mean it
// is already paid (precreate answers ACQ.TRADE_HAS_SUCCESS) or past its expiry, so it is
// closed locally only once Alipay confirms that the trade cannot be paid, and a paid trade
// takes the success path. A legacy run takes its own path (legacyOpenRefused).
func (r *paymentRun) openRefused(ctx workflow.Context, paymentNo, refusal string, err error) {
	if r.legacy {
		r.logger.Error("alipay refused the trade; closing the payment", "payment_no", paymentNo, "err", err)
		r.legacyOpenRefused(ctx)
		r.st.Initialized = true
		return
	}
	r.st.OpenRefused = refusal
	r.logger.Error("alipay refused to open the trade; closing the payment once alipay confirms it cannot be paid",
		"payment_no", paymentNo, "err", err)
	r.closePath(ctx, "channel_refused")
	r.st.Initialized = true
	workflow.SetCurrentDetails(ctx, r.details())
}

func (r *paymentRun) upsertSearchAttributes(ctx workflow.Context) {
	upsertSearchAttributes(ctx, r.logger,
		SATenantID.ValueSet(r.st.TenantID),
		SAOrderID.ValueSet(r.st.OrderID),
		SAPaymentNo.ValueSet(r.st.PaymentNo),
		SAPaymentStatus.ValueSet(r.st.Status.String()),
		SAAmountFen.ValueSet(int64(r.st.Amount)),
	)
}

func (r *paymentRun) details() string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** · payment `%s` · %s CNY · order `%s` · tenant `%s`\n\n",
		r.st.Status, r.st.PaymentNo, r.st.Amount.Yuan(), r.st.OrderID, r.st.TenantID)
	fmt.Fprintf(&b, "expires %s · reconciliations %d", r.st.ExpireAt.Format(time.RFC3339), r.st.Reconciliations)
	if r.st.Status == payment.StatusPending && !r.st.NextReconcileAt.IsZero() {
		fmt.Fprintf(&b, " · next %s", r.st.NextReconcileAt.UTC().Format(time.RFC3339))
	}
	if r.st.Status == payment.StatusPending && r.st.QueryScheduled {
		b.WriteString(" · queried by the scheduled reconciler")
	}
	if r.st.TradeNo != "" {
		fmt.Fprintf(&b, " · alipay trade `%s`", r.st.TradeNo)
	}
	if r.st.CancelRequested && r.st.Status == payment.StatusPending {
		b.WriteString("\n\ncancel requested: closing as soon as Alipay confirms the trade cannot be paid")
	}
	if r.st.OpenRefused != "" {
		fmt.Fprintf(&b, "\n\nalipay refused to open the trade: %s", r.st.OpenRefused)
	}
	if r.st.InitError != "" {
		fmt.Fprintf(&b, "\n\nnot created: %s", r.st.InitError)
	}
	if r.st.Anomaly != "" {
		fmt.Fprintf(&b, "\n\n⚠ %s", r.st.Anomaly)
	}
	return b.String()
}

// waitForOutcome is the selector loop: callback signals, the reconciliation timer and
// expiry, until the payment is final. An operator's cancel request turns the loop into
// the close path: from then on the run works on a context that cannot be cancelled, closes
// the trade at Alipay and then locally (or takes the success path if Alipay says paid),
// and keeps trying on every tick until Alipay has confirmed one or the other. It returns
// the context the rest of the run must use.
func (r *paymentRun) waitForOutcome(ctx workflow.Context) (workflow.Context, error) {
	signals := workflow.GetSignalChannel(ctx, NotificationSignal)
	w := &outcomeWait{r: r, signals: signals, wakes: workflow.GetSignalChannel(ctx, ReconcileSignal), expiry: r.expiryTimer(ctx)}
	if r.st.CancelRequested {
		// Carried over continue-as-new: the cancel still holds.
		ctx, _ = workflow.NewDisconnectedContext(ctx)
	}
	w.backoff = !r.legacy && r.st.Status == payment.StatusPending &&
		(r.current || workflow.GetVersion(ctx, reconcileBackoff, workflow.DefaultVersion, 1) == 1)
	for r.st.Status == payment.StatusPending {
		if ctx.Err() != nil && r.legacy {
			return r.legacyCancelled(ctx)
		}
		if ctx.Err() != nil {
			ctx = w.cancel(ctx)
			continue
		}
		w.selectOnce(ctx)
		if r.st.Status == payment.StatusPending && ctx.Err() == nil && workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return ctx, r.continueAsNew(ctx, signals)
		}
	}
	// Drain signals that arrived with the final transition, so none is lost silently; a
	// wake has nothing left to do.
	for r.takeSignal(ctx, signals, false) {
	}
	for w.wakes.ReceiveAsync(nil) {
	}
	return ctx, nil
}

// outcomeWait is the state of waitForOutcome's loop: the signal channel, the expiry
// timer (nil once it fired or the payment is being cancelled) and whether reconciliation
// follows the backoff schedule.
type outcomeWait struct {
	r       *paymentRun
	signals workflow.ReceiveChannel
	// wakes is the scheduled reconciler's ReconcileSignal channel, read by a run whose
	// payment it queries.
	wakes   workflow.ReceiveChannel
	expiry  workflow.Future
	backoff bool
}

// expiryTimer starts the payment's expiry timer, unless it is no longer pending or is
// being cancelled.
func (r *paymentRun) expiryTimer(ctx workflow.Context) workflow.Future {
	if r.st.Status != payment.StatusPending || r.st.CancelRequested {
		return nil
	}
	d := max(r.st.ExpireAt.Sub(workflow.Now(ctx)), 0)
	return workflow.NewTimerWithOptions(ctx, d, workflow.TimerOptions{Summary: "payment expiry"})
}

// cancel turns the loop into the close path on a context the cancel no longer reaches,
// which it returns.
func (w *outcomeWait) cancel(ctx workflow.Context) workflow.Context {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	w.r.st.CancelRequested, w.expiry = true, nil
	w.r.logger.Info("cancel requested; closing the payment", "payment_no", w.r.st.PaymentNo)
	w.r.closePath(ctx, "cancelled")
	w.closeRetry(ctx)
	workflow.SetCurrentDetails(ctx, w.r.details())
	return ctx
}

// closeRetry schedules the next attempt of a close Alipay has not confirmed.
func (w *outcomeWait) closeRetry(ctx workflow.Context) {
	if w.backoff {
		w.r.retryCloseLater(ctx)
	}
}

// selectOnce waits for the first of a signal, the reconciliation timer and expiry, and
// handles it.
func (w *outcomeWait) selectOnce(ctx workflow.Context) {
	reconcileCtx, cancelReconcile := workflow.WithCancel(ctx)
	reconcile := w.reconcileTimer(ctx, reconcileCtx)
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(w.signals, func(c workflow.ReceiveChannel, _ bool) {
		w.r.takeSignal(ctx, c, true)
	})
	if w.r.st.QueryScheduled {
		sel.AddReceive(w.wakes, func(c workflow.ReceiveChannel, _ bool) { w.r.woken(ctx, c) })
	}
	if reconcile != nil {
		sel.AddFuture(reconcile, func(f workflow.Future) { w.reconciled(ctx, f) })
	}
	if w.expiry != nil {
		sel.AddFuture(w.expiry, func(f workflow.Future) { w.expired(ctx, f) })
	}
	sel.Select(ctx)
	cancelReconcile()
}

// reconcileTimer starts the timer of the next query at Alipay on reconcileCtx: at the
// backoff schedule's next time, or after the fixed interval of runs before it.
func (w *outcomeWait) reconcileTimer(ctx, reconcileCtx workflow.Context) workflow.Future {
	r := w.r
	if !w.backoff {
		return workflow.NewTimerWithOptions(reconcileCtx, r.timing.ReconcileInterval, workflow.TimerOptions{Summary: "reconcile with alipay"})
	}
	if r.st.QueryScheduled && !r.closing(workflow.Now(ctx)) {
		// The scheduled reconciler queries before expiry; the expiry timer starts the
		// close path, whose retries keep a timer. A wake kept for later is the one timer.
		if r.st.NextReconcileAt.IsZero() {
			return nil
		}
		return workflow.NewTimerWithOptions(reconcileCtx, max(r.st.NextReconcileAt.Sub(workflow.Now(ctx)), 0),
			workflow.TimerOptions{Summary: "kept reconciler wake"})
	}
	if r.st.NextReconcileAt.IsZero() {
		r.scheduleReconcile(workflow.Now(ctx), r.st.Queries)
	}
	if r.st.NextReconcileAt.IsZero() {
		return nil
	}
	return workflow.NewTimerWithOptions(reconcileCtx, max(r.st.NextReconcileAt.Sub(workflow.Now(ctx)), 0),
		workflow.TimerOptions{Summary: "reconcile with alipay"})
}

// reconciled queries Alipay when the reconciliation timer fired (a legacy run also when
// it was cancelled).
func (w *outcomeWait) reconciled(ctx workflow.Context, f workflow.Future) {
	switch {
	case w.r.st.QueryScheduled && !w.r.closing(workflow.Now(ctx)):
		if f.Get(ctx, nil) == nil {
			w.r.queryOnWake(ctx)
		}
	case w.backoff && f.Get(ctx, nil) == nil:
		w.r.backoffReconcile(ctx)
	case w.backoff:
	case f.Get(ctx, nil) == nil || w.r.legacy:
		w.r.reconcile(ctx)
	}
}

// expired closes the payment when its expiry timer fired.
func (w *outcomeWait) expired(ctx workflow.Context, f workflow.Future) {
	w.expiry = nil
	switch {
	case w.r.legacy:
		w.r.legacyClosePath(ctx, "expired")
	case f.Get(ctx, nil) == nil:
		w.r.closePath(ctx, "expired")
		w.closeRetry(ctx)
		workflow.SetCurrentDetails(ctx, w.r.details())
	}
}

// signalsBeforeContinueAsNew is the change id of the version that reads, before the run
// continues as new, the signals that arrived while it waited for its handlers to finish
// (a joining checkout reading the payment's row), and waits and reads again until none is
// left: before it, such a notification or reconciler's wake was accepted by Temporal and
// dropped with the run ("unhandled signals"). The inbox hands a notification over again
// and the reconciler wakes again, so it cost time, not money. The id is asked lazily,
// only once such a signal is there after the wait, a case the code before it never read:
// a run that never had one records no marker and replays as it was recorded, and a run
// recorded before it that had one answers DefaultVersion on replay and continues as new
// as it did, the signal dropped. Like every change after PaymentChangesID, only a run on
// that id asks it (a run recording each change's own id stays replayable by a build from
// before PaymentChangesID).
const signalsBeforeContinueAsNew = "signals-before-continue-as-new"

// continueAsNew continues a pending payment's run as new with its state, once every
// handler has finished and every signal is read; nil if a signal it read made the
// payment final, which the run then finishes.
func (r *paymentRun) continueAsNew(ctx workflow.Context, signals workflow.ReceiveChannel) error {
	wakes := workflow.GetSignalChannel(ctx, ReconcileSignal)
	for {
		r.readBeforeContinuing(ctx, signals, wakes)
		if r.st.Status != payment.StatusPending {
			return nil
		}
		_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
		// The gate is asked only here, with a signal waiting: see signalsBeforeContinueAsNew.
		if !r.arrivedWhileHandlersFinished(signals, wakes) || !r.current || !r.beforeCAN.on(ctx, signalsBeforeContinueAsNew) {
			break
		}
	}
	st := r.st
	next := r.in
	next.State = &st
	next.PaymentNo = st.PaymentNo
	return workflow.NewContinueAsNewError(ctx, PaymentWorkflowName, next)
}

// readBeforeContinuing handles every notification waiting in signals and, for a run whose
// payment the reconciler queries, takes every wake waiting in wakes: a wake not yet acted
// on is carried over as a kept one, and the next run queries at once.
func (r *paymentRun) readBeforeContinuing(ctx workflow.Context, signals, wakes workflow.ReceiveChannel) {
	for r.takeSignal(ctx, signals, false) {
	}
	if !r.st.QueryScheduled {
		return
	}
	for wakes.ReceiveAsync(nil) {
		if r.st.NextReconcileAt.IsZero() {
			r.st.NextReconcileAt = workflow.Now(ctx)
		}
	}
}

// arrivedWhileHandlersFinished reports whether a signal that readBeforeContinuing reads
// is waiting: one that arrived after it last read them.
func (r *paymentRun) arrivedWhileHandlersFinished(signals, wakes workflow.ReceiveChannel) bool {
	return signals.Len() > 0 || (r.st.QueryScheduled && wakes.Len() > 0)
}

func (r *paymentRun) seen(notifyID string) bool {
	for _, id := range r.st.SeenNotifyIDs {
		if id == notifyID {
			return true
		}
	}
	return false
}

// firstSight records the notification's notify_id among those the run has seen (the
// last maxSeenNotifyIDs); false if it was seen already, a duplicate to ignore.
func (r *paymentRun) firstSight(n NotificationPayload) bool {
	if n.NotifyID == "" {
		return true
	}
	if r.seen(n.NotifyID) {
		r.logger.Info("duplicate notification ignored", "notify_id", n.NotifyID, "payment_no", r.st.PaymentNo)
		return false
	}
	r.st.SeenNotifyIDs = append(r.st.SeenNotifyIDs, n.NotifyID)
	if len(r.st.SeenNotifyIDs) > maxSeenNotifyIDs {
		r.st.SeenNotifyIDs = r.st.SeenNotifyIDs[len(r.st.SeenNotifyIDs)-maxSeenNotifyIDs:]
	}
	return true
}

// onNotification applies one of Alipay's notifications handed over by the inbox: a paid
// one for the right amount advances the payment, once per notify_id.
func (r *paymentRun) onNotification(ctx workflow.Context, n NotificationPayload) {
	if !r.firstSight(n) {
		return
	}
	if n.PaymentNo != "" && n.PaymentNo != r.st.PaymentNo {
		if r.legacy || n.State != payment.TradePaid {
			r.logger.Error("notification for another payment ignored", "notify_id", n.NotifyID, "payment_no", n.PaymentNo)
			return
		}
		r.paidForAnotherPayment(ctx, n)
		return
	}
	if n.State != payment.TradePaid || n.Amount != r.st.Amount {
		// Only a paid notification for the right amount advances the state machine.
		r.logger.Info("notification does not advance the payment", "notify_id", n.NotifyID, "trade_status", n.TradeStatus)
		return
	}
	switch {
	case r.st.Status == payment.StatusPending:
		if !r.successPath(ctx, n.TradeNo, n.PaidAt, "callback", &n) && n.NotifyID != "" && r.forgetsFailedSignals(ctx) {
			// The notification could not be confirmed or acted on (MySQL down for the local
			// activity's whole window): the inbox hands it over again until the payment is
			// PAID, and that hand-over must not be taken for a duplicate.
			r.forget(n.NotifyID)
		}
	case r.st.Status == payment.StatusPaid, r.legacy:
		// Already paid: a redelivery, or a notification that raced the reconciliation.
	default:
		// Money for a payment that is closed or failed locally. Never drop it silently.
		r.recordAnomaly(ctx, "paid_after_close", n.TradeNo,
			fmt.Sprintf("alipay notified %s (notify_id %s) for a payment that is %s", n.TradeStatus, n.NotifyID, r.st.Status))
	}
}

func (r *paymentRun) reconcile(ctx workflow.Context) {
	r.st.Reconciliations++
	if r.legacy {
		r.legacyReconcile(ctx)
		return
	}
	if r.st.CancelRequested || !workflow.Now(ctx).Before(r.st.ExpireAt) {
		// Past expiry or cancelled: the close path asks Alipay itself (close, then query),
		// and a failure anywhere in it is retried on the next tick.
		r.closePath(ctx, r.closeReason())
		workflow.SetCurrentDetails(ctx, r.details())
		return
	}
	var trade payment.Trade
	err := workflow.ExecuteActivity(channelOptions(ctx, 3, "query trade at alipay"), a.QueryTrade, r.st.PaymentNo).Get(ctx, &trade)
	if err != nil {
		r.logger.Warn("reconciliation query failed; will retry on the next tick", "payment_no", r.st.PaymentNo, "err", err)
		return
	}
	if trade.State == payment.TradePaid {
		r.paidAtAlipay(ctx, trade, "reconciliation")
	}
	workflow.SetCurrentDetails(ctx, r.details())
}

// closePath closes the trade at Alipay first, so it can no longer be paid, then closes
// the payment locally. The payment is closed locally only after Alipay has confirmed that
// the trade cannot be paid: its close succeeded, or a query answers closed, or it answers
// not-exist at a time when no trade can be created any more. A close refused because the
// trade is paid becomes a success; any other answer leaves the payment pending for the
// next tick.
func (r *paymentRun) closePath(ctx workflow.Context, reason string) {
	if r.st.Status != payment.StatusPending {
		return
	}
	var out payment.CloseOutcome
	err := r.closePathCall(ctx, "close trade at alipay", a.CloseTrade, &out)
	if err == nil && out == payment.CloseDone {
		r.closeLocally(ctx, reason)
		return
	}
	if err != nil {
		r.logger.Warn("close at alipay failed; asking alipay for the trade's state", "payment_no", r.st.PaymentNo, "err", err)
	}
	var trade payment.Trade
	err = r.closePathCall(ctx, "query trade before closing locally", a.QueryTrade, &trade)
	if err != nil {
		r.logger.Warn("query before local close failed; the payment stays pending and the next tick retries", "payment_no", r.st.PaymentNo, "err", err)
		return
	}
	switch trade.State {
	case payment.TradePaid:
		r.paidAtAlipay(ctx, trade, "close refused: already paid")
	case payment.TradeClosed:
		r.closeLocally(ctx, reason)
	case payment.TradeNotExist:
		if r.st.PayLinkIssued && workflow.Now(ctx).Before(r.st.ExpireAt) {
			// The buyer may still open the cashier URL or scan the QR code, and so create
			// the trade, until its time_expire, which is never later than ExpireAt: close
			// after that.
			r.logger.Info("trade not created yet and its pay link is still valid; closing at expiry", "payment_no", r.st.PaymentNo)
			return
		}
		r.closeLocally(ctx, reason)
	default:
		// Waiting for the buyer and not closable right now: try again on the next tick.
	}
}

func (r *paymentRun) closeLocally(ctx workflow.Context, reason string) {
	r.endLocally(ctx, a.ClosePayment, reason)
}

// endLocally runs the local transaction that ends an unpaid payment (ClosePayment or
// FailPayment) and adopts its outcome, which may be PAID if a callback won the race.
func (r *paymentRun) endLocally(ctx workflow.Context, transition any, reason string) {
	var t payment.Transition
	err := workflow.ExecuteLocalActivity(localOptions(ctx), transition, activities.ClosePaymentInput{
		PaymentNo: r.st.PaymentNo, Reason: reason,
	}).Get(ctx, &t)
	if err != nil {
		r.logger.Error("local close failed", "payment_no", r.st.PaymentNo, "reason", reason, "err", err)
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
		// Money that does not match is never marked paid, and waiting cannot make it
		// match: record it for an operator and end the payment as failed, so it stops
		// reconciling and the order can be paid again.
		r.recordAnomaly(ctx, "amount_mismatch", trade.TradeNo,
			fmt.Sprintf("alipay reports %d fen paid (%s), payment is %d fen", trade.Amount, source, r.st.Amount))
		if !r.legacy {
			r.endLocally(ctx, a.FailPayment, "amount_mismatch")
		}
		return
	}
	r.successPath(ctx, trade.TradeNo, trade.PaidAt, source, nil)
}

// markPaidInput is MarkPaid's input for paymentNo; signal, if not nil, is the notification
// signal the payment is marked paid on, which MarkPaid confirms before it acts.
func (r *paymentRun) markPaidInput(paymentNo, tradeNo string, paidAt time.Time, signal *NotificationPayload) activities.MarkPaidInput {
	in := activities.MarkPaidInput{
		PaymentNo: paymentNo, TenantID: r.st.TenantID, OrderID: r.st.OrderID, TradeNo: tradeNo, PaidAt: paidAt,
	}
	if signal != nil {
		in.Evidence, in.NotifyID = activities.EvidenceNotification, signal.NotifyID
	}
	return in
}

// successPath is the one local transaction that marks the payment paid. Side effects
// (grant, webhook) follow in afterPaid, after the commit. A notification signal (signal
// not nil) is only a claim: MarkPaid acts on the verified notification it names, or
// records an unverified_signal anomaly and changes nothing. It returns false when MarkPaid
// failed and may be tried again.
func (r *paymentRun) successPath(ctx workflow.Context, tradeNo string, paidAt time.Time, source string, signal *NotificationPayload) bool {
	var t payment.Transition
	err := workflow.ExecuteLocalActivity(localOptions(ctx), a.MarkPaid, r.markPaidInput(r.st.PaymentNo, tradeNo, paidAt, signal)).Get(ctx, &t)
	if err != nil {
		r.logger.Error("mark paid failed; reconciliation will retry", "payment_no", r.st.PaymentNo, "err", err)
		return false
	}
	if t.Unverified != "" {
		r.logger.Error("notification signal not backed by a verified alipay notification; ignored",
			"payment_no", r.st.PaymentNo, "notify_id", signal.NotifyID, "trade_no", tradeNo, "why", t.Unverified)
		r.st.Anomaly = payment.AnomalyUnverifiedSignal + ": " + t.Unverified
		workflow.SetCurrentDetails(ctx, r.details())
		return true
	}
	r.adopt(t.Payment)
	if t.EventID != "" {
		r.st.EventID = t.EventID
	}
	if t.Payment.Status != payment.StatusPaid {
		// Money arrived for a payment that is no longer pending. Never drop it silently.
		r.recordAnomaly(ctx, "paid_after_close", tradeNo, fmt.Sprintf("alipay reports paid (%s) but payment is %s", source, t.Payment.Status))
		return true
	}
	r.logger.Info("payment paid", "payment_no", r.st.PaymentNo, "trade_no", r.st.TradeNo, "source", source, "changed", t.Changed)
	r.upsertSearchAttributes(ctx)
	return true
}

// forgetFailedSignals is the change id of the version that forgets the notify_id of a
// notification signal whose MarkPaid failed, so that the inbox's next hand-over of it is
// acted on rather than ignored as a duplicate. It is asked only on that failure.
const forgetFailedSignals = "forget-failed-signals"

func (r *paymentRun) forgetsFailedSignals(ctx workflow.Context) bool {
	return r.current && r.forgetFailed.on(ctx, forgetFailedSignals)
}

// forget drops notifyID from the notify_ids seen.
func (r *paymentRun) forget(notifyID string) {
	kept := r.st.SeenNotifyIDs[:0]
	for _, id := range r.st.SeenNotifyIDs {
		if id != notifyID {
			kept = append(kept, id)
		}
	}
	r.st.SeenNotifyIDs = kept
}

// paidForAnotherPayment handles Alipay's word that another payment of this order was
// paid, reaching this run because the order's workflow id names it: an earlier payment
// the API saw pending just before its run ended and this one began, or a newer one a
// direct checkout opened while this run still delivers its webhook. This run never marks
// it paid (MarkPaid with NotOwned writes nothing): one still pending has a run of its own,
// which the inbox hands the notification to again until it is PAID with its grant and
// webhook; one that is closed or failed records paid_after_close, as on its own run.
func (r *paymentRun) paidForAnotherPayment(ctx workflow.Context, n NotificationPayload) {
	var t payment.Transition
	in := r.markPaidInput(n.PaymentNo, n.TradeNo, n.PaidAt, &n)
	in.NotOwned = true
	err := workflow.ExecuteLocalActivity(localOptions(ctx), a.MarkPaid, in).Get(ctx, &t)
	if err != nil {
		r.logger.Error("mark paid of an earlier payment failed; the auditor reports it", "payment_no", n.PaymentNo, "err", err)
		return
	}
	if t.Unverified != "" {
		r.logger.Error("notification signal for another payment not backed by a verified alipay notification; ignored",
			"payment_no", n.PaymentNo, "notify_id", n.NotifyID, "why", t.Unverified)
		return
	}
	if t.Payment.Status == payment.StatusPending {
		r.logger.Info("paid notification for a pending payment of another run left to that run", "payment_no", n.PaymentNo, "notify_id", n.NotifyID)
		return
	}
	if t.Payment.Status != payment.StatusPaid {
		r.recordAnomalyFor(ctx, n.PaymentNo, n.Amount, "paid_after_close", n.TradeNo,
			fmt.Sprintf("alipay notified %s (notify_id %s) for payment %s, which is %s", n.TradeStatus, n.NotifyID, n.PaymentNo, t.Payment.Status))
	}
}

func (r *paymentRun) recordAnomaly(ctx workflow.Context, kind, tradeNo, detail string) {
	r.recordAnomalyFor(ctx, r.st.PaymentNo, r.st.Amount, kind, tradeNo, detail)
}

// recordAnomalyFor records an anomaly about a payment as a whole (paid_after_close,
// amount_mismatch: the payment's one trade at Alipay), so it has no subject: Alipay's
// redeliveries, the reconciliation and the callback that find the same money record one
// anomaly. An unverified signal whose payload does not decode names no notification.
func (r *paymentRun) recordAnomalyFor(ctx workflow.Context, paymentNo string, amount payment.Amount, kind, tradeNo, detail string) {
	r.st.Anomaly = kind + ": " + detail
	err := workflow.ExecuteLocalActivity(localOptions(ctx), a.RecordAnomaly, activities.AnomalyInput{
		Kind: kind, TenantID: r.st.TenantID, PaymentNo: paymentNo, TradeNo: tradeNo, Amount: amount, Detail: detail,
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
	if r.st.EventID == "" || r.makingWay {
		return
	}
	ctx, r.cancelWebhook = workflow.WithCancel(ctx)
	delivered, attempts := r.webhookFirstAttempt(ctx)
	if delivered {
		r.st.WebhookSent = true
		return
	}
	webhookCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Second,
		Summary:             "deliver merchant webhook",
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    r.timing.WebhookInitialInterval,
			BackoffCoefficient: 2,
			MaximumInterval:    r.timing.WebhookMaxInterval,
			MaximumAttempts:    attempts,
		},
	})
	if err := workflow.ExecuteActivity(webhookCtx, a.DeliverWebhook, r.st.EventID).Get(ctx, nil); err != nil {
		if r.makingWay {
			r.logger.Info("webhook left to the sweeper: a new checkout of the order is waiting", "payment_no", r.st.PaymentNo, "event_id", r.st.EventID)
			return
		}
		r.logger.Warn("merchant webhook not delivered; the sweeper will redeliver it", "payment_no", r.st.PaymentNo, "event_id", r.st.EventID, "err", err)
		return
	}
	r.st.WebhookSent = true
}
