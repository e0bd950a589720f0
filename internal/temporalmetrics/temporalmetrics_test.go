package temporalmetrics_test

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/paykit/paykit/internal/temporalmetrics"
)

// gather returns the families of reg by name, failing on any gather error (such as
// inconsistent label names within a family).
func gather(tb testing.TB, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func labels(m *dto.Metric) string {
	var parts []string
	for _, lp := range m.GetLabel() {
		parts = append(parts, lp.GetName()+"="+lp.GetValue())
	}
	return strings.Join(parts, ",")
}

func TestKinds(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := temporalmetrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	// The same counter with different tag sets, as the SDK reports temporal_request.
	h.WithTags(map[string]string{"operation": "StartWorkflowExecution"}).Counter("temporal_request").Inc(2)
	h.WithTags(map[string]string{"operation": "PollWorkflowTaskQueue", "task_queue": "payments"}).Counter("temporal_request").Inc(1)
	h.WithTags(map[string]string{"operation": "PollWorkflowTaskQueue", "task_queue": "payments"}).Counter("temporal_request").Inc(4)
	h.WithTags(map[string]string{"poller_type": "workflow_task"}).Gauge("temporal_num_pollers").Update(16)
	timer := h.WithTags(map[string]string{"activity_type": "MarkPaid"}).Timer("temporal_local_activity_execution_latency")
	for _, d := range []time.Duration{3 * time.Millisecond, 200 * time.Millisecond, 3 * time.Minute} {
		timer.Record(d)
	}
	h.Counter("odd-name.with dots").Inc(1)

	fams := gather(t, reg)
	req := fams["temporal_request_total"]
	if req == nil || req.GetType() != dto.MetricType_COUNTER || len(req.GetMetric()) != 2 {
		t.Fatalf("temporal_request_total: %v", req)
	}
	got := map[string]float64{}
	for _, m := range req.GetMetric() {
		got[labels(m)] = m.GetCounter().GetValue()
	}
	want := map[string]float64{
		"operation=StartWorkflowExecution,task_queue=":        2,
		"operation=PollWorkflowTaskQueue,task_queue=payments": 5,
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("temporal_request_total series %v, want %v", got, want)
		}
	}

	g := fams["temporal_num_pollers"]
	if g == nil || g.GetType() != dto.MetricType_GAUGE || g.GetMetric()[0].GetGauge().GetValue() != 16 {
		t.Fatalf("temporal_num_pollers: %v", g)
	}

	hist := fams["temporal_local_activity_execution_latency_seconds"]
	if hist == nil || hist.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("histogram: %v", hist)
	}
	hm := hist.GetMetric()[0].GetHistogram()
	if hm.GetSampleCount() != 3 || math.Abs(hm.GetSampleSum()-180.203) > 1e-9 {
		t.Fatalf("histogram count %d sum %v, want 3 and 180.203", hm.GetSampleCount(), hm.GetSampleSum())
	}
	cum := map[float64]uint64{}
	for _, b := range hm.GetBucket() {
		cum[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	if cum[0.001] != 0 || cum[0.005] != 1 || cum[0.25] != 2 || cum[120] != 2 {
		t.Fatalf("cumulative buckets %v: want 3ms in le=0.005, 200ms in le=0.25, 3m only in +Inf", cum)
	}

	if fams["odd_name_with_dots_total"] == nil {
		t.Fatalf("a name with invalid characters was not sanitized: %v", fams)
	}
}

func TestConcurrentUse(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := temporalmetrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			tagged := h.WithTags(map[string]string{"task_queue": "q", "worker": string(rune('a' + i%2))})
			for range 1000 {
				tagged.Counter("temporal_workflow_completed").Inc(1)
				tagged.Timer("temporal_workflow_endtoend_latency").Record(time.Millisecond)
			}
			_, _ = reg.Gather()
		})
	}
	wg.Wait()
	var total float64
	for _, m := range gather(t, reg)["temporal_workflow_completed_total"].GetMetric() {
		total += m.GetCounter().GetValue()
	}
	if total != 8000 {
		t.Fatalf("8 goroutines × 1000 increments counted %v", total)
	}
}

func hello(ctx workflow.Context) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Second})
	workflow.GetMetricsHandler(ctx).Counter("paykit_test_workflow_step").Inc(1)
	var out string
	err := workflow.ExecuteActivity(ctx, greet).Get(ctx, &out)
	return out, err
}

func greet(context.Context) (string, error) { return "hello", nil }

// TestThroughTheSDK runs a workflow in the SDK's test environment with the handler: a
// metric emitted through workflow.GetMetricsHandler arrives in the registry.
// The SDK's own worker metrics are checked against a real server in e2e.
func TestThroughTheSDK(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := temporalmetrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(h)
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterActivity(greet)
	env.ExecuteWorkflow(hello)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow: completed=%v err=%v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	mf := gather(t, reg)["paykit_test_workflow_step_total"]
	if mf == nil || len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetCounter().GetValue() != 1 {
		t.Fatalf("workflow counter: %v", mf)
	}
}

// BenchmarkHotPath is what the SDK does per task: tag a handler, then count and time.
func BenchmarkHotPath(b *testing.B) {
	h, err := temporalmetrics.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	tags := map[string]string{"task_queue": "payments", "workflow_type": "PaymentWorkflow", "namespace": "default"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t := h.WithTags(tags)
			t.Counter("temporal_workflow_task_queue_poll_succeed").Inc(1)
			t.Timer("temporal_workflow_task_execution_latency").Record(3 * time.Millisecond)
		}
	})
}
