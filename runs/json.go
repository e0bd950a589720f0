package runs

import (
	"encoding/json"
	"fmt"
	"time"
)

// JSONDuration shows durations as "15m0s" in workflow inputs, which operators read in the
// Temporal UI, and still accepts the nanosecond numbers of older histories.
type JSONDuration time.Duration

// MarshalJSON writes the duration in Go's readable form.
func (d JSONDuration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string or nanoseconds.
func (d *JSONDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = JSONDuration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration must be a string like \"15m\" or nanoseconds: %s", b)
	}
	*d = JSONDuration(n)
	return nil
}

type timingJSON struct {
	PaymentTTL             JSONDuration `json:"payment_ttl"`
	ReconcileInterval      JSONDuration `json:"reconcile_interval"`
	WebhookInitialInterval JSONDuration `json:"webhook_initial_interval"`
	WebhookMaxInterval     JSONDuration `json:"webhook_max_interval"`
	WebhookMaxAttempts     int32        `json:"webhook_max_attempts"`
}

// MarshalJSON writes durations in Go's readable form.
func (t Timing) MarshalJSON() ([]byte, error) {
	return json.Marshal(timingJSON{
		PaymentTTL: JSONDuration(t.PaymentTTL), ReconcileInterval: JSONDuration(t.ReconcileInterval),
		WebhookInitialInterval: JSONDuration(t.WebhookInitialInterval), WebhookMaxInterval: JSONDuration(t.WebhookMaxInterval),
		WebhookMaxAttempts: t.WebhookMaxAttempts,
	})
}

// UnmarshalJSON reads durations as strings or as nanoseconds.
func (t *Timing) UnmarshalJSON(b []byte) error {
	var v timingJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*t = Timing{
		PaymentTTL: time.Duration(v.PaymentTTL), ReconcileInterval: time.Duration(v.ReconcileInterval),
		WebhookInitialInterval: time.Duration(v.WebhookInitialInterval), WebhookMaxInterval: time.Duration(v.WebhookMaxInterval),
		WebhookMaxAttempts: v.WebhookMaxAttempts,
	}
	return nil
}
