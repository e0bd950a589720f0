package workflows

import (
	"encoding/json"
	"fmt"
	"time"
)

// jsonDuration shows durations as "15m0s" in workflow inputs, which operators read in the
// Temporal UI, and still accepts the nanosecond numbers of older histories.
type jsonDuration time.Duration

func (d jsonDuration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = jsonDuration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration must be a string like \"15m\" or nanoseconds: %s", b)
	}
	*d = jsonDuration(n)
	return nil
}

type timingJSON struct {
	PaymentTTL             jsonDuration `json:"payment_ttl"`
	ReconcileInterval      jsonDuration `json:"reconcile_interval"`
	WebhookInitialInterval jsonDuration `json:"webhook_initial_interval"`
	WebhookMaxInterval     jsonDuration `json:"webhook_max_interval"`
	WebhookMaxAttempts     int32        `json:"webhook_max_attempts"`
}

// MarshalJSON writes durations in Go's readable form.
func (t Timing) MarshalJSON() ([]byte, error) {
	return json.Marshal(timingJSON{
		PaymentTTL: jsonDuration(t.PaymentTTL), ReconcileInterval: jsonDuration(t.ReconcileInterval),
		WebhookInitialInterval: jsonDuration(t.WebhookInitialInterval), WebhookMaxInterval: jsonDuration(t.WebhookMaxInterval),
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

type sweepInputJSON struct {
	StaleAfter    jsonDuration `json:"stale_after"`
	Limit         int          `json:"limit"`
	GrantGrace    jsonDuration `json:"grant_grace"`
	GrantLookback jsonDuration `json:"grant_lookback"`
}

// MarshalJSON writes durations in Go's readable form.
func (in SweepInput) MarshalJSON() ([]byte, error) {
	return json.Marshal(sweepInputJSON{
		StaleAfter: jsonDuration(in.StaleAfter), Limit: in.Limit,
		GrantGrace: jsonDuration(in.GrantGrace), GrantLookback: jsonDuration(in.GrantLookback),
	})
}

// UnmarshalJSON reads durations as strings or as nanoseconds; a field that is missing
// (an input scheduled before it existed) is zero.
func (in *SweepInput) UnmarshalJSON(b []byte) error {
	var v sweepInputJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*in = SweepInput{
		StaleAfter: time.Duration(v.StaleAfter), Limit: v.Limit,
		GrantGrace: time.Duration(v.GrantGrace), GrantLookback: time.Duration(v.GrantLookback),
	}
	return nil
}
