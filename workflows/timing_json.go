package workflows

import (
	"encoding/json"
	"time"

	"github.com/paykit/paykit/runs"
)

type sweepInputJSON struct {
	StaleAfter    runs.JSONDuration `json:"stale_after"`
	Limit         int               `json:"limit"`
	GrantGrace    runs.JSONDuration `json:"grant_grace"`
	GrantLookback runs.JSONDuration `json:"grant_lookback"`
}

// MarshalJSON writes durations in Go's readable form.
func (in SweepInput) MarshalJSON() ([]byte, error) {
	return json.Marshal(sweepInputJSON{
		StaleAfter: runs.JSONDuration(in.StaleAfter), Limit: in.Limit,
		GrantGrace: runs.JSONDuration(in.GrantGrace), GrantLookback: runs.JSONDuration(in.GrantLookback),
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
