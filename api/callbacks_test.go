package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/paykit/paykit/api"
)

// TestUnverifiedCallbackIsBounded: the callback URL is open to anyone, so a forged
// notification keeps only a prefix of its body, and the rate of them shows in the metrics.
func TestUnverifiedCallbackIsBounded(t *testing.T) {
	srv, st, _ := newServerWith(t, serverOptions{cfg: api.Config{BodyLimit: "64K"}})
	form := url.Values{"notify_id": {"n1"}, "out_trade_no": {"P1"}, "total_amount": {"9.90"}, "sign": {"forged"},
		"padding": {strings.Repeat("x", 60*1024)}}
	raw := form.Encode()
	resp, b := post(t, srv.URL+"/callbacks/alipay", raw, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if resp.StatusCode != http.StatusOK || b == "success" {
		t.Fatalf("forged notification: HTTP %d %q", resp.StatusCode, b)
	}
	st.mu.Lock()
	notes := st.notes
	st.mu.Unlock()
	if len(notes) != 1 || notes[0].Verified {
		t.Fatalf("recorded %d notifications", len(notes))
	}
	n := notes[0]
	t.Logf("%d-byte forged body: %d bytes kept", len(raw), len(n.Raw))
	if len(n.Raw) > 2048 || !strings.HasPrefix(raw, n.Raw) {
		t.Errorf("kept %d bytes of the forged body, want at most 2048", len(n.Raw))
	}
	if sum := sha256.Sum256([]byte(raw)); n.RawSHA256 != hex.EncodeToString(sum[:]) || n.RawLen != len(raw) {
		t.Errorf("raw hash %s length %d, want the whole body's %x and %d", n.RawSHA256, n.RawLen, sum, len(raw))
	}

	m, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Body.Close()
	text, _ := io.ReadAll(m.Body)
	for _, want := range []string{
		`paykit_alipay_callbacks_total{outcome="unverified"} 1`,
		fmt.Sprintf("paykit_alipay_unverified_callback_bytes_total %d", len(raw)),
	} {
		if !strings.Contains(string(text), want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// A body that repeats a parameter is something Alipay never sends: it is answered
// failure before any signature is checked, and nothing is stored.
func TestCallbackWithARepeatedParameterIsRefusedBeforeVerifying(t *testing.T) {
	srv, st, _ := newServerWith(t, serverOptions{})
	for _, raw := range []string{
		"notify_id=%09&notify_id=n1&out_trade_no=P1&total_amount=9.90&sign=x",
		"notify_id=n1&out_trade_no=P1&trade_no=%20&trade_no=2026&sign=x",
		"",
	} {
		resp, b := post(t, srv.URL+"/callbacks/alipay", raw, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		if resp.StatusCode != http.StatusOK || b != "failure" {
			t.Fatalf("%q: HTTP %d %q, want failure", raw, resp.StatusCode, b)
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.notes) != 0 {
		t.Fatalf("stored %d notifications for bodies refused before verifying", len(st.notes))
	}
}
