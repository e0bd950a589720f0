package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// webhookAttempts counts the webhook's attempts as local and as regular activities.
// onRegular, if set, runs as a regular attempt starts.
func webhookAttempts(env *testsuite.TestWorkflowEnvironment, onRegular func()) (local, regular *int) {
	local, regular = new(int), new(int)
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		if info.ActivityType.Name == "DeliverWebhook" {
			*local++
		}
	})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "DeliverWebhook" {
			*regular++
			if onRegular != nil {
				onRegular()
			}
		}
	})
	return local, regular
}

func TestPaymentWorkflow_WebhookFirstAttemptIsLocal(t *testing.T) {
	env, fs := newEnv(t)
	local, regular := webhookAttempts(env, nil)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1")) }, time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusPaid || !st.WebhookSent || *local != 1 || *regular != 0 {
		t.Fatalf("status %s webhook sent %v, local attempts %d, regular %d; want PAID, sent by one local attempt",
			st.Status, st.WebhookSent, *local, *regular)
	}
}

func TestPaymentWorkflow_WebhookFallsBackToRegularActivityWhenTheMerchantFails(t *testing.T) {
	env, fs := newEnv(t)
	// The merchant fails the first attempt and is back for the retry.
	local, regular := webhookAttempts(env, func() { fs.webhookErr = nil })
	fs.webhookErr = errors.New("merchant answered HTTP 503")
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1")) }, time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, input())
	st := result(t, env)
	if st.Status != payment.StatusPaid || !st.WebhookSent || *local != 1 || *regular != 1 {
		t.Fatalf("status %s webhook sent %v, local attempts %d, regular %d; want PAID, sent by the regular activity after one failed local attempt",
			st.Status, st.WebhookSent, *local, *regular)
	}
}
