package api_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
)

// postToken posts /v1/checkout-tokens with key and returns the answer and its body.
func postToken(tb testing.TB, srv *httptest.Server, key string) (*http.Response, string) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/checkout-tokens", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// metricsOf reads /metrics from an API's admin listener.
func metricsOf(tb testing.TB, srv *httptest.Server) string {
	tb.Helper()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func isRateLimited(resp *http.Response, body string) bool {
	return resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "" &&
		resp.Header.Get("Content-Type") == "application/problem+json" && strings.Contains(body, `"code":"rate_limited"`)
}

// TestTenantRateLimitIsSharedAndPerTenant: two API processes on one Redis draw on one
// limit per tenant: the tenant over it gets 429 with Retry-After from either, counted by
// tenant and route, while another tenant is unaffected.
func TestTenantRateLimitIsSharedAndPerTenant(t *testing.T) {
	s := newSharedStack(t)
	const k1, k2 = "sk_tenant_one_0123456789", "sk_tenant_two_0123456789"
	s.tenant(t, "t1", k1)
	s.tenant(t, "t2", k2)
	cfg := api.Config{Limits: api.Limits{CheckoutTokens: 2}} // bursts of 2, one more every 500 ms
	a, aAdmin := s.servers(t, cfg, nil)
	b := s.server(t, cfg, nil)
	for i, srv := range []*httptest.Server{a, b} {
		if resp, body := postToken(t, srv, k1); resp.StatusCode != http.StatusCreated {
			t.Fatalf("token %d: HTTP %d %s", i+1, resp.StatusCode, body)
		}
	}
	resp, body := postToken(t, a, k1)
	if !isRateLimited(resp, body) {
		t.Fatalf("over the limit: HTTP %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, body := postToken(t, b, k2); resp.StatusCode != http.StatusCreated {
		t.Fatalf("another tenant: HTTP %d %s", resp.StatusCode, body)
	}
	if m := metricsOf(t, aAdmin); !strings.Contains(m, `paykit_rate_limited_total{route="checkout_tokens",tenant="t1"} 1`) {
		t.Fatalf("paykit_rate_limited_total does not count the refusal:\n%s", m)
	}
	time.Sleep(600 * time.Millisecond)
	if resp, body := postToken(t, b, k1); resp.StatusCode != http.StatusCreated {
		t.Fatalf("after the refill: HTTP %d %s", resp.StatusCode, body)
	}
}

// TestOpenCheckoutTokensAreBounded: a tenant holding its bound of unspent checkout
// tokens gets 429 for the next; another tenant does not.
func TestOpenCheckoutTokensAreBounded(t *testing.T) {
	s := newSharedStack(t)
	const k1, k2 = "sk_tenant_one_0123456789", "sk_tenant_two_0123456789"
	s.tenant(t, "t1", k1)
	s.tenant(t, "t2", k2)
	srv := s.server(t, api.Config{Limits: api.Limits{MaxOpenCheckoutTokens: 2}}, nil)
	for i := range 2 {
		if resp, body := postToken(t, srv, k1); resp.StatusCode != http.StatusCreated {
			t.Fatalf("token %d: HTTP %d %s", i+1, resp.StatusCode, body)
		}
	}
	if resp, body := postToken(t, srv, k1); !isRateLimited(resp, body) {
		t.Fatalf("over the bound: HTTP %d %s", resp.StatusCode, body)
	}
	if resp, body := postToken(t, srv, k2); resp.StatusCode != http.StatusCreated {
		t.Fatalf("another tenant: HTTP %d %s", resp.StatusCode, body)
	}
}

// downLimiter is a cache whose limiter fails, as Redis down does.
type downLimiter struct{ *fakeCache }

func (downLimiter) Allow(context.Context, string, string, float64, int) (bool, time.Duration, error) {
	return false, 0, errors.New("dial tcp 127.0.0.1:6379: connection refused")
}

// TestRateLimiterFailsOpen: with the limiter down, limited requests go through, counted.
func TestRateLimiterFailsOpen(t *testing.T) {
	srv, admin, _, _ := newServers(t, serverOptions{cfg: api.Config{Limits: api.Limits{CheckoutTokens: 1}}, cache: downLimiter{newFakeCache()}})
	for i := range 3 {
		if resp, body := postToken(t, srv, key); resp.StatusCode != http.StatusCreated {
			t.Fatalf("token %d: HTTP %d %s", i+1, resp.StatusCode, body)
		}
	}
	if m := metricsOf(t, admin); !strings.Contains(m, `paykit_rate_limiter_errors_total{route="checkout_tokens"} 3`) {
		t.Fatalf("paykit_rate_limiter_errors_total does not count the requests let through:\n%s", m)
	}
}

// TestCancelsAreLimitedPerTenant: a cancel holds a Temporal call for up to CancelWait, so
// a tenant's cancels have a limit of their own: past it, 429 with Retry-After, before the
// payment is looked up; another tenant is unaffected.
func TestCancelsAreLimitedPerTenant(t *testing.T) {
	s := newSharedStack(t)
	const k1, k2 = "sk_tenant_one_0123456789", "sk_tenant_two_0123456789"
	s.tenant(t, "t1", k1)
	s.tenant(t, "t2", k2)
	srv := s.server(t, api.Config{Limits: api.Limits{Cancels: 1}}, nil) // bursts of 1
	cancelOf := func(key string) (*http.Response, string) {
		return post(t, srv.URL+"/v1/payments/P00000000000000000001/cancel", `{}`,
			map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"})
	}
	if resp, body := cancelOf(k1); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("first cancel of an unknown payment: HTTP %d %s, want 404", resp.StatusCode, body)
	}
	if resp, body := cancelOf(k1); !isRateLimited(resp, body) {
		t.Fatalf("second cancel at once, over a limit of 1 a second: HTTP %d %s, want 429", resp.StatusCode, body)
	}
	if resp, body := cancelOf(k2); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another tenant: HTTP %d %s, want 404", resp.StatusCode, body)
	}
}
