package worker_test

import (
	"testing"

	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/worker"
	"github.com/paykit/paykit/workflows"
)

// By default a new payment run records the newest version of every change id (no
// provider). With EachPaymentChange it records DefaultVersion for payment-changes-1 and
// the newest for every other id, so it asks and records each change's own id, as a
// worker built before payment-changes-1 does and can replay.
func TestPaymentVersions(t *testing.T) {
	if worker.PaymentVersions(false) != nil {
		t.Fatal("default: a version provider is set; want none (every change id at its newest)")
	}
	each := worker.PaymentVersions(true)
	if each == nil {
		t.Fatal("each: no version provider")
	}
	got := each(sdkworker.PreferredVersionProviderInput{ChangeID: workflows.PaymentChangesID, MinSupported: workflow.DefaultVersion, MaxSupported: 1})
	if got == nil || got.Version != workflow.DefaultVersion {
		t.Fatalf("each: %s records %+v, want DefaultVersion", workflows.PaymentChangesID, got)
	}
	for _, id := range []string{"close-on-alipay-word", "reconcile-backoff", "webhook-local-first", "signals-to-the-end", "close-path-local", "refund-confirm-n"} {
		if got := each(sdkworker.PreferredVersionProviderInput{ChangeID: id, MinSupported: workflow.DefaultVersion, MaxSupported: 1}); got != nil {
			t.Fatalf("each: %s records %+v, want its newest version (nil)", id, got)
		}
	}
}
