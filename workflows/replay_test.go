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
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 13 {
		t.Fatalf("found %d recorded histories, want one per path (13)", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			workflows.Register(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatal(err)
			}
		})
	}
}
