package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestAmbiguousBodiesAreRefused: every JSON body the API reads must mean one thing. A
// key that is not exactly a field's name (another case included), a key given twice, a
// value followed by anything but whitespace, and bytes that are not UTF-8 are each 400
// invalid, with the offending key named, on every endpoint that takes a body.
func TestAmbiguousBodiesAreRefused(t *testing.T) {
	srv, _, orch := newServer(t)
	const pay = `"order_id":"o-amb","amount_fen":1,"subject":"s"`
	tests := []struct {
		name, path, body, want string
	}{
		{"checkout: a key in another case", "/v1/payments", `{` + pay + `,"AMOUNT_FEN":100000}`, "AMOUNT_FEN"},
		{"checkout: only the other case", "/v1/payments", `{"order_id":"o-amb","Amount_Fen":1,"subject":"s"}`, "Amount_Fen"},
		{"checkout: a key twice", "/v1/payments", `{` + pay + `,"amount_fen":100000}`, "amount_fen"},
		{"checkout: an unknown field", "/v1/payments", `{` + pay + `,"amount":1}`, "amount"},
		{"checkout: trailing closers", "/v1/payments", `{` + pay + `}]]}}garbage`, "after the JSON object"},
		{"checkout: a second object", "/v1/payments", `{` + pay + `}{"amount_fen":100000}`, "after the JSON object"},
		{"checkout: not an object", "/v1/payments", `[{` + pay + `}]`, "JSON object"},
		{"checkout: not UTF-8", "/v1/payments", `{"order_id":"o-amb","amount_fen":1,"subject":"s` + "\xff" + `"}`, "UTF-8"},
		{"refund: a key in another case", "/v1/payments/P1/refunds", `{"amount_fen":1,"refund_no":"r1","Amount_fen":2}`, "Amount_fen"},
		{"refund: a key twice", "/v1/payments/P1/refunds", `{"amount_fen":1,"refund_no":"r1","refund_no":"r2"}`, "refund_no"},
		{"refund: trailing closers", "/v1/payments/P1/refunds", `{"amount_fen":1,"refund_no":"r1"}]`, "after the JSON object"},
		{"cancel: trailing closers", "/v1/payments/P1/cancel", `{}}`, "after the JSON object"},
		{"cancel: a field", "/v1/payments/P1/cancel", `{"reason":"x"}`, "reason"},
		{"checkout token: a key twice", "/v1/checkout-tokens", `{"order_id":"a","order_id":"b"}`, "order_id"},
		{"checkout token: a key in another case", "/v1/checkout-tokens", `{"ORDER_ID":"a"}`, "ORDER_ID"},
		{"redeliver: a body", "/v1/events/e1/redeliver", `{"now":true}`, "now"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := post(t, srv.URL+tc.path, tc.body, authJSON)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" ||
				!strings.Contains(b, `"code":"invalid"`) || !strings.Contains(b, tc.want) {
				t.Fatalf("HTTP %d %s %s; want 400 invalid naming %q", resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.want)
			}
		})
	}
	t.Run("a long unknown key is not echoed whole", func(t *testing.T) {
		long := strings.Repeat("k", 800)
		resp, b := post(t, srv.URL+"/v1/payments", `{`+pay+`,"`+long+`":1}`, authJSON)
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(b, long) || !strings.Contains(b, long[:64]) {
			t.Fatalf("HTTP %d %s", resp.StatusCode, b)
		}
	})
	if orch.checkouts != 0 || orch.cancels != 0 || orch.refundStarts != 0 || orch.redeliveries != 0 {
		t.Fatalf("an ambiguous body reached the orchestrator: %+v", orch)
	}
}
