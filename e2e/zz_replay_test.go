package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
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
	"14001": "paid_qr_through_outages",
	"15001": "closed_by_operator_cancel",
	"rt1":   "redriven_qr_refused_at_open_paid",
	"rt2":   "redriven_page_after_expiry_paid",
	"cl1":   "closed_run_made_way_for_new_checkout",
	"wap1":  "paid_wap_at_cashier",
	"app1":  "paid_app_order_string",
	"wap2":  "redriven_wap_after_terminate",
	// WeChat Pay's (e2e/wechatpay_test.go).
	"wx1001": "wechatpay_paid_by_notification",
	"wx2001": "wechatpay_paid_by_reconciliation",
	"wx3001": "wechatpay_jsapi_paid_by_notification",
	"wx4001": "wechatpay_closed_at_expiry",
}

// refundHistoryNames maps the refund_nos of the refund tests to the path each history
// records. With PAYKIT_RECORD_REFUND_HISTORIES=1 they are written to
// workflows/testdata/histories/refunds.
var refundHistoryNames = map[string]string{
	"faulty-1":          "refund_through_faults",
	"kill-1":            "refund_worker_killed",
	"notified-1":        "refund_notified_before_answer",
	"full-0":            "refund_partial",
	"refused-1":         "refund_refused_by_alipay",
	"processing-1":      "refund_fund_change_n_processing",
	"processing-fail-1": "refund_fund_change_n_failed_then_sent_again",
}

// TestZZReplayRecordedHistories replays every payment workflow history this run produced
// against the current workflow code, so a non-deterministic change fails here.
func TestZZReplayRecordedHistories(t *testing.T) {
	replayer := worker.NewWorkflowReplayer()
	workflows.Register(replayer)
	// Visibility is eventually consistent: wait until every path's run is listed.
	var executions []*workflowpb.WorkflowExecutionInfo
	deadline := time.Now().Add(15 * time.Second)
	for {
		executions = listCompletedOf(t, workflows.PaymentWorkflowName)
		paths := map[string]bool{}
		for _, ex := range executions {
			if name, ok := historyNames[keywordOf(ex, "OrderId")]; ok {
				paths[name] = true
			}
		}
		if len(paths) == len(historyNames) || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	replayed := 0
	record := os.Getenv("PAYKIT_RECORD_HISTORIES") != ""
	for _, ex := range executions {
		hist := history(t, ex.Execution.WorkflowId, ex.Execution.RunId)
		if err := replayer.ReplayWorkflowHistory(nil, hist); err != nil {
			t.Errorf("replay %s/%s: %v", ex.Execution.WorkflowId, ex.Execution.RunId, err)
		}
		replayed++
		if ids := versionMarkers(t, hist); ids[workflows.PaymentChangesID] == workflows.PaymentChangesVersion {
			for _, id := range []string{"close-on-alipay-word", "reconcile-backoff", "webhook-local-first", "signals-to-the-end", "close-path-local"} {
				if _, ok := ids[id]; ok {
					t.Errorf("%s/%s is on %s and also recorded a marker for %s, which it stands for: each marker is also a search attribute upsert",
						ex.Execution.WorkflowId, ex.Execution.RunId, workflows.PaymentChangesID, id)
				}
			}
		} else {
			t.Errorf("%s/%s did not record %s version %d (markers: %v)", ex.Execution.WorkflowId, ex.Execution.RunId, workflows.PaymentChangesID,
				workflows.PaymentChangesVersion, ids)
		}
		if record {
			recordHistory(t, ex, hist)
		}
	}
	if replayed < len(historyNames) {
		t.Fatalf("replayed %d histories, want at least %d (one per path)", replayed, len(historyNames))
	}
	t.Logf("replayed %d completed payment workflow histories", replayed)
}

// TestZZReplayRefundHistories replays every refund workflow history this run produced
// against the current code.
func TestZZReplayRefundHistories(t *testing.T) {
	replayer := worker.NewWorkflowReplayer()
	workflows.Register(replayer)
	recordRefunds := os.Getenv("PAYKIT_RECORD_REFUND_HISTORIES") != ""
	refunds := 0
	for _, ex := range listCompletedOf(t, "RefundWorkflow") {
		hist := history(t, ex.Execution.WorkflowId, ex.Execution.RunId)
		if err := replayer.ReplayWorkflowHistory(nil, hist); err != nil {
			t.Errorf("replay %s/%s: %v", ex.Execution.WorkflowId, ex.Execution.RunId, err)
		}
		refunds++
		if name, ok := refundHistoryNames[keywordOf(ex, "RefundNo")]; ok && recordRefunds {
			writeHistory(t, filepath.Join("refunds", name), hist)
		}
	}
	t.Logf("replayed %d completed refund workflow histories", refunds)
}

// otherWorkflowTypes are the long-lived workflows other than payments and refunds whose
// histories this run replays (statements have their own, TestStatementDay).
var otherWorkflowTypes = []string{workflows.SweeperWorkflowName, workflows.PurgeWorkflowName,
	workflows.AuditWorkflowName, workflows.RedeliverEventWorkflowName}

// TestZZReplayOtherHistories replays every completed sweeper, purge, audit and
// redelivery workflow of this run against the current code; each must have run. With
// PAYKIT_RECORD_OTHER_HISTORIES=1 the first two of each type are written to
// workflows/testdata/histories/others, which the workflows package replays.
func TestZZReplayOtherHistories(t *testing.T) {
	replayer := worker.NewWorkflowReplayer()
	workflows.Register(replayer)
	record := os.Getenv("PAYKIT_RECORD_OTHER_HISTORIES") != ""
	for _, typ := range otherWorkflowTypes {
		exs := listCompletedOf(t, typ)
		if len(exs) == 0 {
			t.Errorf("no completed %s in this run: nothing to replay", typ)
		}
		// The sweeper runs every few seconds on every stack: a sample of 50 of each type
		// covers its paths.
		exs = exs[:min(len(exs), 50)]
		for i, ex := range exs {
			hist := history(t, ex.Execution.WorkflowId, ex.Execution.RunId)
			if err := replayer.ReplayWorkflowHistory(nil, hist); err != nil {
				t.Errorf("replay %s/%s: %v", ex.Execution.WorkflowId, ex.Execution.RunId, err)
			}
			if record && i < 2 {
				writeHistory(t, filepath.Join("others", fmt.Sprintf("%s_%d", typ, i+1)), hist)
			}
		}
		t.Logf("replayed %d completed %s histories", len(exs), typ)
	}
}

// history returns the whole history of a run ("" for the latest run of workflowID).
func history(t *testing.T, workflowID, runID string) *historypb.History {
	t.Helper()
	hist := &historypb.History{}
	it := env.tc.GetWorkflowHistory(context.Background(), workflowID, runID, false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		hist.Events = append(hist.Events, ev)
	}
	return hist
}

// versionMarkers returns the change ids of the workflow.GetVersion markers in hist, with
// the version each recorded. On every such marker the SDK also upserts the
// TemporalChangeVersion search attribute, a visibility write on the server.
func versionMarkers(t *testing.T, hist *historypb.History) map[string]workflow.Version {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	ids := map[string]workflow.Version{}
	for _, ev := range hist.Events {
		m := ev.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "Version" {
			continue
		}
		var id string
		var v workflow.Version
		if err := dc.FromPayloads(m.GetDetails()["change-id"], &id); err != nil {
			t.Fatalf("version marker's change id: %v", err)
		}
		if err := dc.FromPayloads(m.GetDetails()["version"], &v); err != nil {
			t.Fatalf("version marker's version: %v", err)
		}
		ids[id] = v
	}
	return ids
}

func listCompletedOf(t *testing.T, workflowType string) []*workflowpb.WorkflowExecutionInfo {
	t.Helper()
	var all []*workflowpb.WorkflowExecutionInfo
	var token []byte
	for {
		resp, err := env.tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query:         `WorkflowType = "` + workflowType + `" AND ExecutionStatus = "Completed"`,
			NextPageToken: token,
		})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, resp.Executions...)
		if token = resp.NextPageToken; len(token) == 0 {
			return all
		}
	}
}

func keywordOf(ex *workflowpb.WorkflowExecutionInfo, name string) string {
	var v string
	if p := ex.GetSearchAttributes().GetIndexedFields()[name]; p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &v)
	}
	return v
}

func recordHistory(t *testing.T, ex *workflowpb.WorkflowExecutionInfo, hist *historypb.History) {
	t.Helper()
	name, ok := historyNames[keywordOf(ex, "OrderId")]
	if !ok {
		return
	}
	writeHistory(t, name, hist)
}

// writeHistory writes hist to workflows/testdata/histories/<name>.json.
func writeHistory(t *testing.T, name string, hist *historypb.History) {
	t.Helper()
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(repoRoot(), "workflows", "testdata", "histories", name+".json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
