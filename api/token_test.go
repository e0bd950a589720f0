package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/payment"
)

// issueToken asks the server for a checkout token for order.
func issueToken(t *testing.T, url, order string) string {
	t.Helper()
	resp, b := post(t, url+"/v1/checkout-tokens", `{"order_id":"`+order+`"}`,
		map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("checkout token: HTTP %d %s", resp.StatusCode, b)
	}
	var tok struct {
		Token string `json:"checkout_token"`
	}
	if err := json.Unmarshal([]byte(b), &tok); err != nil {
		t.Fatal(err)
	}
	return tok.Token
}

// TestCheckoutTokenSurvivesServerErrors: a checkout that fails with a 5xx (Temporal down,
// a timeout) is retried by the client, and the retry must not find its own token spent:
// a 409 for it would be stored under the Idempotency-Key and replayed for a day.
func TestCheckoutTokenSurvivesServerErrors(t *testing.T) {
	tests := []struct {
		name    string
		idemKey string // "" for a retry without a key
	}{
		{"retry with the same Idempotency-Key", "unit-token-key-1"},
		{"retry without an Idempotency-Key", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, orch := newServerWith(t, serverOptions{cache: newFakeCache()})
			tok := issueToken(t, srv.URL, "o1")
			h := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}
			if tc.idemKey != "" {
				h["Idempotency-Key"] = tc.idemKey
			}
			body := `{"order_id":"o1","amount_fen":990,"subject":"s","checkout_token":"` + tok + `"}`
			orch.errOnce = &payment.Error{Code: payment.EUNAVAILABLE, Message: "temporal unavailable"}
			if resp, b := post(t, srv.URL+"/v1/payments", body, h); resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("first attempt: HTTP %d %s", resp.StatusCode, b)
			}
			resp, b := post(t, srv.URL+"/v1/payments", body, h)
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("retry: HTTP %d %s, want 201", resp.StatusCode, b)
			}
			if tc.idemKey != "" {
				// And the key now replays the success, not a conflict.
				resp, b = post(t, srv.URL+"/v1/payments", body, h)
				if resp.StatusCode != http.StatusCreated || resp.Header.Get(api.ReplayedHeader) != "true" {
					t.Fatalf("replay: HTTP %d %s", resp.StatusCode, b)
				}
			}
		})
	}
}

// TestCheckoutTokenIsOneUse: two different requests (other Idempotency-Keys, or none)
// presenting one token: the second is refused with token_used.
func TestCheckoutTokenIsOneUse(t *testing.T) {
	tests := []struct {
		name          string
		first, second string
	}{
		{"two keys", "unit-token-key-a", "unit-token-key-b"},
		{"key, then no key", "unit-token-key-c", ""},
		{"no key, then a key", "", "unit-token-key-d"},
		{"no key twice", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, _ := newServerWith(t, serverOptions{cache: newFakeCache()})
			tok := issueToken(t, srv.URL, "o1")
			body := `{"order_id":"o1","amount_fen":990,"subject":"s","checkout_token":"` + tok + `"}`
			headers := func(idemKey string) map[string]string {
				h := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}
				if idemKey != "" {
					h["Idempotency-Key"] = idemKey
				}
				return h
			}
			if resp, b := post(t, srv.URL+"/v1/payments", body, headers(tc.first)); resp.StatusCode != http.StatusCreated {
				t.Fatalf("first: HTTP %d %s", resp.StatusCode, b)
			}
			resp, b := post(t, srv.URL+"/v1/payments", body, headers(tc.second))
			if resp.StatusCode != http.StatusConflict || !strings.Contains(b, `"code":"token_used"`) {
				t.Fatalf("second: HTTP %d %s, want 409 token_used", resp.StatusCode, b)
			}
		})
	}
}

// TestCheckoutTokenForAnotherOrder: a token issued for one order is refused for another,
// and stays usable for its own.
func TestCheckoutTokenForAnotherOrder(t *testing.T) {
	srv, _, _ := newServerWith(t, serverOptions{cache: newFakeCache()})
	tok := issueToken(t, srv.URL, "o1")
	h := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}
	other := `{"order_id":"o2","amount_fen":990,"subject":"s","checkout_token":"` + tok + `"}`
	if resp, b := post(t, srv.URL+"/v1/payments", other, h); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("other order: HTTP %d %s, want 422", resp.StatusCode, b)
	}
	own := `{"order_id":"o1","amount_fen":990,"subject":"s","checkout_token":"` + tok + `"}`
	if resp, b := post(t, srv.URL+"/v1/payments", own, h); resp.StatusCode != http.StatusCreated {
		t.Fatalf("own order after a refusal: HTTP %d %s, want 201", resp.StatusCode, b)
	}
}

// TestCheckoutTokenSkippedWhenRedisDown: without Redis the token layer is skipped, and
// the checkout goes on to the layers that hold on their own.
func TestCheckoutTokenSkippedWhenRedisDown(t *testing.T) {
	cache := newFakeCache()
	srv, _, _ := newServerWith(t, serverOptions{cache: cache})
	tok := issueToken(t, srv.URL, "o1")
	cache.mu.Lock()
	cache.down = true
	cache.mu.Unlock()
	h := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}
	body := `{"order_id":"o1","amount_fen":990,"subject":"s","checkout_token":"` + tok + `"}`
	if resp, b := post(t, srv.URL+"/v1/payments", body, h); resp.StatusCode != http.StatusCreated {
		t.Fatalf("redis down: HTTP %d %s, want 201", resp.StatusCode, b)
	}
}
