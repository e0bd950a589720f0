package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/paykit/paykit/payment"
)

// temporalCLI runs the Temporal CLI against the run's server, as docs/operate/upgrades.md
// tells an operator to, trying again for a while: a version a worker has just started
// polling as is known to the server a moment later.
func temporalCLI(t *testing.T, args ...string) string {
	t.Helper()
	cli := envOr("PAYKIT_TEMPORAL_CLI", filepath.Join(repoRoot(), ".bin", "temporal"))
	args = append(args, "--address", env.temporalAddr)
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := exec.Command(cli, args...).CombinedOutput()
		if err == nil {
			return string(out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("temporal %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		time.Sleep(time.Second)
	}
}

// versionOf is the Worker Deployment Version and behaviour a workflow's run is routed by.
func versionOf(t *testing.T, workflowID string) (buildID string, behavior enumspb.VersioningBehavior) {
	t.Helper()
	d, err := env.tc.DescribeWorkflow(context.Background(), workflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	vi := d.RawResponse.GetWorkflowExecutionInfo().GetVersioningInfo()
	return vi.GetDeploymentVersion().GetBuildId(), vi.GetBehavior()
}

// workflowTaskFailures counts the WorkflowTaskFailed events in one run's history (the
// current run when runID is empty), logging each. A failure whose cause is
// UnhandledCommand is counted apart as raced: a signal arrived while the task was
// completing the run, and the server refused the completion so that the worker reads the
// signal first. Any build's worker meets it under signals; it says nothing of versions.
func workflowTaskFailures(t *testing.T, workflowID, runID string) (failed, raced int) {
	t.Helper()
	it := env.tc.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s run %q: %v", workflowID, runID, err)
		}
		if ev.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
			continue
		}
		attrs := ev.GetWorkflowTaskFailedEventAttributes()
		if attrs.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND {
			raced++
			continue
		}
		failed++
		t.Logf("%s run %q: workflow task failed (%s): %s", workflowID, runID, attrs.GetCause(), attrs.GetFailure().GetMessage())
	}
	return failed, raced
}

// TestWorkerVersioningPinsPaymentsToTheirBuild follows docs/operate/upgrades.md's rolling
// upgrade and its rollback with Worker Versioning on: workers of build a poll as version
// a of the deployment and are made current; a payment opened then is pinned to a. Workers
// of build b start beside them and b is made current: a payment opened then is pinned to
// b, while the first one's every workflow task, its notification, PAID, grant and webhook
// included, is still done by a's worker. Rolled back (a current again), a new payment is
// a's, and b's worker stops once its payment has ended. No workflow task fails, but for
// a completion that meets a signal (see workflowTaskFailures).
func TestWorkerVersioningPinsPaymentsToTheirBuild(t *testing.T) {
	deployment := "paykit-e2e-versioning-" + randHex(3)
	versioned := func(build string) []string {
		return []string{"PAYKIT_WORKER_VERSIONING=true", "PAYKIT_WORKER_DEPLOYMENT=" + deployment, "PAYKIT_WORKER_BUILD_ID=" + build}
	}
	st := newStack(t, stackOptions{extraEnv: versioned("a")})
	setCurrent := func(build string) {
		t.Helper()
		temporalCLI(t, "worker", "deployment", "set-current-version", "--deployment-name", deployment, "--build-id", build, "--yes")
	}
	setCurrent("a")
	tn := newTenant(t)
	pay := func(orderID string) (paymentNo, workflowID string) {
		t.Helper()
		res := mustCheckout(t, st, tn, "ver-"+orderID+"-"+randHex(4), order(orderID, 1200))
		openCashier(t, res.PayURL) // the buyer opens the pay link: the trade exists at Alipay
		return res.PaymentNo, payment.WorkflowID(tn.id, orderID)
	}
	pinnedTo := func(workflowID, build string) {
		t.Helper()
		waitFor(t, 30*time.Second, func() bool {
			b, behavior := versionOf(t, workflowID)
			return b == build && behavior == enumspb.VERSIONING_BEHAVIOR_PINNED
		})
	}
	p1, w1 := pay("v1")
	pinnedTo(w1, "a")

	// Build b beside a, then current: the upgrade.
	adminB := freeAddr()
	workerB, err := env.start(st.name+"-worker-b", env.paykitBin, []string{"worker"},
		append(append(append([]string{}, st.env...), versioned("b")...), "PAYKIT_WORKER_ADMIN_ADDR="+adminB))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(workerB.stop)
	if err := waitHTTP("http://"+adminB+"/readyz", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	setCurrent("b")
	p2, w2 := pay("v2")
	pinnedTo(w2, "b")

	// The first payment is paid while b is current: a's worker does all of it.
	simPay(t, p1)
	simPay(t, p2)
	waitStatus(t, p1, payment.StatusPaid, 30*time.Second)
	waitStatus(t, p2, payment.StatusPaid, 30*time.Second)
	waitWorkflowClosed(t, w1, 30*time.Second)
	waitWorkflowClosed(t, w2, 30*time.Second)
	if b, _ := versionOf(t, w1); b != "a" {
		t.Fatalf("the payment opened on a ended on build %q", b)
	}
	pidA, pidB := st.worker.cmd.Process.Pid, workerB.cmd.Process.Pid
	for w, pid := range map[string]int{w1: pidA, w2: pidB} {
		for _, got := range workflowTaskWorkers(t, w) {
			if got != pid {
				t.Fatalf("%s: a workflow task was done by process %d, want only %d (its build's worker)", w, got, pid)
			}
		}
	}

	// Rolled back: a is current again, and b's worker stops once its payment has ended.
	setCurrent("a")
	workerB.stop()
	p3, w3 := pay("v3")
	pinnedTo(w3, "a")
	simPay(t, p3)
	waitStatus(t, p3, payment.StatusPaid, 30*time.Second)
	waitWorkflowClosed(t, w3, 30*time.Second)

	for _, w := range []string{w1, w2, w3} {
		failed, raced := workflowTaskFailures(t, w, "")
		if failed != 0 {
			t.Errorf("%s: %d failed workflow tasks, want none", w, failed)
		}
		if raced != 0 {
			t.Logf("%s: %d completions met a signal and were retried", w, raced)
		}
	}
	for _, no := range []string{p1, p2, p3} {
		if n := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", no); n != 1 {
			t.Errorf("%s: %d grants, want 1", no, n)
		}
	}
	if hooks := env.merchant.received(tn.id); len(hooks) != 3 {
		t.Errorf("merchant webhooks: %d, want 3", len(hooks))
	}
}
