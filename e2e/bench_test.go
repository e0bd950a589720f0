package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/payment"
)

// Benchmarks of the hot paths through the real processes. Run them with
//
//	go test -run '^$' -bench . -benchtime 400x ./e2e
//
// They report throughput and latency percentiles; compare designs side by side in one run.

var (
	benchSeq  atomic.Int64
	benchOnce sync.Once
	benchStk  *stack
	benchErr  error
)

type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return
	}
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	p := func(q float64) float64 { return float64(l.d[int(q*float64(len(l.d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(p(0.50), "p50_ms")
	b.ReportMetric(p(0.99), "p99_ms")
}

func benchStack(b *testing.B) (*stack, tenant) {
	b.Helper()
	benchOnce.Do(func() {
		// Production intervals: the tests' one-second reconciliation would make every
		// pending payment query Alipay each second and measure that instead.
		benchStk, benchErr = startStack("bench", stackOptions{paymentTTL: 15 * time.Minute,
			extraEnv: []string{"PAYKIT_RECONCILE_INTERVAL=1m"}})
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	tn := tenant{id: "bench" + randHex(3), apiKey: "sk_test_" + randHex(16), secret: "whsec_" + randHex(16)}
	if err := env.store.UpsertTenant(b.Context(), payment.Tenant{ID: tn.id, Name: "bench", APIKeyHash: api.HashAPIKey(tn.apiKey),
		NotifyURL: env.merchant.url + "/webhooks/" + tn.id, WebhookSecret: tn.secret, AlipayAppID: appID, AlipaySeller: sellerID}); err != nil {
		b.Fatal(err)
	}
	env.merchant.setSecret(tn.id, tn.secret)
	return benchStk, tn
}

// BenchmarkCheckout measures POST /v1/payments for new orders: authentication, the
// Idempotency-Key reservation, UpdateWithStart, and the two local activities (insert
// under the unique index, page-pay URL) before the answer.
func BenchmarkCheckout(b *testing.B) {
	st, tn := benchStack(b)
	var lat latencies
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("b%d", benchSeq.Add(1))
			start := time.Now()
			r := st.checkout(b, tn, "bench-"+id, order(id, 990))
			if r.status != http.StatusCreated {
				b.Errorf("HTTP %d %s", r.status, r.body)
				return
			}
			lat.add(time.Since(start))
		}
	})
	b.StopTimer()
	lat.report(b)
}

// BenchmarkCheckoutReplay measures a retried checkout answered from the Idempotency-Key
// store (Redis fast path), which must not touch Temporal.
func BenchmarkCheckoutReplay(b *testing.B) {
	st, tn := benchStack(b)
	id := fmt.Sprintf("b%d", benchSeq.Add(1))
	if r := st.checkout(b, tn, "replay-"+id, order(id, 990)); r.status != http.StatusCreated {
		b.Fatalf("HTTP %d %s", r.status, r.body)
	}
	var lat latencies
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			start := time.Now()
			r := st.checkout(b, tn, "replay-"+id, order(id, 990))
			if r.status != http.StatusCreated || r.header.Get("Idempotent-Replayed") != "true" {
				b.Errorf("HTTP %d %s", r.status, r.body)
				return
			}
			lat.add(time.Since(start))
		}
	})
	b.StopTimer()
	lat.report(b)
}

// BenchmarkPaymentEndToEnd measures a whole payment: checkout, the buyer opening the
// cashier and paying, Alipay's signed notification, the signal, the local transaction,
// until MySQL says PAID.
func BenchmarkPaymentEndToEnd(b *testing.B) {
	st, tn := benchStack(b)
	var lat latencies
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("b%d", benchSeq.Add(1))
			start := time.Now()
			r := st.checkout(b, tn, "", order(id, 990))
			if r.status != http.StatusCreated {
				b.Errorf("HTTP %d %s", r.status, r.body)
				return
			}
			var res checkoutResult
			if err := json.Unmarshal(r.body, &res); err != nil {
				b.Error(err)
				return
			}
			if c := do(b, http.MethodGet, res.PayURL, nil, nil); c.status != http.StatusOK {
				b.Errorf("cashier HTTP %d", c.status)
				return
			}
			if p := do(b, http.MethodPost, env.simURL+"/_sim/trades/"+res.PaymentNo+"/pay", nil, []byte(`{}`)); p.status != http.StatusOK {
				b.Errorf("pay HTTP %d %s", p.status, p.body)
				return
			}
			for {
				p, err := env.store.GetPayment(b.Context(), res.PaymentNo)
				if err == nil && p.Status == payment.StatusPaid {
					break
				}
				if time.Since(start) > 30*time.Second {
					b.Errorf("payment %s not paid after 30s", res.PaymentNo)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			lat.add(time.Since(start))
		}
	})
	b.StopTimer()
	lat.report(b)
}
