package mysql_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

func TestCreatePendingPayment_ConcurrentSameOrder(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	const n = 200

	results := make([]payment.Payment, n)
	existed := make([]bool, n)
	errs := make([]error, n)
	testenv.Parallel(n, func(i int) {
		results[i], existed[i], errs[i] = st.CreatePendingPayment(ctx, newPayment("t1", "o1", fmt.Sprintf("pay_%03d", i)))
	})

	var existedCount int
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if existed[i] {
			existedCount++
		}
	}
	rows := count(t, db, "SELECT COUNT(*) FROM payments WHERE tenant_id = 't1' AND order_id = 'o1'")
	orders := count(t, db, "SELECT COUNT(*) FROM orders WHERE tenant_id = 't1' AND order_id = 'o1'")
	var stored string
	if err := db.QueryRow("SELECT payment_no FROM payments WHERE tenant_id = 't1' AND order_id = 'o1'").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	distinct := map[string]int{}
	for _, p := range results {
		distinct[p.PaymentNo]++
	}
	t.Logf("%d concurrent creates: payments rows=%d orders rows=%d existed=true %d, distinct payment_no returned=%d",
		n, rows, orders, existedCount, len(distinct))

	if rows != 1 || orders != 1 {
		t.Fatalf("rows: payments=%d orders=%d, want 1 and 1", rows, orders)
	}
	if existedCount != n-1 {
		t.Fatalf("existed=true for %d callers, want %d", existedCount, n-1)
	}
	if len(distinct) != 1 || distinct[stored] != n {
		t.Fatalf("callers got payment_nos %v, want all %s", distinct, stored)
	}
	for i, p := range results {
		if p.Status != payment.StatusPending || p.OrderID != "o1" || p.ID == 0 {
			t.Fatalf("caller %d got %+v", i, p)
		}
	}
}

func TestCreatePendingPayment_RepurchaseAndHistory(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()

	type step struct {
		name        string
		do          func(t *testing.T) payment.Payment
		wantNo      string
		wantExisted bool
		wantStatus  payment.Status
		wantOrder   int
		wantRows    int
	}
	var lastExisted bool
	createE := func(no string) func(t *testing.T) payment.Payment {
		return func(t *testing.T) payment.Payment {
			p, existed, err := st.CreatePendingPayment(ctx, newPayment("t1", "o1", no))
			if err != nil {
				t.Fatalf("create %s: %v", no, err)
			}
			lastExisted = existed
			return p
		}
	}
	createR := func(no string) func(t *testing.T) payment.Payment {
		return func(t *testing.T) payment.Payment {
			np := newPayment("t1", "o1", no)
			np.Repurchase = true
			p, existed, err := st.CreatePendingPayment(ctx, np)
			if err != nil {
				t.Fatalf("create %s: %v", no, err)
			}
			if !p.Repurchase && !existed {
				t.Fatalf("create %s: repurchase flag not stored", no)
			}
			lastExisted = existed
			return p
		}
	}
	refused := func(no, paidBy string) func(t *testing.T) payment.Payment {
		return func(t *testing.T) payment.Payment {
			_, _, err := st.CreatePendingPayment(ctx, newPayment("t1", "o1", no))
			if payment.ErrorCode(err) != payment.EORDERPAID {
				t.Fatalf("create %s on a paid order without opt-in: %v, want %s", no, err, payment.EORDERPAID)
			}
			lastExisted = true
			p, gerr := st.GetPayment(ctx, paidBy)
			if gerr != nil {
				t.Fatal(gerr)
			}
			return p
		}
	}
	pay := func(no string) func(t *testing.T) payment.Payment {
		return func(t *testing.T) payment.Payment {
			tr, err := st.MarkPaid(ctx, no, "trade_"+no, time.Time{})
			if err != nil || !tr.Changed {
				t.Fatalf("pay %s: changed=%v err=%v", no, tr.Changed, err)
			}
			lastExisted = false
			return tr.Payment
		}
	}
	closeP := func(no string) func(t *testing.T) payment.Payment {
		return func(t *testing.T) payment.Payment {
			tr, err := st.ClosePayment(ctx, no, "expired")
			if err != nil || !tr.Changed {
				t.Fatalf("close %s: changed=%v err=%v", no, tr.Changed, err)
			}
			lastExisted = false
			return tr.Payment
		}
	}
	steps := []step{
		{"first payment", createE("p1"), "p1", false, payment.StatusPending, orderUnpaid, 1},
		{"retry with same payment_no", createE("p1"), "p1", true, payment.StatusPending, orderUnpaid, 1},
		{"second payment while pending gets the first", createE("p2"), "p1", true, payment.StatusPending, orderUnpaid, 1},
		{"pay it", pay("p1"), "p1", false, payment.StatusPaid, orderPaid, 1},
		{"retry of the paid payment_no returns it paid", createE("p1"), "p1", true, payment.StatusPaid, orderPaid, 1},
		{"a new payment for the paid order without opt-in is refused", refused("p2b", "p1"), "p1", true, payment.StatusPaid, orderPaid, 1},
		{"re-purchase after paid", createR("p3"), "p3", false, payment.StatusPending, orderPaid, 2},
		{"retry of the re-purchase without the flag finds its own row", createE("p3"), "p3", true, payment.StatusPending, orderPaid, 2},
		{"close the re-purchase: the paid order stays paid", closeP("p3"), "p3", false, payment.StatusClosed, orderPaid, 2},
		{"after a closed re-purchase the order is still final", refused("p3b", "p1"), "p1", true, payment.StatusPaid, orderPaid, 2},
		{"re-purchase after close", createR("p4"), "p4", false, payment.StatusPending, orderPaid, 3},
		{"pay the re-purchase", pay("p4"), "p4", false, payment.StatusPaid, orderPaid, 3},
		{"third purchase", createR("p5"), "p5", false, payment.StatusPending, orderPaid, 4},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			p := s.do(t)
			if p.PaymentNo != s.wantNo || lastExisted != s.wantExisted || p.Status != s.wantStatus {
				t.Fatalf("got %s existed=%v status=%v, want %s existed=%v status=%v",
					p.PaymentNo, lastExisted, p.Status, s.wantNo, s.wantExisted, s.wantStatus)
			}
			if got := orderStatus(t, db, "t1", "o1"); got != s.wantOrder {
				t.Fatalf("order status = %d, want %d", got, s.wantOrder)
			}
			if got := count(t, db, "SELECT COUNT(*) FROM payments WHERE order_id = 'o1'"); got != s.wantRows {
				t.Fatalf("payments rows = %d, want %d", got, s.wantRows)
			}
			if got := count(t, db, "SELECT COUNT(*) FROM payments WHERE order_id = 'o1' AND status = 0"); got > 1 {
				t.Fatalf("%d pending payments for one order", got)
			}
		})
	}

	ps, err := st.ListOrderPayments(ctx, "t1", "o1")
	if err != nil {
		t.Fatal(err)
	}
	var nos []string
	for _, p := range ps {
		nos = append(nos, p.PaymentNo)
	}
	if fmt.Sprint(nos) != "[p5 p4 p3 p1]" {
		t.Fatalf("ListOrderPayments = %v, want newest first [p5 p4 p3 p1]", nos)
	}
}

func TestCreatePendingPayment_CancelledOrderIsRevived(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()

	createPending(t, st, "t1", "o2", "q1")
	if _, err := st.ClosePayment(ctx, "q1", "buyer cancelled"); err != nil {
		t.Fatal(err)
	}
	if got := orderStatus(t, db, "t1", "o2"); got != orderCancelled {
		t.Fatalf("order after close = %d, want cancelled", got)
	}
	np := newPayment("t1", "o2", "q2")
	np.Amount = 1234
	if _, existed, err := st.CreatePendingPayment(ctx, np); err != nil || existed {
		t.Fatalf("create q2: existed=%v err=%v", existed, err)
	}
	var status int
	var amount int64
	if err := db.QueryRow("SELECT status, amount_fen FROM orders WHERE order_id = 'o2'").Scan(&status, &amount); err != nil {
		t.Fatal(err)
	}
	if status != orderUnpaid || amount != 1234 {
		t.Fatalf("order after new payment: status=%d amount=%d, want unpaid 1234", status, amount)
	}
}

func TestCreatePendingPayment_ConcurrentRepurchase(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	createPending(t, st, "t1", "o1", "first")
	if _, err := st.MarkPaid(ctx, "first", "trade_first", time.Now()); err != nil {
		t.Fatal(err)
	}
	const n = 50
	var created, existed atomic.Int32
	testenv.Parallel(n, func(i int) {
		np := newPayment("t1", "o1", fmt.Sprintf("again_%02d", i))
		np.Repurchase = true
		_, ex, err := st.CreatePendingPayment(ctx, np)
		switch {
		case err != nil:
			t.Errorf("caller %d: %v", i, err)
		case ex:
			existed.Add(1)
		default:
			created.Add(1)
		}
	})
	pending := count(t, db, "SELECT COUNT(*) FROM payments WHERE order_id = 'o1' AND status = 0")
	total := count(t, db, "SELECT COUNT(*) FROM payments WHERE order_id = 'o1'")
	t.Logf("%d concurrent re-purchases of a paid order: created=%d existed=%d rows=%d pending=%d",
		n, created.Load(), existed.Load(), total, pending)
	if created.Load() != 1 || existed.Load() != n-1 || pending != 1 || total != 2 {
		t.Fatal("want exactly one new pending payment next to the paid one")
	}
	if got := orderStatus(t, db, "t1", "o1"); got != orderPaid {
		t.Fatalf("order status = %d, want it to stay paid", got)
	}
}

func TestCreatePendingPayment_Refusals(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	createPending(t, st, "t1", "o1", "p1")

	tests := []struct {
		name     string
		np       payment.NewPayment
		wantCode string
	}{
		{"invalid amount", func() payment.NewPayment { np := newPayment("t1", "o9", "p9"); np.Amount = 0; return np }(), payment.EINVALID},
		{"invalid order id", newPayment("t1", "o 9", "p9"), payment.EINVALID},
		{"payment_no of another order", newPayment("t1", "o2", "p1"), payment.ECONFLICT},
		{"payment_no of another tenant", newPayment("t2", "o1", "p1"), payment.ECONFLICT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := st.CreatePendingPayment(ctx, tt.np)
			if got := payment.ErrorCode(err); got != tt.wantCode {
				t.Fatalf("code = %q (%v), want %q", got, err, tt.wantCode)
			}
			if mysql.IsDuplicate(err) {
				t.Fatalf("duplicate-key error leaked: %v", err)
			}
		})
	}
}

func TestMarkPaid_Concurrent(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	p := createPending(t, st, "t1", "o1", "p1")
	paidAt := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
	const n = 100

	trs := make([]payment.Transition, n)
	errs := make([]error, n)
	testenv.Parallel(n, func(i int) {
		trs[i], errs[i] = st.MarkPaid(ctx, p.PaymentNo, "2025030122001", paidAt)
	})
	var changed int
	var winner payment.Transition
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if trs[i].Payment.Status != payment.StatusPaid {
			t.Fatalf("caller %d sees status %v, want PAID", i, trs[i].Payment.Status)
		}
		if trs[i].Changed {
			changed++
			winner = trs[i]
		}
	}
	for i := range n {
		// Every caller, the losers and a retry whose answer was lost included, learns the
		// one event the winning transition wrote, so it can still deliver it.
		if trs[i].EventID != winner.EventID || winner.EventID == "" {
			t.Fatalf("caller %d: EventID %q, winner's %q", i, trs[i].EventID, winner.EventID)
		}
	}
	events := count(t, db, "SELECT COUNT(*) FROM payment_events WHERE payment_no = 'p1'")
	paidOrders := count(t, db, "SELECT COUNT(*) FROM orders WHERE order_id = 'o1' AND status = 1 AND paid_payment_no = 'p1'")
	var version int64
	if err := db.QueryRow("SELECT version FROM payments WHERE payment_no = 'p1'").Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d concurrent MarkPaid: changed=%d unchanged=%d events=%d paid orders=%d version=%d",
		n, changed, n-changed, events, paidOrders, version)
	if changed != 1 || events != 1 || paidOrders != 1 || version != 1 {
		t.Fatal("want exactly one transition, one event, one paid order, version 1")
	}

	if winner.EventID != mysql.EventID("p1", payment.EventPaymentPaid) {
		t.Fatalf("EventID = %q", winner.EventID)
	}
	wantPaidAt := paidAt.Truncate(time.Microsecond)
	got, err := st.GetPayment(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if !got.PaidAt.Equal(wantPaidAt) || got.TradeNo != "2025030122001" || !got.PaidAt.Equal(winner.Payment.PaidAt) {
		t.Fatalf("stored paid_at=%v trade_no=%q, winner saw %v", got.PaidAt, got.TradeNo, winner.Payment.PaidAt)
	}
	if got.UpdatedAt != winner.Payment.UpdatedAt || got.Version != winner.Payment.Version {
		t.Fatalf("returned payment %+v differs from stored %+v", winner.Payment, got)
	}

	ev, err := st.GetEvent(ctx, winner.EventID)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(ev.Payload, &body); err != nil {
		t.Fatalf("payload %s: %v", ev.Payload, err)
	}
	for k, want := range map[string]any{
		"event_id": winner.EventID, "type": "payment.paid", "payment_no": "p1", "order_id": "o1",
		"tenant_id": "t1", "amount_fen": float64(990), "currency": "CNY", "trade_no": "2025030122001",
		"status": "PAID", "paid_at": wantPaidAt.Format(time.RFC3339Nano),
	} {
		if body[k] != want {
			t.Errorf("payload[%s] = %v, want %v", k, body[k], want)
		}
	}
}

func TestPaidAndClosedRace(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	const (
		rounds = 25
		each   = 8 // MarkPaid callers and as many ClosePayment callers per round
	)
	var paidWins, closeWins int
	for r := range rounds {
		no := fmt.Sprintf("race_%02d", r)
		order := fmt.Sprintf("o_%02d", r)
		createPending(t, st, "t1", order, no)

		var changedPaid, changedClosed atomic.Int32
		finals := make([]payment.Status, 2*each)
		testenv.Parallel(2*each, func(i int) {
			var tr payment.Transition
			var err error
			if i%2 == 0 {
				tr, err = st.MarkPaid(ctx, no, "trade_"+no, time.Time{})
				if tr.Changed {
					changedPaid.Add(1)
				}
			} else {
				tr, err = st.ClosePayment(ctx, no, "expired")
				if tr.Changed {
					changedClosed.Add(1)
				}
			}
			if err != nil {
				t.Errorf("round %d caller %d: %v", r, i, err)
			}
			finals[i] = tr.Payment.Status
		})

		winners := changedPaid.Load() + changedClosed.Load()
		if winners != 1 {
			t.Fatalf("round %d: %d transitions (paid %d, closed %d), want 1", r, winners, changedPaid.Load(), changedClosed.Load())
		}
		want, wantType, wantOrder := payment.StatusPaid, payment.EventPaymentPaid, orderPaid
		if changedClosed.Load() == 1 {
			want, wantType, wantOrder = payment.StatusClosed, payment.EventPaymentClosed, orderCancelled
			closeWins++
		} else {
			paidWins++
		}
		for i, s := range finals {
			if s != want {
				t.Fatalf("round %d caller %d saw %v, want %v", r, i, s, want)
			}
		}
		if n := count(t, db, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ?", no); n != 1 {
			t.Fatalf("round %d: %d events, want 1", r, n)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM payment_events WHERE payment_no = ? AND type = ?", no, wantType); n != 1 {
			t.Fatalf("round %d: the event is not %s", r, wantType)
		}
		if got := orderStatus(t, db, "t1", order); got != wantOrder {
			t.Fatalf("round %d: order status %d, want %d", r, got, wantOrder)
		}
	}
	events := count(t, db, "SELECT COUNT(*) FROM payment_events")
	t.Logf("%d rounds of %d MarkPaid vs %d ClosePayment: paid won %d, closed won %d, events total %d",
		rounds, each, each, paidWins, closeWins, events)
	if events != rounds {
		t.Fatalf("events = %d, want %d", events, rounds)
	}
}

func TestTransitionsOfMissingAndFinalPayments(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	createPending(t, st, "t1", "o1", "p1")
	if _, err := st.ClosePayment(ctx, "p1", "expired"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		do          func() (payment.Transition, error)
		wantErr     error
		wantStatus  payment.Status
		wantChanged bool
	}{
		{"pay missing", func() (payment.Transition, error) { return st.MarkPaid(ctx, "nope", "x", time.Time{}) }, payment.ErrNotFound, 0, false},
		{"close missing", func() (payment.Transition, error) { return st.ClosePayment(ctx, "nope", "x") }, payment.ErrNotFound, 0, false},
		{"pay closed", func() (payment.Transition, error) { return st.MarkPaid(ctx, "p1", "x", time.Time{}) }, nil, payment.StatusClosed, false},
		{"close closed", func() (payment.Transition, error) { return st.ClosePayment(ctx, "p1", "again") }, nil, payment.StatusClosed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := tt.do()
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && (tr.Payment.Status != tt.wantStatus || tr.Changed != tt.wantChanged) {
				t.Fatalf("got status %v changed %v", tr.Payment.Status, tr.Changed)
			}
		})
	}
}

func TestTradeNoBelongsToOnePayment(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	createPending(t, st, "t1", "o1", "p1")
	createPending(t, st, "t1", "o2", "p2")
	if _, err := st.MarkPaid(ctx, "p1", "T1", time.Time{}); err != nil {
		t.Fatal(err)
	}
	_, err := st.MarkPaid(ctx, "p2", "T1", time.Time{})
	if payment.ErrorCode(err) != payment.ECONFLICT {
		t.Fatalf("paying a second payment with the same trade_no: %v, want conflict", err)
	}
	p, err := st.GetPayment(ctx, "p2")
	if err != nil || p.Status != payment.StatusPending {
		t.Fatalf("p2 after the refused payment: %+v %v", p, err)
	}
}

func TestGetters(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	p1 := createPending(t, st, "t1", "o1", "p1")
	createPending(t, st, "t1", "o2", "p2")
	createPending(t, st, "t2", "o1", "p3")
	if _, err := st.MarkPaid(ctx, "p2", "T2", time.Time{}); err != nil {
		t.Fatal(err)
	}

	got, err := st.GetPayment(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if got != p1 {
		t.Fatalf("GetPayment = %+v\nwant the created %+v", got, p1)
	}
	if _, err := st.GetPayment(ctx, "nope"); !errors.Is(err, payment.ErrNotFound) || payment.ErrorCode(err) != payment.ENOTFOUND {
		t.Fatalf("GetPayment(missing) = %v", err)
	}
	if _, err := st.GetTenantPayment(ctx, "t1", "p1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetTenantPayment(ctx, "t2", "p1"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("another tenant's payment: %v, want not found", err)
	}
	if ps, err := st.ListOrderPayments(ctx, "t1", "none"); err != nil || ps == nil || len(ps) != 0 {
		t.Fatalf("ListOrderPayments(none) = %v, %v", ps, err)
	}

	pending, next, err := st.PendingPaymentsBefore(ctx, time.Now().Add(time.Second), payment.Cursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	var nos []string
	for _, p := range pending {
		nos = append(nos, p.PaymentNo)
	}
	if fmt.Sprint(nos) != "[p1 p3]" || !next.IsZero() {
		t.Fatalf("PendingPaymentsBefore = %v, next %+v; want [p1 p3] oldest first, and the walk over", nos, next)
	}
	// A page at a time: each goes on past the last, and the one that reads the last hands
	// back the zero cursor (the oldest again).
	nos = nil
	var after payment.Cursor
	for range 3 {
		pending, next, err := st.PendingPaymentsBefore(ctx, time.Now().Add(time.Second), after, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pending {
			nos = append(nos, p.PaymentNo)
		}
		after = next
	}
	if fmt.Sprint(nos) != "[p1 p3]" || !after.IsZero() {
		t.Fatalf("pages of 1 read %v and stopped at %+v; want [p1 p3], then the walk over", nos, after)
	}
	if pending, _, _ := st.PendingPaymentsBefore(ctx, p1.CreatedAt, payment.Cursor{}, 10); len(pending) != 0 {
		t.Fatalf("before the first creation returned %d", len(pending))
	}
}

func TestMethodAndCloseReasonArePersisted(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	qr := newPayment("t1", "o-qr", "pqr")
	qr.Method = payment.MethodQR
	created, existed, err := st.CreatePendingPayment(ctx, qr)
	if err != nil || existed {
		t.Fatalf("create: %v existed=%v", err, existed)
	}
	if created.Method != payment.MethodQR {
		t.Fatalf("created method %q, want qr", created.Method)
	}
	// A payment created without a method is a page payment.
	createPending(t, st, "t1", "o-page", "ppage")
	if p, _ := st.GetPayment(ctx, "ppage"); p.Method != payment.MethodPage {
		t.Fatalf("default method %q, want page", p.Method)
	}
	bad := newPayment("t1", "o-bad", "pbad")
	bad.Method = "wechat"
	if _, _, err := st.CreatePendingPayment(ctx, bad); payment.ErrorCode(err) != payment.EINVALID {
		t.Fatalf("unknown method: %v, want EINVALID", err)
	}

	tr, err := st.ClosePayment(ctx, "pqr", "expired")
	if err != nil || !tr.Changed || tr.Payment.CloseReason != "expired" {
		t.Fatalf("close: %+v %v", tr, err)
	}
	got, err := st.GetPayment(ctx, "pqr")
	if err != nil || got.Method != payment.MethodQR || got.CloseReason != "expired" || got.Status != payment.StatusClosed {
		t.Fatalf("read back %+v %v, want a closed qr payment with reason expired", got, err)
	}
}

// TestPaidOrderIsFinal races checkouts without the re-purchase opt-in against the
// payment of the order: each one either joins the pending payment or is refused, and no
// second payment row is ever written, with no layer above the database.
func TestPaidOrderIsFinal(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	for round := range 10 {
		order := fmt.Sprintf("final_%d", round)
		first := fmt.Sprintf("f%d_first", round)
		createPending(t, st, "t1", order, first)
		const n = 30
		var joined, refused atomic.Int32
		testenv.Parallel(n+1, func(i int) {
			if i == n {
				if _, err := st.MarkPaid(ctx, first, "trade_"+first, time.Now()); err != nil {
					t.Errorf("mark paid: %v", err)
				}
				return
			}
			p, ex, err := st.CreatePendingPayment(ctx, newPayment("t1", order, fmt.Sprintf("f%d_again_%02d", round, i)))
			switch {
			case payment.ErrorCode(err) == payment.EORDERPAID:
				refused.Add(1)
			case err != nil:
				t.Errorf("caller %d: %v", i, err)
			case !ex || p.PaymentNo != first:
				t.Errorf("caller %d created or found %s (existed=%v), want the first payment", i, p.PaymentNo, ex)
			default:
				joined.Add(1)
			}
		})
		rows := count(t, db, "SELECT COUNT(*) FROM payments WHERE order_id = ?", order)
		if rows != 1 || joined.Load()+refused.Load() != n {
			t.Fatalf("round %d: rows=%d joined=%d refused=%d, want 1 row and every caller joined or refused", round, rows, joined.Load(), refused.Load())
		}
	}
}

// OrderStanding answers, in one statement, the order's latest PAID payment and its pending
// one, as the order moves from new to pending, paid, and re-purchased; and a payment
// created with its pay link keeps it.
func TestOrderStanding(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	check := func(step, wantPaid, wantPending string) {
		t.Helper()
		paid, pending, err := st.OrderStanding(ctx, "t1", "os1")
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		gotPaid, gotPending := "", ""
		if paid != nil {
			gotPaid = paid.PaymentNo
		}
		if pending != nil {
			gotPending = pending.PaymentNo
		}
		if gotPaid != wantPaid || gotPending != wantPending {
			t.Fatalf("%s: paid %q pending %q, want %q and %q", step, gotPaid, gotPending, wantPaid, wantPending)
		}
	}
	check("new order", "", "")
	np := newPayment("t1", "os1", "POS1")
	np.PayLink = "https://cashier.test/pay?out_trade_no=POS1"
	if _, _, err := st.CreatePendingPayment(ctx, np); err != nil {
		t.Fatal(err)
	}
	if link, err := st.PendingPayLink(ctx, "t1", "POS1"); err != nil || link != np.PayLink {
		t.Fatalf("pay link %q, %v; want the one it was created with", link, err)
	}
	check("pending", "", "POS1")
	if _, err := st.MarkPaid(ctx, "POS1", "trade_POS1", time.Now()); err != nil {
		t.Fatal(err)
	}
	check("paid", "POS1", "")
	again := newPayment("t1", "os1", "POS2")
	again.Repurchase = true
	if _, _, err := st.CreatePendingPayment(ctx, again); err != nil {
		t.Fatal(err)
	}
	check("re-purchase pending", "POS1", "POS2")
	if _, err := st.MarkPaid(ctx, "POS2", "trade_POS2", time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	check("re-purchased", "POS2", "")
	if _, _, err := st.OrderStanding(ctx, "t1", "other"); err != nil {
		t.Fatal(err)
	}
}

// TestChannelIsPersisted: a payment's channel is its method's, written on insert
// (migration 0057) and read back; a WeChat Pay method fits the widened method column, and
// a row from before the column reads as Alipay, the column's default.
func TestChannelIsPersisted(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		method payment.Method
		want   payment.Channel
	}{
		{"page", payment.MethodPage, payment.ChannelAlipay},
		{"no method", "", payment.ChannelAlipay},
		{"qr", payment.MethodQR, payment.ChannelAlipay},
		{"wechat native", payment.MethodWechatNative, payment.ChannelWechatPay},
		{"wechat jsapi", payment.MethodWechatJSAPI, payment.ChannelWechatPay},
		{"wechat h5", payment.MethodWechatH5, payment.ChannelWechatPay},
		{"wechat app", payment.MethodWechatApp, payment.ChannelWechatPay},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			no := fmt.Sprintf("pch%d", i)
			np := newPayment("t1", fmt.Sprintf("o-ch%d", i), no)
			np.Method, np.AlipayAppID = tc.method, "1230000109"
			created, existed, err := st.CreatePendingPayment(ctx, np)
			if err != nil || existed {
				t.Fatalf("create: %v existed=%v", err, existed)
			}
			if created.Channel != tc.want {
				t.Fatalf("created channel %q, want %q", created.Channel, tc.want)
			}
			got, err := st.GetPayment(ctx, no)
			if err != nil || got.Channel != tc.want || got.Method != np.Method.OrPage() || got.AlipayAppID != "1230000109" {
				t.Fatalf("read back channel %q method %q app %q (%v), want %q %q 1230000109", got.Channel, got.Method, got.AlipayAppID, err, tc.want, np.Method.OrPage())
			}
			if n := count(t, db, "SELECT COUNT(*) FROM payments WHERE payment_no = ? AND channel = ?", no, string(tc.want)); n != 1 {
				t.Fatalf("rows with channel %q: %d, want 1", tc.want, n)
			}
		})
	}
	// A row written without the column, as code from before 0057 writes it.
	now := time.Now().UTC()
	if _, err := db.ExecContext(ctx, `INSERT INTO payments (payment_no, tenant_id, order_id, amount_fen, currency, subject, status, expire_at, created_at, updated_at)
		VALUES ('pold', 't1', 'o-old', 100, 'CNY', 's', 0, ?, ?, ?)`, now, now, now); err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetPayment(ctx, "pold"); err != nil || got.Channel != payment.ChannelAlipay {
		t.Fatalf("a row from before: channel %q (%v), want alipay", got.Channel, err)
	}
}
