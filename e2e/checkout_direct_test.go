package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/paykit/paykit/payment"
)

// The API creates a page payment and its pay link in one transaction and then starts its
// workflow. An API that dies between the two leaves a pending payment with its link and no
// run, and the checkout unanswered; nothing is lost or doubled:
//   - the client's retry (a second click, no Idempotency-Key) is answered with that same
//     payment, and its run is started;
//   - a payment whose checkout nobody retries is re-driven by the sweeper;
//   - either is paid once when the buyer pays.
//
// The doomed API reaches Temporal through a proxy that stops forwarding just before the
// checkout, so its start cannot have left the process.
func TestCheckoutAPIDiesBetweenItsCommitAndTheWorkflowStart(t *testing.T) {
	st := newStack(t, stackOptions{paymentTTL: 10 * time.Minute})
	tn := newTenant(t)
	for _, retried := range []bool{true, false} {
		proxy, doomed, apiAddr := startDoomedAPI(t, st)
		orderID := "direct-crash-" + randHex(4)
		proxy.hold()
		b, _ := json.Marshal(order(orderID, 990))
		req, _ := http.NewRequest(http.MethodPost, "http://"+apiAddr+"/v1/payments", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+tn.apiKey)
		req.Header.Set("Content-Type", "application/json")
		answered := make(chan int, 1)
		go func() {
			resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
			if err != nil {
				answered <- 0
				return
			}
			resp.Body.Close()
			answered <- resp.StatusCode
		}()
		// The payment is committed; its start is stuck in the proxy.
		var no string
		waitFor(t, 10*time.Second, func() bool {
			_ = env.db.QueryRow("SELECT payment_no FROM payments WHERE tenant_id = ? AND order_id = ? AND status = 0 AND pay_link IS NOT NULL",
				tn.id, orderID).Scan(&no)
			return no != ""
		})
		doomed.kill()
		proxy.drop()
		if code := <-answered; code != 0 {
			t.Fatalf("the dying API answered the checkout with HTTP %d", code)
		}
		if workflowRunning(t, payment.WorkflowID(tn.id, orderID)) {
			t.Fatalf("retried=%v: a run of %s exists although its start never left the dead API", retried, orderID)
		}
		if retried {
			res := mustCheckout(t, st, tn, "", order(orderID, 990))
			if res.PaymentNo != no || res.PayURL == "" {
				t.Fatalf("the retry answered payment %s (pay url %q), want the committed %s with its pay link", res.PaymentNo, res.PayURL, no)
			}
		}
		// Without a retry the sweeper (every 2 s here) re-drives it.
		state := waitRedrivenState(t, payment.WorkflowID(tn.id, orderID), 60*time.Second)
		if state.PaymentNo != no {
			t.Fatalf("retried=%v: the run holds payment %s, want %s", retried, state.PaymentNo, no)
		}
		var link string
		if err := env.db.QueryRow("SELECT pay_link FROM payments WHERE payment_no = ?", no).Scan(&link); err != nil {
			t.Fatal(err)
		}
		if c := do(t, http.MethodGet, link, nil, nil); c.status != http.StatusOK { // the buyer opens the cashier
			t.Fatalf("cashier: HTTP %d", c.status)
		}
		simPay(t, no)
		waitStatus(t, no, payment.StatusPaid, 60*time.Second)
		// The grant follows the PAID commit; the closed run says it is done.
		if final := waitPaymentRunClosed(t, payment.WorkflowID(tn.id, orderID), no, 60*time.Second); final.Status != payment.StatusPaid || !final.BenefitGranted || !final.WebhookSent {
			t.Fatalf("retried=%v: workflow result %+v", retried, final)
		}
		if n := count(t, "SELECT COUNT(*) FROM payments WHERE tenant_id = ? AND order_id = ?", tn.id, orderID); n != 1 {
			t.Fatalf("retried=%v: %d payments for the order, want 1", retried, n)
		}
		if n := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", no); n != 1 {
			t.Fatalf("retried=%v: %d grants, want 1", retried, n)
		}
	}
}

// running reports whether the workflow has a running run.
func workflowRunning(t *testing.T, workflowID string) bool {
	t.Helper()
	desc, err := env.tc.DescribeWorkflow(t.Context(), workflowID, "")
	if err != nil {
		return false
	}
	return desc.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// A page checkout of an order whose pending payment is a QR payment with no run (its run
// was terminated, and the sweeper is too slow to have re-driven it) starts that payment's
// run and is told, with a 409, that the order is being paid by that QR payment: it never
// gets a link of a method it did not ask for. Paying the QR code pays it once.
func TestDirectCheckoutOfAnotherMethodStartsThePendingPaymentsRunAndIsToldWhy(t *testing.T) {
	st := newStack(t, stackOptions{paymentTTL: 10 * time.Minute, extraEnv: []string{"PAYKIT_SWEEP_STALE_AFTER=1h"}})
	tn := newTenant(t)
	orderID := "direct-qr-" + randHex(4)
	qr := order(orderID, 990)
	qr["method"] = "qr"
	first := mustCheckout(t, st, tn, "", qr)
	if first.QRCode == "" {
		t.Fatalf("QR checkout answered %+v", first)
	}
	if err := env.tc.TerminateWorkflow(t.Context(), payment.WorkflowID(tn.id, orderID), "", "terminated by hand"); err != nil {
		t.Fatal(err)
	}
	page := st.checkout(t, tn, "", order(orderID, 990))
	if page.status != http.StatusConflict || !strings.Contains(string(page.body), "by a qr payment ("+first.PaymentNo+")") {
		t.Fatalf("page checkout of a pending QR payment: HTTP %d %s; want 409 naming the QR payment %s", page.status, page.body, first.PaymentNo)
	}
	state := waitRedrivenState(t, payment.WorkflowID(tn.id, orderID), 30*time.Second)
	if state.PaymentNo != first.PaymentNo || state.QRCode != first.QRCode {
		t.Fatalf("the run holds %s with qr %q", state.PaymentNo, state.QRCode)
	}
	simPay(t, first.PaymentNo)
	waitStatus(t, first.PaymentNo, payment.StatusPaid, 30*time.Second)
	if final := waitPaymentRunClosed(t, payment.WorkflowID(tn.id, orderID), first.PaymentNo, 30*time.Second); final.Status != payment.StatusPaid || !final.BenefitGranted {
		t.Fatalf("workflow result %+v", final)
	}
	if n := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", first.PaymentNo); n != 1 {
		t.Fatalf("%d grants, want 1", n)
	}
}
