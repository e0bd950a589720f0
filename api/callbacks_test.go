package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/api"
)

// TestUnverifiedCallbackIsBounded: the callback URL is open to anyone, so a forged
// notification keeps only a prefix of its body, and the rate of them shows in the metrics.
func TestUnverifiedCallbackIsBounded(t *testing.T) {
	srv, admin, st, _ := newServers(t, serverOptions{cfg: api.Config{BodyLimit: "64K"}})
	form := url.Values{"notify_id": {"n1"}, "out_trade_no": {"P1"}, "total_amount": {"9.90"}, "sign": {"forged"},
		"padding": {strings.Repeat("x", 60*1024)}}
	raw := form.Encode()
	resp, b := post(t, srv.URL+"/callbacks/alipay", raw, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if resp.StatusCode != http.StatusOK || b == "success" {
		t.Fatalf("forged notification: HTTP %d %q", resp.StatusCode, b)
	}
	st.Mu.Lock()
	notes := st.notes
	st.Mu.Unlock()
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

	m, err := http.Get(admin.URL + "/metrics")
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
	st.Mu.Lock()
	defer st.Mu.Unlock()
	if len(st.notes) != 0 {
		t.Fatalf("stored %d notifications for bodies refused before verifying", len(st.notes))
	}
}

// 10,000 unverified posts cost a bounded number of rows and error lines: each is counted,
// but only a sample per app_id and per minute is kept. Before, each one was a row (up to
// 2 KiB) and an error line.
func TestTenThousandUnverifiedCallbacksStayBounded(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, admin, st, _ := newServers(t, serverOptions{logger: logger})
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	const n = 10000
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	started := time.Now()
	for i := range n {
		form := url.Values{"notify_id": {fmt.Sprintf("n%d", i)}, "out_trade_no": {"P1"}, "total_amount": {"9.90"},
			"app_id": {fmt.Sprintf("2021%04d", i%50)}, "sign": {"forged"}}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/callbacks/alipay", strings.NewReader(form.Encode()))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "failure" {
			t.Fatalf("post %d answered %q", i, b)
		}
	}
	st.Mu.Lock()
	rows := len(st.notes)
	st.Mu.Unlock()
	lines := strings.Count(logs.String(), "\n")
	// The sample is a token bucket of 100 at once and 100 a minute: a run of the posts
	// that takes longer than a minute (on a loaded machine, under -race) keeps more.
	elapsed := time.Since(started)
	bound := 100 + int(math.Ceil(elapsed.Minutes()*100))
	t.Logf("%d unverified posts in %s: %d rows, %d log lines (bound %d)", n, elapsed.Round(time.Millisecond), rows, lines, bound)
	if rows == 0 || rows > bound {
		t.Errorf("%d rows kept for %d unverified posts in %s, want a bounded sample (at most %d)", rows, n, elapsed, bound)
	}
	// A line per kept post, and one a minute that says posts are being dropped.
	if maxLines := bound + int(math.Ceil(elapsed.Minutes())) + 10; lines > maxLines {
		t.Errorf("%d log lines for %d unverified posts, want a bounded sample (at most %d)", lines, n, maxLines)
	}
	m, err := http.Get(admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Body.Close()
	text, _ := io.ReadAll(m.Body)
	if want := fmt.Sprintf(`paykit_alipay_callbacks_total{outcome="unverified"} %d`, n); !strings.Contains(string(text), want+"\n") {
		t.Errorf("metrics lack %q: every post is still counted", want)
	}
}

// Bodies refused before verifying (repeated parameters, not a form) are counted each, but
// logged only within the same sample as unverified ones.
func TestMalformedCallbacksAreLoggedOnlyInTheSample(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, st, _ := newServerWith(t, serverOptions{logger: logger})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	const n = 1000
	start := time.Now()
	for i := range n {
		body := fmt.Sprintf("notify_id=n%d&notify_id=x&sign=forged", i)
		resp, err := client.Post(srv.URL+"/callbacks/alipay", "application/x-www-form-urlencoded", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// The sample is a token bucket of 100 refilled at 100 a minute: 100 lines at once,
	// and the refill over the time the posts took.
	sample := 100 + int(time.Since(start).Minutes()*100) + 1
	if lines := strings.Count(logs.String(), "\n"); lines > sample {
		t.Errorf("%d log lines for %d malformed posts, want at most the sample (%d)", lines, n, sample)
	}
	st.Mu.Lock()
	defer st.Mu.Unlock()
	if len(st.notes) != 0 {
		t.Errorf("%d rows stored for bodies refused before verifying", len(st.notes))
	}
}
