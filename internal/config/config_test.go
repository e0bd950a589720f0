package config_test

import (
	"github.com/paykit/paykit/internal/config"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
)

func TestLoadConfig_SweeperSettings(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		wantRetry payment.EventRetry
		wantGrace time.Duration
		wantErr   string
	}{
		{"defaults", nil, payment.DefaultEventRetry(), 2 * time.Minute, ""},
		{"overridden", map[string]string{
			"PAYKIT_WEBHOOK_SWEEP_INITIAL_INTERVAL": "5m", "PAYKIT_WEBHOOK_SWEEP_MAX_INTERVAL": "24h",
			"PAYKIT_WEBHOOK_SWEEP_MAX_ATTEMPTS": "12", "PAYKIT_SWEEP_GRANT_GRACE": "30s",
		}, payment.EventRetry{Base: 5 * time.Minute, Max: 24 * time.Hour, MaxAttempts: 12}, 30 * time.Second, ""},
		{"sweeper backoff shorter than the workflow's", map[string]string{
			"PAYKIT_WEBHOOK_MAX_INTERVAL": "10m", "PAYKIT_WEBHOOK_SWEEP_MAX_INTERVAL": "5m",
		}, payment.EventRetry{}, 0, "PAYKIT_WEBHOOK_SWEEP_INITIAL_INTERVAL"},
		{"not a number", map[string]string{"PAYKIT_WEBHOOK_SWEEP_MAX_ATTEMPTS": "many"}, payment.EventRetry{}, 0,
			"PAYKIT_WEBHOOK_SWEEP_MAX_ATTEMPTS"},
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
			if err != nil || c.EventRetry != tc.wantRetry || c.SweepGrantGrace != tc.wantGrace {
				t.Fatalf("event retry %+v, grant grace %v (%v); want %+v, %v", c.EventRetry, c.SweepGrantGrace, err, tc.wantRetry, tc.wantGrace)
			}
		})
	}
}
