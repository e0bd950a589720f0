package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// webhookLocalFirst is the change id of the version whose first webhook attempt is a
// local activity. Runs that reached the webhook before it keep the regular activity.
const webhookLocalFirst = "webhook-local-first"

// localWebhookTimeout bounds the local first attempt; a merchant slower than that gets
// the regular activity, with its own longer timeout and backoff.
const localWebhookTimeout = 3 * time.Second

// webhookFirstAttempt makes the merchant webhook's first attempt a local activity, in
// the workflow task that committed the payment, which saves an activity task and a
// workflow task per payment. Only a merchant that fails it costs the regular activity with
// its backoff: after the first retry interval it gets the attempts that are left. It
// returns whether the webhook was delivered and, if not, how many attempts the regular
// activity may make.
func (r *paymentRun) webhookFirstAttempt(ctx workflow.Context) (delivered bool, attemptsLeft int32) {
	attemptsLeft = r.timing.WebhookMaxAttempts
	if !r.current && workflow.GetVersion(ctx, webhookLocalFirst, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false, attemptsLeft
	}
	// Short: the attempt holds a local-activity slot and this run's workflow task, so a
	// merchant that hangs must not hold them long (the regular activity takes over).
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: localWebhookTimeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	err := workflow.ExecuteLocalActivity(lctx, a.DeliverWebhook, r.st.EventID).Get(ctx, nil)
	if err == nil {
		return true, 0
	}
	r.logger.Info("merchant webhook's first attempt failed; retrying with backoff", "payment_no", r.st.PaymentNo,
		"event_id", r.st.EventID, "err", err)
	if attemptsLeft > 1 {
		attemptsLeft--
	}
	// A cancelled sleep (a new checkout is waiting) cancels the activity below as well.
	_ = workflow.Sleep(ctx, r.timing.WebhookInitialInterval)
	return false, attemptsLeft
}
