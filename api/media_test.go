package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestJSONBodiesNeedAJSONContentType: a body under /v1 is read as JSON only when it is
// declared as JSON; anything else is 415, before the Idempotency-Key is recorded.
func TestJSONBodiesNeedAJSONContentType(t *testing.T) {
	payment := `{"order_id":"o1","amount_fen":990,"subject":"s"}`
	tests := []struct {
		name, path, contentType, body string
		want                          int
	}{
		{"json", "/v1/payments", "application/json", payment, 201},
		{"json with charset", "/v1/payments", "application/json; charset=utf-8", payment, 201},
		{"json, charset in capitals", "/v1/payments", "Application/JSON;charset=UTF-8", payment, 201},
		{"a +json type", "/v1/payments", "application/vnd.merchant+json", payment, 201},
		{"text/plain", "/v1/payments", "text/plain", payment, 415},
		{"text/plain with charset", "/v1/payments", "text/plain; charset=utf-8", payment, 415},
		{"a form (curl -d's default)", "/v1/payments", "application/x-www-form-urlencoded", payment, 415},
		{"no content type", "/v1/payments", "", payment, 415},
		{"json in another charset", "/v1/payments", "application/json; charset=iso-8859-1", payment, 415},
		{"not quite json", "/v1/payments", "application/jsonp", payment, 415},
		{"malformed", "/v1/payments", "application/json; charset", payment, 415},
		{"empty payment body: the handler's 400", "/v1/payments", "", "", 400},
		{"token, json", "/v1/checkout-tokens", "application/json", `{"order_id":"o1"}`, 503},
		{"token, text/plain", "/v1/checkout-tokens", "text/plain", `{"order_id":"o1"}`, 415},
		{"token, no content type", "/v1/checkout-tokens", "", `{"order_id":"o1"}`, 415},
		{"token, empty body without a content type", "/v1/checkout-tokens", "", "", 503},
	}
	srv, _, _ := newServer(t) // no Redis: a token request that gets past the body answers 503
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"Authorization": "Bearer " + key}
			if tc.contentType != "" {
				h["Content-Type"] = tc.contentType
			}
			resp, b := post(t, srv.URL+tc.path, tc.body, h)
			if resp.StatusCode != tc.want {
				t.Fatalf("HTTP %d %s, want %d", resp.StatusCode, b, tc.want)
			}
			if tc.want == 415 && (resp.Header.Get("Content-Type") != "application/problem+json" ||
				!strings.Contains(b, `"code":"unsupported_media_type"`)) {
				t.Fatalf("415 as %s: %s", resp.Header.Get("Content-Type"), b)
			}
		})
	}
}

// TestUnsupportedMediaTypeIsNotStoredForTheKey: the client fixes its Content-Type and
// retries with the same Idempotency-Key; the retry runs instead of replaying the 415.
func TestUnsupportedMediaTypeIsNotStoredForTheKey(t *testing.T) {
	srv, _, _ := newServer(t)
	body := `{"order_id":"o1","amount_fen":990,"subject":"s"}`
	h := map[string]string{"Authorization": "Bearer " + key, "Idempotency-Key": "unit-media-key-1", "Content-Type": "text/plain"}
	if resp, b := post(t, srv.URL+"/v1/payments", body, h); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain: HTTP %d %s", resp.StatusCode, b)
	}
	h["Content-Type"] = "application/json"
	if resp, b := post(t, srv.URL+"/v1/payments", body, h); resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("fixed retry: HTTP %d %s", resp.StatusCode, b)
	}
}
