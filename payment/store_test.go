package payment_test

import (
	"testing"
	"time"

	"github.com/paykit/paykit/payment"
)

func TestEventRetryDelay(t *testing.T) {
	r := payment.EventRetry{Base: time.Minute, Max: 8 * time.Hour, MaxAttempts: 30}
	tests := []struct {
		name     string
		attempts int
		want     time.Duration
	}{
		{"none yet", 0, time.Minute},
		{"first failure", 1, time.Minute},
		{"second", 2, 2 * time.Minute},
		{"ninth", 9, 256 * time.Minute},
		{"tenth is capped", 10, 8 * time.Hour},
		{"after the workflow's 20", 20, 8 * time.Hour},
		{"thousands (no overflow)", 5000, 8 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.Delay(tc.attempts); got != tc.want {
				t.Fatalf("Delay(%d) = %v, want %v", tc.attempts, got, tc.want)
			}
		})
	}
	if got := (payment.EventRetry{MaxAttempts: 5}).WithDefaults(); got.Base != time.Minute || got.Max != 8*time.Hour || got.MaxAttempts != 5 {
		t.Fatalf("WithDefaults kept %+v", got)
	}
}
