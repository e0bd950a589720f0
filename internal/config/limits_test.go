package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/internal/config"
)

// TestLoadConfig_Limits: the per-tenant limits default above the load test's ~100
// checkouts a second for one tenant, with a burst above its 512 concurrent checkouts, are
// set from the environment (0: none), and refuse what is not a count.
func TestLoadConfig_Limits(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		want     api.Limits
		wantAuth int
		wantErr  string
	}{
		{"defaults", nil, api.DefaultLimits(), api.DefaultAuthFailuresPerMinute, ""},
		{"set", map[string]string{
			"PAYKIT_RATE_CHECKOUT_TOKENS": "5", "PAYKIT_RATE_CHECKOUTS": "0", "PAYKIT_RATE_REFUNDS": "7",
			"PAYKIT_RATE_REDELIVERIES": "1", "PAYKIT_MAX_OPEN_CHECKOUT_TOKENS": "100", "PAYKIT_AUTH_FAILURES_PER_MINUTE": "0",
			"PAYKIT_RATE_BURST": "2s", "PAYKIT_RATE_CANCELS": "3",
		}, api.Limits{CheckoutTokens: 5, Checkouts: 0, Refunds: 7, Redeliveries: 1, Cancels: 3, Burst: 2 * time.Second, MaxOpenCheckoutTokens: 100}, 0, ""},
		{"not a count", map[string]string{"PAYKIT_RATE_CHECKOUTS": "-1"}, api.Limits{}, 0, "PAYKIT_RATE_CHECKOUTS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Load(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || c.Limits != tc.want || c.AuthFailuresPerMinute != tc.wantAuth {
				t.Fatalf("limits %+v, auth failures %d (%v); want %+v, %d", c.Limits, c.AuthFailuresPerMinute, err, tc.want, tc.wantAuth)
			}
		})
	}
	if d := api.DefaultLimits(); d.Checkouts <= 100 || d.CheckoutTokens <= 100 || d.Checkouts*d.Burst.Seconds() < 512 {
		t.Fatalf("default limits %+v would slow the load test's 100 checkouts a second", d)
	}
}

// TestLoadConfig_TrustedProxies: PAYKIT_TRUSTED_PROXIES is a comma-separated list of
// networks, none by default; what is not a network, or is every address, fails loading
// with an error naming the variable.
func TestLoadConfig_TrustedProxies(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    []string
		wantErr string
	}{
		{"unset", "", nil, ""},
		{"networks", "10.0.0.0/8, 192.168.1.7/32,fd00::/8", []string{"10.0.0.0/8", "192.168.1.7/32", "fd00::/8"}, ""},
		{"an address without its length", "10.0.0.5", nil, `PAYKIT_TRUSTED_PROXIES: "10.0.0.5" is not a CIDR`},
		{"not an address", "10.0.0.0/8,balancer", nil, `PAYKIT_TRUSTED_PROXIES: "balancer" is not a CIDR`},
		{"every address", "0.0.0.0/0", nil, "PAYKIT_TRUSTED_PROXIES: 0.0.0.0/0 trusts every peer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Load(func(k string) (string, bool) {
				if k == "PAYKIT_TRUSTED_PROXIES" {
					return tc.value, true
				}
				return "", false
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %s", err, tc.wantErr)
				}
				return
			}
			var got []string
			for _, n := range c.TrustedProxies {
				got = append(got, n.String())
			}
			if err != nil || strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("trusted proxies %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}
