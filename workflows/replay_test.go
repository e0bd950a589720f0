package workflows_test

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"

	"github.com/paykit/paykit/workflows"
)

// TestReplayRecordedHistories replays histories recorded from the end-to-end tests (one
// per path: paid by callback, by reconciliation, closed at expiry, close refused because
// paid, re-driven after terminate, ...). A change to the workflow code that would break
// running payments fails here. Re-record with `PAYKIT_RECORD_HISTORIES=1 go test ./e2e`.
func TestReplayRecordedHistories(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want int
	}{
		// Histories of the current code, one per path: Alipay's 16 and WeChat Pay's 4
		// (paid by its notification, by reconciliation, a JSAPI payment, closed at expiry).
		{filepath.Join("testdata", "histories"), 20},
		// Refund histories of the current code, one per path.
		{filepath.Join("testdata", "histories", "refunds"), 7},
		// Refund histories recorded before refundContinueAsNew: runs that never continued
		// as new must still replay (refund.go).
		{filepath.Join("testdata", "histories", "refunds", "v1"), 7},
		// The sweeper, purge, audit and redelivery workflows, recorded by
		// e2e/TestZZReplayOtherHistories (PAYKIT_RECORD_OTHER_HISTORIES=1).
		{filepath.Join("testdata", "histories", "others"), 5},
		// Refund histories recorded before refundConfirmN: runs that took fund_change N as
		// success must still replay (refund.go).
		{filepath.Join("testdata", "histories", "refunds", "v0"), 5},
		// Histories recorded before version 4 of payment-changes-1 (the scheduled
		// reconciler): runs that keep their own reconciliation timer must still replay.
		{filepath.Join("testdata", "histories", "v6"), 16},
		// Histories recorded before payment-changes-1: runs that ask each change's own id
		// (a version marker and a search attribute upsert apiece) must still replay.
		{filepath.Join("testdata", "histories", "v5"), 16},
		// Histories recorded before the direct checkout: runs started by the checkout
		// update, which create the payment and open its trade in their first workflow task.
		{filepath.Join("testdata", "histories", "v4"), 16},
		// Histories recorded before signalsToTheEnd and closePathLocal: runs whose close
		// path calls Alipay in regular activities must still replay (reconcile.go).
		{filepath.Join("testdata", "histories", "v3"), 16},
		// Histories recorded before reconcileBackoff: runs waiting on the fixed
		// reconciliation tick must still replay (reconcile.go).
		{filepath.Join("testdata", "histories", "v2"), 13},
		// Histories recorded before webhookLocalFirst: runs that reached the webhook as a
		// regular activity must still replay (webhook.go).
		{filepath.Join("testdata", "histories", "v1"), 16},
		// Histories recorded before closeOnAlipayWord: runs that were open when that change
		// was deployed must still replay (payment_v0.go).
		{filepath.Join("testdata", "histories", "v0"), 10},
	} {
		files, err := filepath.Glob(filepath.Join(tc.dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) < tc.want {
			t.Fatalf("found %d recorded histories in %s, want one per path (%d)", len(files), tc.dir, tc.want)
		}
		for _, f := range files {
			t.Run(f, func(t *testing.T) {
				r := worker.NewWorkflowReplayer()
				workflows.Register(r)
				if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
