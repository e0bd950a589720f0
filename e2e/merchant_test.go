package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/payment"
)

func (tn tenant) auth() map[string]string {
	return map[string]string{"Authorization": "Bearer " + tn.apiKey, "Content-Type": "application/json"}
}

// feedEvent is an event of GET /v1/events.
type feedEvent struct {
	EventID   string `json:"event_id"`
	Type      string `json:"type"`
	PaymentNo string `json:"payment_no"`
	Delivery  struct {
		State    string `json:"state"`
		Attempts int    `json:"attempts"`
	} `json:"delivery"`
}

// events reads the tenant's whole feed, a page of two at a time.
func (st *stack) events(t *testing.T, tn tenant) []feedEvent {
	t.Helper()
	var all []feedEvent
	after := ""
	for range 50 {
		r := do(t, http.MethodGet, st.apiURL+"/v1/events?limit=2&after="+after, tn.auth(), nil)
		var page struct {
			Events     []feedEvent `json:"events"`
			HasMore    bool        `json:"has_more"`
			NextCursor string      `json:"next_cursor"`
		}
		if r.status != http.StatusOK {
			t.Fatalf("events: HTTP %d %s", r.status, r.body)
		}
		r.json(t, &page)
		all = append(all, page.Events...)
		if !page.HasMore {
			return all
		}
		after = page.NextCursor
	}
	t.Fatal("event feed does not end")
	return nil
}

func TestMerchantCancelsAPayment(t *testing.T) {
	st := shared(t)
	tn, other := newTenant(t), newTenant(t)
	res := mustCheckout(t, st, tn, "", order("16001", 1200))
	openCashier(t, res.PayURL) // the trade exists at Alipay from now on
	url := st.apiURL + "/v1/payments/" + res.PaymentNo + "/cancel"
	if r := do(t, http.MethodPost, url, other.auth(), nil); r.status != http.StatusNotFound {
		t.Fatalf("another tenant's cancel: HTTP %d %s", r.status, r.body)
	}
	h := tn.auth()
	h["Idempotency-Key"] = "cancel-16001-" + randHex(4)
	r := do(t, http.MethodPost, url, h, nil)
	var p payment.Payment
	r.json(t, &p)
	if r.status != http.StatusOK || p.Status != payment.StatusClosed || p.CloseReason != "cancelled" {
		t.Fatalf("cancel: HTTP %d %s", r.status, r.body)
	}
	again := do(t, http.MethodPost, url, h, nil)
	if again.status != http.StatusOK || string(again.body) != string(r.body) || again.header.Get(api.ReplayedHeader) != "true" {
		t.Fatalf("cancel replay: HTTP %d %s", again.status, again.body)
	}
	trade := do(t, http.MethodGet, env.simURL+"/_sim/trades/"+res.PaymentNo, nil, nil)
	if !strings.Contains(string(trade.body), `"TRADE_CLOSED"`) {
		t.Fatalf("trade at alipay after cancel: %s", trade.body)
	}
	t.Logf("cancel of %s: trade closed at Alipay, payment CLOSED; the retry replayed the answer", res.PaymentNo)
}

// Alipay has the money but its notification was lost: the cancel finds the trade paid,
// the payment becomes PAID with its grant and webhook, and the answer is 409.
func TestMerchantCancelOfAPaidTradeIsAlreadyPaid(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	res := mustCheckout(t, st, tn, "", order("16002", 1300))
	openCashier(t, res.PayURL)
	simFault(t, "/notifications", map[string]any{"drop_next": 1000})
	simPay(t, res.PaymentNo)
	r := do(t, http.MethodPost, st.apiURL+"/v1/payments/"+res.PaymentNo+"/cancel", tn.auth(), nil)
	var prob struct {
		Code    string          `json:"code"`
		Payment payment.Payment `json:"payment"`
	}
	r.json(t, &prob)
	if r.status != http.StatusConflict || prob.Code != payment.EORDERPAID || prob.Payment.Status != payment.StatusPaid {
		t.Fatalf("cancel of a paid trade: HTTP %d %s", r.status, r.body)
	}
	final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, "16002"), 30*time.Second)
	if final.Status != payment.StatusPaid || count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo) != 1 {
		t.Fatalf("final %+v", final)
	}
}

func TestMerchantEventFeedAndRedelivery(t *testing.T) {
	st := shared(t)
	tn, other := newTenant(t), newTenant(t)
	res := mustCheckout(t, st, tn, "", order("16003", 1400))
	openCashier(t, res.PayURL)
	simPay(t, res.PaymentNo)
	waitStatus(t, res.PaymentNo, payment.StatusPaid, 30*time.Second)
	eventID := "evt_" + res.PaymentNo + "_paid"
	deadline := time.Now().Add(30 * time.Second)
	var evs []feedEvent
	for {
		evs = st.events(t, tn)
		if len(evs) == 1 && evs[0].Delivery.State == "delivered" || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(evs) != 1 || evs[0].EventID != eventID || evs[0].Type != payment.EventPaymentPaid || evs[0].Delivery.State != "delivered" {
		t.Fatalf("feed: %+v", evs)
	}
	if got := st.events(t, other); len(got) != 0 {
		t.Fatalf("another tenant's feed shows %+v", got)
	}
	url := st.apiURL + "/v1/events/" + eventID + "/redeliver"
	if r := do(t, http.MethodPost, url, other.auth(), nil); r.status != http.StatusNotFound {
		t.Fatalf("another tenant's redeliver: HTTP %d %s", r.status, r.body)
	}
	r := do(t, http.MethodPost, url, tn.auth(), nil)
	var out struct {
		Delivered bool      `json:"delivered"`
		Event     feedEvent `json:"event"`
	}
	r.json(t, &out)
	if r.status != http.StatusOK || !out.Delivered || out.Event.Delivery.State != "delivered" {
		t.Fatalf("redeliver: HTTP %d %s", r.status, r.body)
	}
	var got []webhook
	for _, w := range env.merchant.received(tn.id) {
		if w.eventID == eventID {
			got = append(got, w)
		}
	}
	if len(got) != 2 || !got[0].verified || !got[1].verified || string(got[0].body) != string(got[1].body) {
		t.Fatalf("merchant received %d copies of %s (want 2, both verified, same body)", len(got), eventID)
	}
	var body map[string]any
	_ = json.Unmarshal(got[1].body, &body)
	t.Logf("feed showed %s delivered; redelivered on request, the merchant got it again (same event id, fresh signature)", eventID)
}

// A cancel racing the buyer's payment, with ten cancels at once: whichever wins, the
// outcome is one of the two legal ones. Either the payment is CLOSED, every cancel
// answers 200 and Alipay's trade is closed with no money taken, or the payment is PAID
// with its grant and every cancel answers 409 order_already_paid. Never CLOSED with the
// money at Alipay.
func TestMerchantCancelRacesThePayer(t *testing.T) {
	st := shared(t)
	tn := newTenant(t)
	for i := range 3 {
		orderID := "1610" + string(rune('0'+i))
		res := mustCheckout(t, st, tn, "", order(orderID, 1500))
		openCashier(t, res.PayURL)
		statuses := make([]int, 10)
		var paid response
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(time.Duration(i*i) * 40 * time.Millisecond) // 0, 40ms, 160ms: let either side win
			paid = do(t, http.MethodPost, env.simURL+"/_sim/trades/"+res.PaymentNo+"/pay",
				map[string]string{"Content-Type": "application/json"}, []byte(`{}`))
		})
		for k := range statuses {
			wg.Go(func() {
				statuses[k] = do(t, http.MethodPost, st.apiURL+"/v1/payments/"+res.PaymentNo+"/cancel", tn.auth(), nil).status
			})
		}
		wg.Wait()
		final := waitWorkflowClosed(t, payment.WorkflowID(tn.id, orderID), 60*time.Second)
		trade := string(do(t, http.MethodGet, env.simURL+"/_sim/trades/"+res.PaymentNo, nil, nil).body)
		switch final.Status {
		case payment.StatusClosed:
			if paid.status == http.StatusOK || !strings.Contains(trade, `"TRADE_CLOSED"`) {
				t.Fatalf("order %s CLOSED but the buyer's payment answered %d; trade %s", orderID, paid.status, trade)
			}
			for _, s := range statuses {
				if s != http.StatusOK {
					t.Fatalf("order %s CLOSED but a cancel answered %d (all: %v)", orderID, s, statuses)
				}
			}
		case payment.StatusPaid:
			if count(t, "SELECT COUNT(*) FROM benefit_grants WHERE payment_no = ?", res.PaymentNo) != 1 {
				t.Fatalf("order %s PAID without its grant", orderID)
			}
			for _, s := range statuses {
				if s != http.StatusConflict && s != http.StatusOK {
					t.Fatalf("order %s PAID, a cancel answered %d (all: %v)", orderID, s, statuses)
				}
				if s == http.StatusOK {
					// Only a cancel answered before the payment could see CLOSED, and the
					// payment never was: a 200 here would be a lie.
					t.Fatalf("order %s PAID but a cancel answered 200 (all: %v)", orderID, statuses)
				}
			}
		default:
			t.Fatalf("order %s ended %s", orderID, final.Status)
		}
		t.Logf("order %s: cancel ×10 racing the buyer: %s (buyer's pay answered %d; cancels %v)", orderID, final.Status, paid.status, statuses)
	}
}
