package api_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestReadyzHidesErrorText: /readyz is public, so it names the components and their
// state only; what the drivers said goes to the log.
func TestReadyzHidesErrorText(t *testing.T) {
	var logs logBuffer
	cache := newFakeCache()
	srv, st, orch := newServerWith(t, serverOptions{cache: cache, logger: logs.logger()})
	st.down = true // "dial tcp 127.0.0.1:3306: connection refused"
	orch.pingErr = errors.New("rpc error: code = Unavailable desc = connection error: dial tcp 10.0.0.7:7233: i/o timeout")
	cache.pingErr = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("HTTP %d %s", resp.StatusCode, b)
	var got struct {
		Ready  bool              `json:"ready"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"mysql": "down", "temporal": "down", "redis": "degraded"}
	if resp.StatusCode != http.StatusServiceUnavailable || got.Ready || len(got.Checks) != len(want) {
		t.Fatalf("HTTP %d %s", resp.StatusCode, b)
	}
	for k, v := range want {
		if got.Checks[k] != v {
			t.Errorf("%s = %q, want %q", k, got.Checks[k], v)
		}
	}
	for _, leak := range []string{"dial", "tcp", "3306", "7233", "6379", "10.0.0.7", "refused", "rpc error"} {
		if strings.Contains(string(b), leak) {
			t.Errorf("readyz shows %q", leak)
		}
	}
	for _, logged := range []string{"127.0.0.1:3306: connection refused", "10.0.0.7:7233: i/o timeout", "127.0.0.1:6379"} {
		if !strings.Contains(logs.String(), logged) {
			t.Errorf("the log lacks %q:\n%s", logged, logs.String())
		}
	}
}
