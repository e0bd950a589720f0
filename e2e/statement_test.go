package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/statement"
	"github.com/paykit/paykit/worker"
	"github.com/paykit/paykit/workflows"
)

// The statement test has an Alipay app, a simulator and a stack of its own, so that its
// day holds only its own payments whatever else runs in the same simulator or database.
const (
	stmtAppID    = "2021000000000018"
	stmtSellerID = "2088000000000018"
)

// startOwnSim starts a simulator process for one app and returns its URL.
func startOwnSim(t *testing.T, app, seller string) string {
	t.Helper()
	addr := freeAddr()
	p, err := env.start(t.Name()+"-alipaysim", filepath.Join(env.dir, "alipaysim"), []string{"serve"}, []string{
		"ALIPAYSIM_ADDR=" + addr, "ALIPAYSIM_APP_ID=" + app, "ALIPAYSIM_SELLER_ID=" + seller,
		"ALIPAYSIM_APP_PUBLIC_KEY=" + env.keys.AppPublicKeyPEM, "ALIPAYSIM_ALIPAY_PRIVATE_KEY=" + env.keys.AlipayPrivateKeyPEM,
		"ALIPAYSIM_TIME_SCALE=600", "ALIPAYSIM_PUBLIC_URL=http://" + addr,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	if err := waitHTTP("http://"+addr+"/_sim/trades", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

func simPost(t *testing.T, url string, body any) {
	t.Helper()
	b, _ := json.Marshal(body)
	r := do(t, http.MethodPost, url, map[string]string{"Content-Type": "application/json"}, b)
	if r.status != http.StatusOK {
		t.Fatalf("POST %s %s: HTTP %d %s", url, b, r.status, r.body)
	}
}

// paykitStatement runs `paykit statement` against the stack and returns its exit code
// and output.
func paykitStatement(t *testing.T, st *stack, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(env.paykitBin, append([]string{"statement"}, args...)...)
	cmd.Env = append(os.Environ(), st.env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("paykit statement: %v", err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

func statementAnomalies(t *testing.T, date string) map[string][]string {
	t.Helper()
	rows, err := env.db.Query(`SELECT kind, payment_no FROM payment_anomalies WHERE kind LIKE 'statement\_%' AND detail LIKE ? ORDER BY kind, payment_no`,
		"statement "+stmtAppID+" "+date+": %")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var k, no string
		if err := rows.Scan(&k, &no); err != nil {
			t.Fatal(err)
		}
		out[k] = append(out[k], no)
	}
	return out
}

// TestStatementDay reconciles a day of real payments and refunds made through the API
// against the simulator's bill: a day not yet published waits on a timer and completes
// once it is; the clean day has no discrepancy; three planted faults give exactly three
// of the right kinds; and running the day again adds no anomaly.
func TestStatementDay(t *testing.T) {
	simURL := startOwnSim(t, stmtAppID, stmtSellerID)
	st := newStack(t, stackOptions{extraEnv: []string{
		"ALIPAY_APP_ID=" + stmtAppID, "ALIPAY_SELLER_ID=" + stmtSellerID, "ALIPAY_GATEWAY_URL=" + simURL + "/gateway.do",
		"PAYKIT_STATEMENT_RETRY_EVERY=1s",
	}})
	ctx := context.Background()
	tn := tenant{id: "tstmt" + randHex(3), apiKey: "sk_test_" + randHex(16), secret: "whsec_" + randHex(16)}
	if err := env.store.UpsertTenant(ctx, payment.Tenant{ID: tn.id, Name: t.Name(), APIKeyHash: api.HashAPIKey(tn.apiKey),
		NotifyURL: env.merchant.url + "/webhooks/" + tn.id, WebhookSecret: tn.secret, AlipayAppID: stmtAppID, AlipaySeller: stmtSellerID}); err != nil {
		t.Fatal(err)
	}
	env.merchant.setSecret(tn.id, tn.secret)
	china := time.FixedZone("CST", 8*3600)
	// The day's payments must all fall on one bill: a run that would straddle midnight in
	// China waits for the new day rather than skip.
	now := time.Now().In(china)
	if untilMidnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, china).Sub(now); untilMidnight < 10*time.Minute {
		t.Logf("waiting %s for midnight in China, so that the day's payments fall on one bill", untilMidnight.Round(time.Second))
		time.Sleep(untilMidnight + 5*time.Second)
	}
	today := time.Now().In(china).Format("2006-01-02")

	// The day: payments with Chinese subjects, a partial and a full refund.
	const n = 6
	var nos []string
	for i := range n {
		res := mustCheckout(t, st, tn, "", map[string]any{"order_id": fmt.Sprintf("so%d", i), "amount_fen": 1000 + i, "subject": fmt.Sprintf("年度会员·第%d期", i)})
		openCashier(t, res.PayURL)
		simPost(t, simURL+"/_sim/trades/"+res.PaymentNo+"/pay", map[string]any{})
		nos = append(nos, res.PaymentNo)
	}
	for _, no := range nos {
		waitStatus(t, no, payment.StatusPaid, 30*time.Second)
	}
	for i, ref := range []struct {
		no  string
		fen int64
	}{{nos[0], 300}, {nos[1], 1001}} {
		r := st.postRefund(t, tn, ref.no, "", map[string]any{"refund_no": fmt.Sprintf("sr%d", i), "amount_fen": ref.fen})
		if r.status/100 != 2 {
			t.Fatalf("refund: HTTP %d %s", r.status, r.body)
		}
		waitRefund(t, tn.id, fmt.Sprintf("sr%d", i), payment.RefundSucceeded, 30*time.Second)
	}

	// The worker scheduled the app's morning reconciliation.
	if _, err := env.tc.ScheduleClient().GetHandle(ctx, worker.StatementScheduleID(st.taskQueue, stmtAppID)).Describe(ctx); err != nil {
		t.Fatalf("statement schedule: %v", err)
	}

	// Today is not published yet: the run waits for it, and finishes once it is.
	code, out := paykitStatement(t, st, "-date", today, "-run", "-wait", "3s", "-app", stmtAppID)
	if code != 2 || !strings.Contains(out, "waiting_for_bill") {
		t.Fatalf("before publication: exit %d\n%s", code, out)
	}
	simPost(t, simURL+"/_sim/bills/publish", map[string]string{"through": "today"})
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var rep payment.StatementReport
	if err := env.tc.GetWorkflow(wctx, workflows.StatementWorkflowID(stmtAppID, today), "").Get(wctx, &rep); err != nil {
		t.Fatal(err)
	}
	replayStatementHistory(t, workflows.StatementWorkflowID(stmtAppID, today), "statement_waited_for_bill")
	var total int64
	for i := range n {
		total += int64(1000 + i)
	}
	if rep.Discrepancies != 0 || rep.BillTradeCount != n || rep.LocalTradeCount != n || rep.BillTradeFen != total ||
		rep.BillRefundCount != 2 || rep.BillRefundFen != 1301 || rep.LocalRefundFen != 1301 || rep.DiffFen != 0 {
		t.Fatalf("clean day: %+v", rep)
	}
	// Its own app's: other tests' tenants on apps of their own share the database.
	code, out = paykitStatement(t, st, "-date", today, "-app", stmtAppID)
	if code != 0 || !strings.Contains(out, "discrepancies: 0 (clean)") {
		t.Fatalf("clean day printed: exit %d\n%s", code, out)
	}
	// After its day, the run caught up the app's 29 days before it that had no report
	// (StatementCatchUp): the simulator has a bill for each, with nothing on it.
	dayOf := func(back int) string {
		d, _ := time.ParseInLocation(statement.DateLayout, today, statement.China)
		return d.AddDate(0, 0, -back).Format(statement.DateLayout)
	}
	if n := count(t, `SELECT COUNT(*) FROM statement_reports WHERE app_id = ? AND bill_date BETWEEN ? AND ?`,
		stmtAppID, dayOf(workflows.StatementCatchUpDays), dayOf(2)); n != workflows.StatementCatchUpDays-1 {
		t.Errorf("%d days caught up, want %d", n, workflows.StatementCatchUpDays-1)
	}
	metrics := string(do(t, http.MethodGet, st.workerAdminURL+"/metrics", nil, nil).body)
	for _, want := range []string{
		`paykit_statement_discrepancies{app_id="` + stmtAppID + `",kind="statement_local_not_in_bill"} 0`,
		`paykit_statement_runs_total{app_id="` + stmtAppID + `",outcome="not_available"}`,
		fmt.Sprintf(`paykit_statement_runs_total{app_id="%s",outcome="reconciled"} %d`, stmtAppID, workflows.StatementCatchUpDays),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// Three planted faults. The worker stops, so that nothing repairs the pending one.
	st.worker.stop()
	keys := env.keys
	gw, err := alipay.New(alipay.Config{AppID: stmtAppID, SellerID: stmtSellerID, AppPrivateKeyPEM: keys.AppPrivateKeyPEM,
		AlipayPublicKeyPEM: keys.AlipayPublicKeyPEM, GatewayURL: simURL + "/gateway.do", NotifyURL: "http://127.0.0.1:9/notify"})
	if err != nil {
		t.Fatal(err)
	}
	// 1. Paid at Alipay, left pending locally by hand.
	long := "SP" + randHex(6)
	if _, _, err := env.store.CreatePendingPayment(ctx, payment.NewPayment{PaymentNo: long, TenantID: tn.id, OrderID: "so-long",
		Amount: 4321, Currency: "CNY", Subject: "长款", ExpireAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Precreate(ctx, payment.TradeRequest{PaymentNo: long, Subject: "长款", Amount: 4321, ExpireAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	simPost(t, simURL+"/_sim/trades/"+long+"/pay", map[string]any{})
	// 2. PAID locally, no trade at Alipay.
	short := "SP" + randHex(6)
	if _, _, err := env.store.CreatePendingPayment(ctx, payment.NewPayment{PaymentNo: short, TenantID: tn.id, OrderID: "so-short",
		Amount: 1234, Currency: "CNY", Subject: "短款", ExpireAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.store.MarkPaid(ctx, short, "2026120122999999000000000001", time.Now()); err != nil {
		t.Fatal(err)
	}
	// 3. A bill line with a changed amount.
	simPost(t, simURL+"/_sim/bills/"+today+"/corrupt", map[string]any{"op": "amount", "out_trade_no": nos[3], "amount": "99.99"})

	want := map[string][]string{
		payment.AnomalyStatementAmountMismatch: {nos[3]},
		payment.AnomalyStatementLocalNotInBill: {short},
		payment.AnomalyStatementPaidNotLocal:   {long},
	}
	for run := 1; run <= 2; run++ {
		code, out = paykitStatement(t, st, "-date", today, "-run", "-direct", "-app", stmtAppID)
		if code != 1 || !strings.Contains(out, "discrepancies: 3") {
			t.Fatalf("run %d with faults: exit %d\n%s", run, code, out)
		}
		got := statementAnomalies(t, today)
		for _, v := range got {
			sort.Strings(v)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("run %d: anomalies %v, want %v\n%s", run, got, want, out)
		}
	}
	if n := count(t, `SELECT COUNT(*) FROM statement_reports WHERE app_id = ? AND bill_date = ?`, stmtAppID, today); n != 1 {
		t.Fatalf("%d report rows, want 1", n)
	}
	rep, err = env.store.GetStatementReport(ctx, stmtAppID, today)
	if err != nil || rep.Runs != 3 || rep.DiffFen != (9999-1003)+4321-1234 {
		t.Fatalf("report after three runs: %+v %v", rep, err)
	}
	t.Logf("paykit statement -date %s:\n%s", today, out)
}

// replayStatementHistory replays the closed statement run against the current code and,
// with PAYKIT_RECORD_HISTORIES=1, records it where the workflows package replays it.
func replayStatementHistory(t *testing.T, workflowID, name string) {
	t.Helper()
	hist := history(t, workflowID, "")
	replayer := sdkworker.NewWorkflowReplayer()
	workflows.Register(replayer)
	if err := replayer.ReplayWorkflowHistory(nil, hist); err != nil {
		t.Fatalf("replay %s: %v", workflowID, err)
	}
	if os.Getenv("PAYKIT_RECORD_HISTORIES") != "" {
		writeHistory(t, name, hist)
	}
}
