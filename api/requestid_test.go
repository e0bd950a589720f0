package api_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/paykit/paykit/api"
)

// TestRequestIDIsPaykits: a request id is answered in X-Request-Id, in the problem body
// and in the log line of every request. A caller's id is kept only if it is short and
// safe; any other (200 KB, a space, a quote, a non-ASCII letter) is replaced by one
// paykit generates, and never echoed or logged.
func TestRequestIDIsPaykits(t *testing.T) {
	var logs logBuffer
	srv, _, _ := newServerWith(t, serverOptions{cfg: api.Config{BodyLimit: "1K"}, logger: logs.logger()})
	generated := regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)
	huge := strings.Repeat("A", 200<<10)
	tests := []struct {
		name, sent string
		keep       bool
	}{
		{"none", "", false},
		{"short and safe", "req-2026.12.03:0001_x", true},
		{"64 bytes", strings.Repeat("a", 64), true},
		{"65 bytes", strings.Repeat("a", 65), false},
		{"200 KB", huge, false},
		{"a space", "a b", false},
		{"a quote", `a"b`, false},
		{"not ASCII", "订单", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"Authorization": "Bearer nope"}
			if tc.sent != "" {
				h["X-Request-Id"] = tc.sent
			}
			resp, b := post(t, srv.URL+"/v1/payments", `{}`, h)
			got := resp.Header.Get("X-Request-Id")
			if !generated.MatchString(got) || !strings.Contains(b, `"request_id":"`+got+`"`) {
				t.Fatalf("X-Request-Id %.80q, body %.200s", got, b)
			}
			if tc.keep != (got == tc.sent) {
				t.Fatalf("sent %.80q, answered %.80q; keep = %v", tc.sent, got, tc.keep)
			}
			if !strings.Contains(logs.String(), "request_id="+got) {
				t.Fatalf("no log line with request_id=%s", got)
			}
		})
	}
	if len(logs.String()) > 64<<10 || strings.Contains(logs.String(), huge[:1024]) {
		t.Fatalf("the caller's 200 KB id reached the log (%d bytes)", len(logs.String()))
	}
}
