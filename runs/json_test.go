package runs

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTimingJSONIsReadableAndAcceptsOldHistories(t *testing.T) {
	b, err := json.Marshal(DefaultTiming())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"payment_ttl":"15m0s"`) {
		t.Fatalf("not readable: %s", b)
	}
	var back Timing
	if err := json.Unmarshal(b, &back); err != nil || back != DefaultTiming() {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	old := `{"payment_ttl":900000000000,"reconcile_interval":60000000000,"webhook_initial_interval":1000000000,"webhook_max_interval":300000000000,"webhook_max_attempts":20}`
	if err := json.Unmarshal([]byte(old), &back); err != nil || back != DefaultTiming() {
		t.Fatalf("old format: %+v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"payment_ttl":"soon"}`), &back); err == nil {
		t.Fatal("bad duration accepted")
	}
}
