// Command go-merchant is a merchant backend on paykit, about a page: it creates a
// payment with an Idempotency-Key, sends the buyer to pay_url, receives the webhook and
// verifies it with the official Standard Webhooks library, fulfils each order once
// (deduping on webhook-id, the event id), and refunds.
//
//	PAYKIT_URL=http://127.0.0.1:8080 PAYKIT_API_KEY=sk_... PAYKIT_WEBHOOK_SECRET=whsec_... go run .
//
// POST /buy?order=ID&amount_fen=N answers 303 to pay_url; POST /refund?order=ID refunds
// it in full; GET /orders/ID shows what happened. An order's state lives in memory here;
// keep it in your database, and record the event id in the transaction that fulfils.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sync"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

type order struct {
	PaymentNo  string   `json:"payment_no"`
	AmountFen  int64    `json:"amount_fen"`
	Fulfilled  int      `json:"fulfilled"` // how many times it was fulfilled: 1 at most
	Refunded   bool     `json:"refunded"`
	EventsSeen []string `json:"events_seen"`
}

type shop struct {
	paykit, apiKey string
	wh             *standardwebhooks.Webhook
	mu             sync.Mutex
	orders         map[string]*order
	seen           map[string]bool // webhook-ids handled
}

// call POSTs body to paykit with the API key; key is the Idempotency-Key, the same on every
// retry of one logical request, so a retry after a timeout never makes a second payment.
func (s *shop) call(path, key string, body, out any) error {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, s.paykit+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+s.apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("paykit %s: HTTP %d %s", path, resp.StatusCode, msg) // application/problem+json
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (s *shop) buy(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("order")
	var amount int64
	fmt.Sscan(r.URL.Query().Get("amount_fen"), &amount)
	var res struct {
		PaymentNo string `json:"payment_no"`
		PayURL    string `json:"pay_url"`
	}
	err := s.call("/v1/payments", "buy-"+id, map[string]any{"order_id": id, "amount_fen": amount, "subject": "Order " + id}, &res)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	s.mu.Lock()
	if s.orders[id] == nil {
		s.orders[id] = &order{PaymentNo: res.PaymentNo, AmountFen: amount}
	}
	s.mu.Unlock()
	http.Redirect(w, r, res.PayURL, http.StatusSeeOther) // the buyer pays at Alipay's cashier
}

func (s *shop) webhook(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || s.wh.Verify(body, r.Header) != nil { // the exact bytes; 5 minutes' tolerance
		http.Error(w, "unverified", http.StatusUnauthorized)
		return
	}
	var ev struct {
		Type    string `json:"type"`
		OrderID string `json:"order_id"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	id := r.Header.Get("webhook-id") // signed: the body's event_id
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[id] { // a retry or a redelivery: already handled
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.seen[id] = true
	if o := s.orders[ev.OrderID]; ev.Type == "payment.paid" && o != nil {
		o.Fulfilled++
		o.EventsSeen = append(o.EventsSeen, id)
	} else if ev.Type == "refund.succeeded" {
		for _, o := range s.orders {
			if o.PaymentNo == paymentNo(body) {
				o.Refunded = true
				o.EventsSeen = append(o.EventsSeen, id)
			}
		}
	}
	w.WriteHeader(http.StatusNoContent) // 2xx once recorded; anything else is retried
}

func paymentNo(body []byte) string {
	var v struct {
		PaymentNo string `json:"payment_no"`
	}
	_ = json.Unmarshal(body, &v)
	return v.PaymentNo
}

func (s *shop) refund(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("order")
	s.mu.Lock()
	o := s.orders[id]
	s.mu.Unlock()
	if o == nil {
		http.NotFound(w, r)
		return
	}
	var res map[string]any
	if err := s.call("/v1/payments/"+o.PaymentNo+"/refunds", "refund-"+id, map[string]any{"amount_fen": o.AmountFen}, &res); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	_ = json.NewEncoder(w).Encode(res)
}

func (s *shop) show(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orders[r.PathValue("id")]
	if o == nil {
		http.NotFound(w, r)
		return
	}
	_ = json.NewEncoder(w).Encode(o)
}

func main() {
	wh, err := standardwebhooks.NewWebhook(os.Getenv("PAYKIT_WEBHOOK_SECRET")) // whsec_...
	if err != nil {
		log.Fatal(err)
	}
	s := &shop{paykit: os.Getenv("PAYKIT_URL"), apiKey: os.Getenv("PAYKIT_API_KEY"), wh: wh,
		orders: map[string]*order{}, seen: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /buy", s.buy)
	mux.HandleFunc("POST /webhooks/paykit", s.webhook)
	mux.HandleFunc("POST /refund", s.refund)
	mux.HandleFunc("GET /orders/{id}", s.show)
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:8081"
	}
	log.Printf("go-merchant on %s", addr)
	log.Fatal(http.ListenAndServe(addr, mux))
}
