package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/paykit/paykit/workflows"
)

// historyNames maps the order ids used above to the path each history records. With
// PAYKIT_RECORD_HISTORIES=1 they are written to workflows/testdata/histories, where the
// workflows package replays them on every test run.
var historyNames = map[string]string{
	"1001":  "paid_by_callback",
	"6001":  "paid_with_duplicate_notifications",
	"7001":  "paid_by_reconciliation",
	"8001":  "closed_at_expiry",
	"9001":  "close_refused_already_paid",
	"11001": "paid_after_worker_crash",
	"12001": "paid_with_redis_down",
	"13001": "redriven_after_terminate",
}

// TestZZReplayRecordedHistories replays every payment workflow history this run produced
// against the current workflow code, so a non-deterministic change fails here.
func TestZZReplayRecordedHistories(t *testing.T) {
	ctx := context.Background()
	replayer := worker.NewWorkflowReplayer()
	workflows.Register(replayer)
	var token []byte
	replayed := 0
	record := os.Getenv("PAYKIT_RECORD_HISTORIES") != ""
	for {
		resp, err := env.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         `WorkflowType = "PaymentWorkflow" AND ExecutionStatus = "Completed"`,
			NextPageToken: token,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range resp.Executions {
			hist := &historypb.History{}
			it := env.tc.GetWorkflowHistory(ctx, ex.Execution.WorkflowId, ex.Execution.RunId, false, 0)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				hist.Events = append(hist.Events, ev)
			}
			if err := replayer.ReplayWorkflowHistory(nil, hist); err != nil {
				t.Errorf("replay %s/%s: %v", ex.Execution.WorkflowId, ex.Execution.RunId, err)
			}
			replayed++
			if record {
				recordHistory(t, ex, hist)
			}
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			break
		}
	}
	if replayed < len(historyNames) {
		t.Fatalf("replayed %d histories, want at least %d (one per path)", replayed, len(historyNames))
	}
	t.Logf("replayed %d completed payment workflow histories", replayed)
}

func recordHistory(t *testing.T, ex *workflowpb.WorkflowExecutionInfo, hist *historypb.History) {
	t.Helper()
	var orderID string
	if p := ex.GetSearchAttributes().GetIndexedFields()["OrderId"]; p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &orderID)
	}
	name, ok := historyNames[orderID]
	if !ok {
		return
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repoRoot(), "workflows", "testdata", "histories")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
