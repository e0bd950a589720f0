package devstack

import (
	"fmt"
	"io"
)

// Walkthrough is what `paykit dev` prints once everything runs: where each piece
// listens, and the steps of a first payment.
type Walkthrough struct {
	API, Admin, Sim string // URLs; Admin is the API's operational endpoints
	// WechatSim is the WeChat Pay simulator's URL; empty when dev runs none (the user's
	// own WeChat Pay merchant is configured).
	WechatSim      string
	Merchant, Shop string // addresses
	UIPort         int
	APIKey         string // the demo tenant's
}

// Print prints the walk-through to out.
func (w Walkthrough) Print(out io.Writer) {
	fmt.Fprintf(out, `
================================================================================
 paykit is running
   API                  %[1]s
   API admin            %[7]s            (%[7]s/readyz, /metrics, /debug/pprof/)
   Temporal Web UI      http://127.0.0.1:%[2]d
   Alipay simulator     %[3]s/gateway.do   (control API: %[3]s/_sim/trades)
   Demo merchant hooks  http://%[4]s/webhooks   (verified webhooks are logged here)
   Demo merchant return http://%[4]s/return     (verifies the cashier's signed return)
   Demo tenant API key  %[5]s
   Demo shop            http://%[6]s   (a product, a Pay button, the result page)

 Walk-through (copy and paste):

 1. Create a payment (repeat it: same Idempotency-Key, same answer):
    curl -s -X POST %[1]s/v1/payments \
      -H 'Authorization: Bearer %[5]s' -H 'Content-Type: application/json' \
      -H 'Idempotency-Key: demo-order-1001-try-1' \
      -d '{"order_id":"1001","amount_fen":990,"subject":"Coffee beans","return_url":"http://%[4]s/return"}'
    ("method":"wap" for a phone's browser, "qr", or "app" for an order string.)

 2. Open the "pay_url" from the answer in a browser and press Pay: the cashier sends
    you back to the demo merchant, which verifies Alipay's signed return. Or from the
    shell, open the cashier once as the browser would, then pay:
      curl -s "<pay_url>" > /dev/null
      curl -s -X POST %[3]s/_sim/trades/<payment_no>/pay
    For "method":"app", pay the "order_string" as the Alipay app would:
      curl -s -X POST %[3]s/_sim/app/pay -d '{"order_string":"<order_string>"}'

 3. Watch it complete: Temporal UI → Workflows → payment:demo:1001, or filter with
    PaymentStatus="PAID"; then
    curl -s %[1]s/v1/orders/1001/payments -H 'Authorization: Bearer %[5]s'

 4. Follow it as one trace, from the checkout to the webhook (spans of this run):
    go run ./cmd/paykit trace -file .dev/traces.jsonl -tenant demo -order 1001
================================================================================
`, w.API, w.UIPort, w.Sim, w.Merchant, w.APIKey, w.Shop, w.Admin)
	if w.WechatSim == "" {
		return
	}
	fmt.Fprintf(out, `
 WeChat Pay simulator   %[2]s   (control API: %[2]s/_sim/orders)

 5. Pay with WeChat Pay instead: a wechat_native checkout answers WeChat Pay's
    code_url as "qr_code"; the buyer pays the order at the simulator:
    curl -s -X POST %[1]s/v1/payments \
      -H 'Authorization: Bearer %[3]s' -H 'Content-Type: application/json' \
      -H 'Idempotency-Key: demo-order-1002-try-1' \
      -d '{"order_id":"1002","amount_fen":1290,"subject":"Tea","method":"wechat_native"}'
    curl -s -X POST %[2]s/_sim/orders/<payment_no>/pay -d '{}'
================================================================================
`, w.API, w.WechatSim, w.APIKey)
}
