package workflows_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/paykit/paykit/payment"
	paykitworker "github.com/paykit/paykit/worker"
	"github.com/paykit/paykit/workflows"
)

// The change ids are written out here: they are recorded in histories, so renaming one
// breaks every run that recorded it.
const (
	paymentChanges    = "payment-changes-1"
	closeOnAlipayWord = "close-on-alipay-word"
	webhookLocalFirst = "webhook-local-first"
	reconcileBackoff  = "reconcile-backoff"
	signalsToTheEnd   = "signals-to-the-end"
	closePathLocal    = "close-path-local"
	// signalsBeforeCAN is asked only by a run on paymentChanges, and only when a signal
	// arrived while it waited for its handlers before continuing as new.
	signalsBeforeCAN = "signals-before-continue-as-new"
)

// askedChangeIDs records, in order, every change id env's run asks workflow.GetVersion
// for the first time; on a real server each is a marker event and an upsert of the
// TemporalChangeVersion search attribute (a visibility write). versions chooses what is
// recorded for each, as the worker's does (nil: the newest version). It also records the
// activities the run starts: a local one by its name, a regular one as "regular:" and its
// name.
func askedChangeIDs(env *testsuite.TestWorkflowEnvironment, versions worker.PreferredVersionProvider) (asked, locals *[]string) {
	asked, locals = &[]string{}, &[]string{}
	env.SetWorkerOptions(worker.Options{PreferredVersionProvider: func(in worker.PreferredVersionProviderInput) *worker.VersionPreference {
		*asked = append(*asked, in.ChangeID)
		if versions == nil {
			return nil
		}
		return versions(in)
	}})
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []interface{}) {
		*locals = append(*locals, info.ActivityType.Name)
	})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		*locals = append(*locals, "regular:"+info.ActivityType.Name)
	})
	return asked, locals
}

// paidByCallback runs a payment the API opened, paid by one notification, with the
// versions the worker records, and returns the change ids it asked. It fails unless the
// payment is PAID once with its grant, and its webhook delivered by a local first attempt.
func paidByCallback(t *testing.T, versions worker.PreferredVersionProvider) []string {
	t.Helper()
	env, fs := newEnv(t)
	asked, locals := askedChangeIDs(env, versions)
	in := openedInput(fs, time.Now().Add(15*time.Minute).UTC().Truncate(time.Second))
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.NotificationSignal, paidNotification(fs, "n1"))
	}, 10*time.Second)
	env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
	st := result(t, env)
	if st.Status != payment.StatusPaid || fs.markPaid != 1 || fs.grants != 1 || !st.WebhookSent {
		t.Fatalf("state %+v markPaid=%d grants=%d, want PAID once with its grant and webhook", st, fs.markPaid, fs.grants)
	}
	if !slices.Contains(*locals, "DeliverWebhook") {
		t.Fatalf("local activities %v: the webhook's first attempt was not local", *locals)
	}
	return *asked
}

// A run on the current code asks one change id, whichever way it ends, and still takes
// every change's path: paid, with the webhook's first attempt a local activity; closed at
// expiry, with the close path's calls to Alipay local activities.
func TestPaymentWorkflow_ACurrentRunAsksOneChangeID(t *testing.T) {
	t.Run("paid", func(t *testing.T) {
		if asked := paidByCallback(t, nil); !slices.Equal(asked, []string{paymentChanges}) {
			t.Fatalf("change ids asked: %v, want only %s", asked, paymentChanges)
		}
	})
	t.Run("closed at expiry", func(t *testing.T) {
		env, fs := newEnv(t)
		asked, locals := askedChangeIDs(env, nil)
		in := openedInput(fs, env.Now().Add(15*time.Minute).UTC().Truncate(time.Second))
		env.OnActivity(a.QueryTrade, mock.Anything, mock.Anything).Return(payment.Trade{State: payment.TradeNotExist}, nil)
		env.OnActivity(a.CloseTrade, mock.Anything, mock.Anything).Return(payment.CloseNotExist, nil)
		env.ExecuteWorkflow(workflows.PaymentWorkflow, in)
		st := result(t, env)
		if st.Status != payment.StatusClosed || fs.closed != 1 {
			t.Fatalf("state %s closed=%d, want CLOSED once", st.Status, fs.closed)
		}
		if !slices.Equal(*asked, []string{paymentChanges}) {
			t.Fatalf("change ids asked: %v, want only %s", *asked, paymentChanges)
		}
		if !slices.Contains(*locals, "CloseTrade") {
			t.Fatalf("local activities %v: the close path did not call Alipay locally", *locals)
		}
		// The backoff: three queries before the close at expiry, not one a minute.
		if n := countOf(*locals, "QueryTrade") + countOf(*locals, "regular:QueryTrade"); n > 5 {
			t.Fatalf("%d queries for an unpaid 15-minute payment, want at most 5 (the backoff)", n)
		}
	})
}

// A run that records DefaultVersion for paymentChanges (the worker's setting,
// PAYKIT_PAYMENT_VERSION_MARKERS=each, for a rollout beside workers built before it)
// asks, and records, each change's own id where the change applies, as such a worker
// does, and takes each change's path.
func TestPaymentWorkflow_ARunFromBeforePaymentChangesAsksEachChange(t *testing.T) {
	asked := paidByCallback(t, paykitworker.PaymentVersions(true))
	want := []string{paymentChanges, closeOnAlipayWord, reconcileBackoff, webhookLocalFirst, signalsToTheEnd}
	if !slices.Equal(asked, want) {
		t.Fatalf("change ids asked: %v, want %v", asked, want)
	}
}

func countOf(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}
