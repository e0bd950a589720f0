package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/workflows"
)

// TestForgedSignalStraightToTemporalPaysNothing signals a pending payment's workflow
// with the Temporal CLI, as anyone who reaches Temporal's frontend can: a paid
// notification for the right amount with a made-up trade_no and notify_id, one with no
// notify_id, and one whose payload does not decode. None is Alipay's word: the payment
// stays pending with no grant and no paid event, each is recorded as unverified_signal
// (one anomaly about the made-up notify_id, one about no notification for the two that
// name none), and the run still takes the buyer's real payment afterwards.
func TestForgedSignalStraightToTemporalPaysNothing(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	orderID := "forged-" + randHex(4)
	res := mustCheckout(t, st, tn, "", order(orderID, 990))
	workflowID := payment.WorkflowID(tn.id, orderID)
	cli := envOr("PAYKIT_TEMPORAL_CLI", filepath.Join(repoRoot(), ".bin", "temporal"))
	signal := func(input string) {
		t.Helper()
		out, err := exec.Command(cli, "workflow", "signal", "--address", env.temporalAddr, "--namespace", "default",
			"--workflow-id", workflowID, "--name", workflows.NotificationSignal, "--input", input).CombinedOutput()
		if err != nil {
			t.Fatalf("temporal workflow signal: %v\n%s", err, out)
		}
	}
	forgedID := "forged-" + randHex(4)
	// state 2 is payment.TradePaid: the signals decode, and only the confirmation stands
	// between them and MarkPaid.
	signal(`{"notify_id":"` + forgedID + `","payment_no":"` + res.PaymentNo + `","trade_no":"FORGED","trade_status":"TRADE_SUCCESS","state":2,"amount_fen":990}`)
	signal(`{"payment_no":"` + res.PaymentNo + `","trade_no":"FORGED2","state":2,"amount_fen":990}`)
	signal(`"state=paid&amount_fen=990"`)

	waitFor(t, 20*time.Second, func() bool {
		return count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE kind = ? AND payment_no = ? AND subject = ?", payment.AnomalyUnverifiedSignal, res.PaymentNo, forgedID) == 1 &&
			count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE kind = ? AND payment_no = ? AND subject = ''", payment.AnomalyUnverifiedSignal, res.PaymentNo) == 1
	})
	var handled workflows.PaymentState
	waitFor(t, 20*time.Second, func() bool {
		v, err := env.tc.QueryWorkflow(context.Background(), workflowID, "", workflows.StateQuery)
		if err != nil || v.Get(&handled) != nil {
			return false
		}
		return handled.Anomaly != "" && handled.Status == payment.StatusPending
	})
	p, err := env.store.GetPayment(context.Background(), res.PaymentNo)
	if err != nil || p.Status != payment.StatusPending || p.TradeNo != "" {
		t.Fatalf("payment after forged signals: %+v %v, want pending with no trade_no", p, err)
	}
	if n := count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo); n != 0 {
		t.Fatalf("grants = %d after forged signals", n)
	}
	if n := count(t, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = 'payment.paid'", res.PaymentNo); n != 0 {
		t.Fatalf("payment.paid events = %d after forged signals", n)
	}

	openCashier(t, res.PayURL)
	simPay(t, res.PaymentNo)
	paid := waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	if paid.TradeNo == "FORGED" || paid.TradeNo == "FORGED2" || paid.TradeNo == "" {
		t.Fatalf("paid with trade_no %q, want Alipay's", paid.TradeNo)
	}
	waitFor(t, 30*time.Second, func() bool {
		return count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo) == 1
	})
	if n := count(t, "SELECT COUNT(*) FROM payment_anomalies WHERE kind = ? AND payment_no = ?", payment.AnomalyUnverifiedSignal, res.PaymentNo); n != 2 {
		t.Fatalf("unverified_signal anomalies = %d, want 2: one about %s, one about no notification", n, forgedID)
	}
	t.Logf("3 forged signals: payment pending, 2 unverified_signal anomalies (last %s); then paid by Alipay as %s", handled.Anomaly, paid.TradeNo)
}
