package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/webhook"
)

func TestVerify(t *testing.T) {
	body := []byte(`{"event_id":"evt_1"}`)
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name   string
		header string
		body   []byte
		secret string
		want   error
	}{
		{name: "fresh", header: webhook.Sign(body, now, "s1"), body: body, secret: "s1"},
		{name: "within tolerance", header: webhook.Sign(body, now.Add(-4*time.Minute), "s1"), body: body, secret: "s1"},
		{name: "replayed with an old timestamp", header: webhook.Sign(body, now.Add(-6*time.Minute), "s1"), body: body, secret: "s1", want: webhook.ErrTooOld},
		{name: "from the future", header: webhook.Sign(body, now.Add(6*time.Minute), "s1"), body: body, secret: "s1", want: webhook.ErrTooOld},
		{name: "tampered body", header: webhook.Sign(body, now, "s1"), body: []byte(`{"event_id":"evt_2"}`), secret: "s1", want: webhook.ErrSignature},
		{name: "other secret", header: webhook.Sign(body, now, "s1"), body: body, secret: "s2", want: webhook.ErrSignature},
		{name: "rotation: new secret", header: webhook.Sign(body, now, "new", "old"), body: body, secret: "new"},
		{name: "rotation: old secret", header: webhook.Sign(body, now, "new", "old"), body: body, secret: "old"},
		{name: "timestamp moved forward", header: strings.Replace(webhook.Sign(body, now.Add(-time.Hour), "s1"),
			"t=1799996400", "t=1800000000", 1), body: body, secret: "s1", want: webhook.ErrSignature},
		{name: "old sha256 format", header: "sha256=00", body: body, secret: "s1", want: webhook.ErrMalformed},
		{name: "no signature", header: "t=1800000000", body: body, secret: "s1", want: webhook.ErrMalformed},
		{name: "empty", header: "", body: body, secret: "s1", want: webhook.ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := webhook.VerifyAt(tc.header, tc.body, tc.secret, webhook.DefaultTolerance, now)
			if !errors.Is(err, tc.want) {
				t.Fatalf("VerifyAt(%q) = %v, want %v", tc.header, err, tc.want)
			}
		})
	}
}

func TestSignCarriesOneV1PerSecret(t *testing.T) {
	h := webhook.Sign([]byte("{}"), time.Unix(1_800_000_000, 0), "new", "", "old")
	if !strings.HasPrefix(h, "t=1800000000,v1=") || strings.Count(h, ",v1=") != 2 {
		t.Fatalf("header %q", h)
	}
}

// The verification examples of docs/integrate/webhooks.md are ExampleStandardSignature
// (the official library on the Standard Webhooks headers) and ExampleVerify (this
// package on Paykit-Signature), word for word, so the code a merchant copies is the code
// this package's tests run.
func TestDocsQuoteTheExample(t *testing.T) {
	page, err := os.ReadFile("../docs/integrate/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range []struct{ file, fn string }{
		{"example_standard_test.go", "func ExampleStandardSignature() {"},
		{"example_test.go", "func ExampleVerify() {"},
	} {
		src, err := os.ReadFile(ex.file)
		if err != nil {
			t.Fatal(err)
		}
		start := strings.Index(string(src), ex.fn)
		if start < 0 {
			t.Fatalf("%s not found in %s", ex.fn, ex.file)
		}
		end := strings.Index(string(src)[start:], "\n}\n")
		if end < 0 {
			t.Fatalf("%s has no end in %s", ex.fn, ex.file)
		}
		example := string(src)[start : start+end+2]
		if !strings.Contains(string(page), "```go\n"+example+"\n```") {
			t.Errorf("docs/integrate/webhooks.md does not quote %s as it is in webhook/%s:\n%s", ex.fn, ex.file, example)
		}
	}
}

// TestVerifyEventDedupesOnTheSignedID: the id to dedupe on is the signed body's; a
// replay under another Paykit-Event-Id, and a body with no event_id, are refused.
func TestVerifyEventDedupesOnTheSignedID(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"event_id":"evt_P1_paid","type":"payment.paid"}`)
	sig := webhook.Sign(body, now, "s1")
	for _, tc := range []struct {
		name, header string
		body         []byte
		sig          string
		wantID       string
		want         error
	}{
		{name: "header matches", header: "evt_P1_paid", body: body, sig: sig, wantID: "evt_P1_paid"},
		{name: "no header", body: body, sig: sig, wantID: "evt_P1_paid"},
		{name: "replayed under a new id", header: "evt_P1_paid_again", body: body, sig: sig, want: webhook.ErrEventID},
		{name: "signed body without an id", body: []byte(`{"type":"payment.paid"}`), sig: webhook.Sign([]byte(`{"type":"payment.paid"}`), now, "s1"), want: webhook.ErrEventID},
		{name: "bad signature first", header: "evt_P1_paid", body: body, sig: webhook.Sign(body, now, "s2"), want: webhook.ErrSignature},
	} {
		id, err := webhook.VerifyEventAt(tc.sig, tc.header, tc.body, "s1", webhook.DefaultTolerance, now)
		if !errors.Is(err, tc.want) || id != tc.wantID {
			t.Errorf("%s: id %q err %v, want %q %v", tc.name, id, err, tc.wantID, tc.want)
		}
	}
}

// A sender never produces a header without a signature: Signature refuses no secret or
// an empty one, where Sign skipped it and returned a bare "t=…". A verifier with an
// empty secret refuses everything, even a header signed with the empty key.
func TestNoSignatureWithoutASecret(t *testing.T) {
	body := []byte(`{"event_id":"evt_1"}`)
	now := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		name    string
		secrets []string
	}{{"none", nil}, {"empty", []string{""}}, {"empty beside one", []string{"s1", ""}}} {
		if h, err := webhook.Signature(body, now, c.secrets...); !errors.Is(err, webhook.ErrNoSecret) || h != "" {
			t.Errorf("%s: Signature = %q, %v; want ErrNoSecret", c.name, h, err)
		}
	}
	h, err := webhook.Signature(body, now, "s1", "s0")
	if err != nil || h != webhook.Sign(body, now, "s1", "s0") {
		t.Fatalf("Signature = %q, %v; want Sign's header", h, err)
	}
	forged := "t=1800000000,v1=" + hmacHex("", "1800000000", body)
	if err := webhook.VerifyAt(forged, body, "", webhook.DefaultTolerance, now); !errors.Is(err, webhook.ErrNoSecret) {
		t.Fatalf("verify with an empty secret: %v, want ErrNoSecret", err)
	}
}

func hmacHex(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}
