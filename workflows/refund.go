package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/payment"
)

// RefundTiming holds every interval of a refund's life. It travels in the workflow input
// so that a run keeps the timing it started with, and tests can shrink it.
type RefundTiming struct {
	// AttemptsPerRound is how many times alipay.trade.refund is tried, with the same
	// out_request_no, before the run asks alipay.trade.fastpay.refund.query.
	AttemptsPerRound int32 `json:"attempts_per_round"`
	// RoundInterval is the wait between two rounds whose outcome stayed unknown.
	RoundInterval time.Duration `json:"round_interval"`
	// MaxRounds is how many rounds may end with Alipay knowing no such refund before the
	// refund is failed and its reservation released.
	MaxRounds int `json:"max_rounds"`
	// ConfirmDelay is how long Alipay is given to settle a refund before its query is
	// believed: before the query that confirms a fund_change "N" answer, and before the
	// query that decides a refusal (refundConfirmN).
	ConfirmDelay time.Duration `json:"confirm_delay"`
	// MaxHistoryEvents is the history length past which a refund still retrying
	// continues as new (as does Temporal's suggestion), so that a refund retried for days
	// never grows a large history (refundContinueAsNew).
	MaxHistoryEvents int `json:"max_history_events"`
	// BalanceRetryInterval and BalanceRetryFor space and bound the retries of a refund
	// that Alipay refused for want of balance (ACQ.SELLER_BALANCE_NOT_ENOUGH).
	BalanceRetryInterval time.Duration `json:"balance_retry_interval"`
	BalanceRetryFor      time.Duration `json:"balance_retry_for"`
	// WebhookInitialInterval, WebhookMaxInterval and WebhookMaxAttempts bound the merchant
	// webhook's retries inside the run; the sweeper redelivers what is left.
	WebhookInitialInterval time.Duration `json:"webhook_initial_interval"`
	WebhookMaxInterval     time.Duration `json:"webhook_max_interval"`
	WebhookMaxAttempts     int32         `json:"webhook_max_attempts"`
	// StuckAfter bounds a refund's life: one still not succeeded or failed that long
	// after its first run started is reported once as a refund_stuck anomaly, and from
	// then on asks Alipay SlowInterval apart (refundStuckAfter). It is never failed for
	// it: money may have moved.
	StuckAfter   time.Duration `json:"stuck_after"`
	SlowInterval time.Duration `json:"slow_interval"`
}

// DefaultRefundTiming is the production timing of a refund.
func DefaultRefundTiming() RefundTiming {
	return RefundTiming{
		AttemptsPerRound:       6,
		RoundInterval:          time.Minute,
		MaxRounds:              10,
		ConfirmDelay:           10 * time.Second,
		MaxHistoryEvents:       2000,
		BalanceRetryInterval:   30 * time.Minute,
		BalanceRetryFor:        72 * time.Hour,
		WebhookInitialInterval: time.Second,
		WebhookMaxInterval:     5 * time.Minute,
		WebhookMaxAttempts:     20,
		StuckAfter:             24 * time.Hour,
		SlowInterval:           time.Hour,
	}
}

func (t RefundTiming) withDefaults() RefundTiming {
	d := DefaultRefundTiming()
	t.AttemptsPerRound = positiveOr(t.AttemptsPerRound, d.AttemptsPerRound)
	t.RoundInterval = positiveOr(t.RoundInterval, d.RoundInterval)
	t.MaxRounds = positiveOr(t.MaxRounds, d.MaxRounds)
	t.ConfirmDelay = positiveOr(t.ConfirmDelay, d.ConfirmDelay)
	t.MaxHistoryEvents = positiveOr(t.MaxHistoryEvents, d.MaxHistoryEvents)
	t.BalanceRetryInterval = positiveOr(t.BalanceRetryInterval, d.BalanceRetryInterval)
	t.BalanceRetryFor = positiveOr(t.BalanceRetryFor, d.BalanceRetryFor)
	t.WebhookInitialInterval = positiveOr(t.WebhookInitialInterval, d.WebhookInitialInterval)
	t.WebhookMaxInterval = positiveOr(t.WebhookMaxInterval, d.WebhookMaxInterval)
	t.WebhookMaxAttempts = positiveOr(t.WebhookMaxAttempts, d.WebhookMaxAttempts)
	t.StuckAfter = positiveOr(t.StuckAfter, d.StuckAfter)
	t.SlowInterval = positiveOr(t.SlowInterval, d.SlowInterval)
	return t
}

// RefundInput starts the workflow of one refund. The refund's row, with its amount
// reserved on the payment, exists before the run starts; the run reads it back and
// works from what the database holds.
type RefundInput struct {
	TenantID string       `json:"tenant_id"`
	RefundNo string       `json:"refund_no"`
	Timing   RefundTiming `json:"timing"`
	// State is the previous run's, when this run continues it as new: its rounds,
	// queries and balance shortfall carry on.
	State *RefundState `json:"state,omitempty"`
}

// RefundState is the workflow's view of the refund, returned by the refund-state query
// and as the workflow result.
type RefundState struct {
	TenantID     string               `json:"tenant_id"`
	RefundNo     string               `json:"refund_no"`
	PaymentNo    string               `json:"payment_no"`
	OutRequestNo string               `json:"out_request_no"`
	Amount       payment.Amount       `json:"amount_fen"`
	Status       payment.RefundStatus `json:"status"`
	// FundChange is Alipay's fund_change of the answer that confirmed the refund: false
	// when that answer was a replay of an earlier request that had moved the money.
	FundChange bool `json:"fund_change"`
	// ConfirmedBy says which answer confirmed the refund: "refund" or "query".
	ConfirmedBy string `json:"confirmed_by,omitempty"`
	// Rounds counts the rounds of refund attempts; Queries the refund queries;
	// NotFoundRounds the rounds whose unknown outcome a later query answered with "no such
	// refund" (only those count towards giving up).
	Rounds         int `json:"rounds"`
	Queries        int `json:"queries"`
	NotFoundRounds int `json:"not_found_rounds"`
	// UnconfirmedRounds counts the rounds answered fund_change "N" whose query has not
	// confirmed the refund yet (refundConfirmN); they never fail it.
	UnconfirmedRounds int `json:"unconfirmed_rounds,omitempty"`
	// ShortfallSince is when Alipay first refused the refund for want of balance.
	ShortfallSince time.Time `json:"shortfall_since,omitzero"`
	// StartedAt is when the refund's first run started (carried across continue-as-new);
	// StuckReported says the refund_stuck anomaly was recorded (refundStuckAfter).
	StartedAt     time.Time `json:"started_at,omitzero"`
	StuckReported bool      `json:"stuck_reported,omitempty"`
	FailReason    string    `json:"fail_reason,omitempty"`
	// LastError is the last unknown outcome, for the UI.
	LastError   string `json:"last_error,omitempty"`
	EventID     string `json:"event_id,omitempty"`
	WebhookSent bool   `json:"webhook_sent"`
}

// RefundSummary is the one-line summary shown in the Temporal UI's workflow list.
func RefundSummary(tenantID, refundNo, paymentNo string, amount payment.Amount) string {
	return fmt.Sprintf("refund %s of %s CNY on payment %s (tenant %s)", refundNo, amount.Yuan(), paymentNo, tenantID)
}

type refundRun struct {
	in     RefundInput
	timing RefundTiming
	st     RefundState
	logger log.Logger
	// confirmN is on for runs that started after refundConfirmN, canContinue after
	// refundContinueAsNew, stuck after refundStuckAfter (asked only once a refund is
	// past StuckAfter, so that no other refund records its marker).
	confirmN, canContinue, stuck versionGate
}

// refundContinueAsNew: a refund still retrying continues as new once its history is
// long (Temporal suggests it, or MaxHistoryEvents), carrying its counters and its
// balance shortfall; the new run reads the refund back as any run does. Runs recorded
// before the change never continued.
const refundContinueAsNew = "refund-continue-as-new"

// refundConfirmN: a success answer with fund_change "N" is not a success by itself.
// Alipay answers "N" to a replay of a refund that moved money, but also to a refund it
// accepted and has not carried out yet, which may still fail; only its refund query
// (refund_status REFUND_SUCCESS) confirms the refund. And a refusal is decided by a
// query only after ConfirmDelay: an earlier attempt of the same round (retried inside
// one activity) may have been lost, and Alipay's query lags the refund. Runs recorded
// before the change took "N" as success and queried a first-round refusal at once.
const refundConfirmN = "refund-confirm-fund-change-n"

// refundStuckAfter: a refund still open StuckAfter after its first run started is
// reported once (refund_stuck, for an operator) and asks Alipay SlowInterval apart from
// then on. Before, an outcome that stayed unknown (answers lost, the refund query
// failing) was asked about a round apart for as long as it lasted, unreported.
const refundStuckAfter = "refund-stuck-after"

// RefundWorkflow carries out one refund exactly once. It asks Alipay with the refund's
// fixed out_request_no until Alipay answers: an unknown outcome (ACQ.SYSTEM_ERROR, a
// timeout, a 5xx) is retried with the same out_request_no and then checked with a refund
// query; a fund_change "N" answer is confirmed by the refund query (refundConfirmN). A
// refusal fails the refund and releases its reservation, after a balance shortfall has
// been retried for a while. A succeeded or failed refund's outbox event is then
// delivered as the merchant webhook.
func RefundWorkflow(ctx workflow.Context, in RefundInput) (RefundState, error) {
	r := &refundRun{in: in, timing: in.Timing.withDefaults(), logger: workflow.GetLogger(ctx)}
	r.st = RefundState{TenantID: in.TenantID, RefundNo: in.RefundNo, StartedAt: workflow.Now(ctx)}
	if err := workflow.SetQueryHandler(ctx, RefundStateQuery, func() (RefundState, error) { return r.st, nil }); err != nil {
		return r.st, err
	}
	var ref payment.Refund
	err := workflow.ExecuteLocalActivity(localOptions(ctx), a.GetRefund,
		activities.RefundKey{TenantID: in.TenantID, RefundNo: in.RefundNo}).Get(ctx, &ref)
	if err != nil {
		return r.st, fmt.Errorf("get refund: %w", err)
	}
	r.st.PaymentNo, r.st.OutRequestNo, r.st.Amount, r.st.Status = ref.PaymentNo, ref.OutRequestNo, ref.Amount, ref.Status
	if prev := in.State; prev != nil {
		r.st.Rounds, r.st.Queries, r.st.NotFoundRounds, r.st.UnconfirmedRounds = prev.Rounds, prev.Queries, prev.NotFoundRounds, prev.UnconfirmedRounds
		r.st.ShortfallSince, r.st.LastError, r.st.FundChange = prev.ShortfallSince, prev.LastError, prev.FundChange
		r.st.StuckReported = prev.StuckReported
		if !prev.StartedAt.IsZero() {
			r.st.StartedAt = prev.StartedAt
		}
	}
	r.upsertSearchAttributes(ctx)
	if !ref.Status.Final() {
		if err := r.refund(ctx, ref); err != nil {
			return r.st, err // continued as new
		}
	}
	r.deliverWebhook(ctx)
	workflow.SetCurrentDetails(ctx, r.details())
	return r.st, nil
}

// refund is the loop that asks Alipay until the refund is succeeded or failed. It
// returns a ContinueAsNewError when the run's history has grown long.
func (r *refundRun) refund(ctx workflow.Context, ref payment.Refund) error {
	for {
		if r.canContinue.on(ctx, refundContinueAsNew) && r.historyLong(ctx) {
			st := r.st
			next := r.in
			next.State = &st
			r.logger.Info("refund continues as new", "refund_no", ref.RefundNo, "rounds", st.Rounds,
				"history_length", workflow.GetInfo(ctx).GetCurrentHistoryLength())
			return workflow.NewContinueAsNewError(ctx, RefundWorkflowName, next)
		}
		r.reportIfStuck(ctx)
		r.st.Rounds++
		workflow.SetCurrentDetails(ctx, r.details())
		var res payment.RefundResult
		err := workflow.ExecuteActivity(channelOptions(ctx, r.timing.AttemptsPerRound, "alipay.trade.refund "+ref.OutRequestNo),
			a.RefundAtChannel, activities.RefundChannelInput{
				PaymentNo: ref.PaymentNo, OutRequestNo: ref.OutRequestNo, Amount: ref.Amount, Reason: ref.Reason,
			}).Get(ctx, &res)
		var appErr *temporal.ApplicationError
		var done bool
		switch {
		case err == nil:
			done = r.answered(ctx, ref, res)
		case !errors.As(err, &appErr) || !appErr.NonRetryable():
			done = r.unanswered(ctx, ref, err)
		default:
			done = r.refused(ctx, ref, appErr)
		}
		if done {
			return nil
		}
	}
}

// answered handles Alipay's answer to the refund request; done is false when the run
// asks again.
func (r *refundRun) answered(ctx workflow.Context, ref payment.Refund, res payment.RefundResult) (done bool) {
	if res.FundChange || !r.confirmN.on(ctx, refundConfirmN) {
		r.st.FundChange, r.st.ConfirmedBy = res.FundChange, "refund"
		// Alipay's time of the refund when it gave one (zero in runs recorded
		// before the field existed: the database then takes its own clock).
		r.succeed(ctx, res.TradeNo, res.RefundedAt)
		return true
	}
	// fund_change "N": no money moved in this call. A replay of a refund that
	// moved it, or a refund Alipay knows and is still processing: the query tells,
	// once Alipay has had time to settle it. Not found yet, the request is sent
	// again (same out_request_no, so never a second refund), a round apart. Since
	// Alipay holds the request, the refund is never failed here (money could still
	// move after a FAILED); after MaxRounds such rounds an operator is told once,
	// and the run goes on (continuing as new keeps its history short).
	r.st.FundChange, r.st.LastError = false, "alipay answered fund_change N: waiting for its refund query to confirm"
	workflow.SetCurrentDetails(ctx, r.details())
	wait := r.timing.ConfirmDelay
	if r.st.UnconfirmedRounds > 0 {
		wait = r.roundInterval()
	}
	_ = workflow.Sleep(ctx, wait)
	if found, _ := r.query(ctx, ref); found {
		return true
	}
	r.st.UnconfirmedRounds++
	if r.st.UnconfirmedRounds == r.timing.MaxRounds {
		r.recordAnomaly(ctx, "refund_unconfirmed", "", fmt.Sprintf(
			"refund %s (out_request_no %s, %d fen): alipay answered fund_change N %d rounds running and its refund query has not confirmed it; still asking",
			r.st.RefundNo, r.st.OutRequestNo, r.st.Amount, r.st.UnconfirmedRounds))
	}
	return false
}

// unanswered handles a request whose outcome is unknown: money may have moved, and
// Alipay may still be processing the request. It waits before asking (Alipay answers a
// refund query reliably only some seconds after the refund request), and gives up only
// after several such rounds whose query found no refund.
func (r *refundRun) unanswered(ctx workflow.Context, ref payment.Refund, err error) (done bool) {
	r.st.LastError = err.Error()
	_ = workflow.Sleep(ctx, r.roundInterval())
	found, known := r.query(ctx, ref)
	switch {
	case found:
		return true
	case known:
		r.st.NotFoundRounds++
		if r.st.NotFoundRounds >= r.timing.MaxRounds {
			r.fail(ctx, fmt.Sprintf("no answer from alipay after %d rounds and alipay has no such refund: %s", r.st.NotFoundRounds, r.st.LastError))
			return true
		}
	}
	return false
}

// refused handles Alipay's refusal of the refund. An earlier attempt whose answer was
// lost may have moved the money all the same, so Alipay's refund query has the last word,
// asked once Alipay has had time to settle that attempt.
func (r *refundRun) refused(ctx workflow.Context, ref payment.Refund, appErr *temporal.ApplicationError) (done bool) {
	if appErr.Type() == activities.ErrTypeBalanceShortfall && r.waitForBalance(ctx, ref, appErr) {
		return false
	}
	if r.st.Rounds > 1 || r.st.Queries > 0 {
		_ = workflow.Sleep(ctx, r.roundInterval())
	} else if r.confirmN.on(ctx, refundConfirmN) {
		_ = workflow.Sleep(ctx, r.timing.ConfirmDelay)
	}
	found, known := r.query(ctx, ref)
	switch {
	case found:
		return true
	case known:
		r.fail(ctx, appErr.Message())
		return true
	}
	_ = workflow.Sleep(ctx, r.roundInterval())
	return false
}

// waitForBalance waits a retry interval after a refusal for want of balance, for as long
// as BalanceRetryFor since the first; false once that has passed.
func (r *refundRun) waitForBalance(ctx workflow.Context, ref payment.Refund, appErr *temporal.ApplicationError) bool {
	now := workflow.Now(ctx)
	if r.st.ShortfallSince.IsZero() {
		r.st.ShortfallSince = now
	}
	if now.Sub(r.st.ShortfallSince) >= r.timing.BalanceRetryFor {
		return false
	}
	r.st.LastError = appErr.Message()
	r.logger.Warn("alipay refused the refund for want of balance; retrying later",
		"refund_no", ref.RefundNo, "payment_no", ref.PaymentNo, "retry_in", r.timing.BalanceRetryInterval)
	workflow.SetCurrentDetails(ctx, r.details())
	_ = workflow.Sleep(ctx, r.timing.BalanceRetryInterval)
	return true
}

// reportIfStuck records the refund_stuck anomaly once the refund is past StuckAfter.
func (r *refundRun) reportIfStuck(ctx workflow.Context) {
	if r.st.StuckReported || workflow.Now(ctx).Sub(r.st.StartedAt) < r.timing.StuckAfter || !r.stuck.on(ctx, refundStuckAfter) {
		return
	}
	r.st.StuckReported = true
	r.logger.Error("refund still open past its bound; asking alipay less often", "refund_no", r.st.RefundNo,
		"started_at", r.st.StartedAt, "last_error", r.st.LastError)
	r.recordAnomaly(ctx, "refund_stuck", "", fmt.Sprintf(
		"refund %s (out_request_no %s, %d fen) still open %s after it started (rounds %d, queries %d); last error: %s; asking alipay every %s",
		r.st.RefundNo, r.st.OutRequestNo, r.st.Amount, workflow.Now(ctx).Sub(r.st.StartedAt).Round(time.Minute),
		r.st.Rounds, r.st.Queries, r.st.LastError, r.timing.SlowInterval))
}

// roundInterval is the wait between two rounds: SlowInterval once the refund is stuck.
func (r *refundRun) roundInterval() time.Duration {
	if r.st.StuckReported {
		return r.timing.SlowInterval
	}
	return r.timing.RoundInterval
}

// historyLong reports whether the run should continue as new.
func (r *refundRun) historyLong(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= r.timing.MaxHistoryEvents
}

// query asks Alipay whether the refund took effect, and marks it succeeded if so. known
// is false when Alipay could not be asked.
func (r *refundRun) query(ctx workflow.Context, ref payment.Refund) (found, known bool) {
	r.st.Queries++
	var st payment.RefundStatusAtChannel
	err := workflow.ExecuteActivity(channelOptions(ctx, r.timing.AttemptsPerRound, "alipay.trade.fastpay.refund.query "+ref.OutRequestNo),
		a.QueryRefundAtChannel, activities.RefundQueryInput{PaymentNo: ref.PaymentNo, OutRequestNo: ref.OutRequestNo}).Get(ctx, &st)
	if err != nil {
		r.logger.Warn("refund query failed; trying again later", "refund_no", ref.RefundNo, "err", err)
		r.st.LastError = err.Error()
		return false, false
	}
	if !st.Found {
		return false, true
	}
	if st.RefundAmount != 0 && st.RefundAmount != ref.Amount {
		// Alipay keys refunds by out_request_no, so this cannot be another refund; record
		// what it says for the operator.
		r.logger.Error("alipay reports another amount for the refund", "refund_no", ref.RefundNo,
			"alipay_fen", int64(st.RefundAmount), "amount_fen", int64(ref.Amount))
		r.recordAnomaly(ctx, "refund_amount_mismatch", st.TradeNo, fmt.Sprintf("refund %s (out_request_no %s): alipay refunded %d fen, paykit asked %d fen",
			ref.RefundNo, ref.OutRequestNo, st.RefundAmount, ref.Amount))
	}
	r.st.ConfirmedBy = "query"
	r.succeed(ctx, st.TradeNo, st.RefundedAt)
	return true, true
}

func (r *refundRun) succeed(ctx workflow.Context, tradeNo string, at time.Time) {
	var tr payment.RefundTransition
	err := workflow.ExecuteLocalActivity(localOptions(ctx), a.MarkRefundSucceeded, activities.MarkRefundSucceededInput{
		TenantID: r.st.TenantID, RefundNo: r.st.RefundNo, TradeNo: tradeNo, RefundedAt: at,
	}).Get(ctx, &tr)
	if err == nil && !tr.Changed && tr.Refund.Status == payment.RefundFailed {
		// Alipay moved the money for a refund the database holds as failed (and whose
		// reservation it released): never let that pass silently.
		r.recordAnomaly(ctx, "refund_succeeded_after_fail", tradeNo, fmt.Sprintf(
			"alipay confirms refund %s (out_request_no %s, %d fen) that is FAILED locally", r.st.RefundNo, r.st.OutRequestNo, r.st.Amount))
	}
	r.applyTransition(ctx, tr, err)
}

// recordAnomaly records an anomaly about the refund: its subject is the refund's
// out_request_no, so each refund of a payment has its own (two refunds that failed
// locally and that Alipay carried out are two anomalies), and the callback that learns
// the same of the refund records the same one.
func (r *refundRun) recordAnomaly(ctx workflow.Context, kind, tradeNo, detail string) {
	err := workflow.ExecuteLocalActivity(localOptions(ctx), a.RecordAnomaly, activities.AnomalyInput{
		Kind: kind, TenantID: r.st.TenantID, PaymentNo: r.st.PaymentNo, Subject: r.st.OutRequestNo, TradeNo: tradeNo,
		Amount: r.st.Amount, Detail: detail,
	}).Get(ctx, nil)
	if err != nil {
		r.logger.Error("record anomaly failed", "refund_no", r.st.RefundNo, "kind", kind, "err", err)
	}
}

func (r *refundRun) fail(ctx workflow.Context, reason string) {
	var tr payment.RefundTransition
	err := workflow.ExecuteLocalActivity(localOptions(ctx), a.FailRefund, activities.FailRefundInput{
		TenantID: r.st.TenantID, RefundNo: r.st.RefundNo, Reason: reason,
	}).Get(ctx, &tr)
	r.applyTransition(ctx, tr, err)
}

// applyTransition takes the refund's state from the database's answer. The local
// activity retries for minutes; if it still fails, the refund stays pending for the
// sweeper to re-drive, and the run ends without a webhook.
func (r *refundRun) applyTransition(ctx workflow.Context, tr payment.RefundTransition, err error) {
	if err != nil {
		r.logger.Error("refund transition not recorded; the refund stays pending", "refund_no", r.st.RefundNo, "err", err)
		r.st.LastError = err.Error()
		return
	}
	r.st.Status, r.st.FailReason, r.st.EventID = tr.Refund.Status, tr.Refund.FailReason, tr.EventID
	r.upsertSearchAttributes(ctx)
}

// deliverWebhook delivers the event this run's transition wrote; the sweeper redelivers
// it if the merchant stays down.
func (r *refundRun) deliverWebhook(ctx workflow.Context) {
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
		r.logger.Warn("merchant webhook not delivered; the sweeper will redeliver it", "refund_no", r.st.RefundNo,
			"event_id", r.st.EventID, "err", err)
		return
	}
	r.st.WebhookSent = true
}

func (r *refundRun) upsertSearchAttributes(ctx workflow.Context) {
	upsertSearchAttributes(ctx, r.logger,
		SATenantID.ValueSet(r.st.TenantID),
		SAPaymentNo.ValueSet(r.st.PaymentNo),
		SARefundNo.ValueSet(r.st.RefundNo),
		SARefundStatus.ValueSet(r.st.Status.String()),
		SAAmountFen.ValueSet(int64(r.st.Amount)),
	)
}

func (r *refundRun) details() string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** · refund `%s` · %s CNY · payment `%s` · tenant `%s`\n\n",
		r.st.Status, r.st.RefundNo, r.st.Amount.Yuan(), r.st.PaymentNo, r.st.TenantID)
	fmt.Fprintf(&b, "out_request_no `%s` · rounds %d · queries %d", r.st.OutRequestNo, r.st.Rounds, r.st.Queries)
	if r.st.ConfirmedBy != "" {
		fund := "Y"
		if !r.st.FundChange {
			fund = "N"
		}
		fmt.Fprintf(&b, " · confirmed by %s (fund_change %s)", r.st.ConfirmedBy, fund)
	}
	if !r.st.ShortfallSince.IsZero() && !r.st.Status.Final() {
		fmt.Fprintf(&b, "\n\nseller balance short since %s; retrying", r.st.ShortfallSince.Format(time.RFC3339))
	}
	if r.st.FailReason != "" {
		fmt.Fprintf(&b, "\n\nfailed: %s", r.st.FailReason)
	} else if r.st.LastError != "" && !r.st.Status.Final() {
		fmt.Fprintf(&b, "\n\nlast error: %s", r.st.LastError)
	}
	return b.String()
}
