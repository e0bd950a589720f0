package webhook_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/paykit/paykit/webhook"
)

// TestStandardSecret: a secret in the whsec_ form is the key its base64 encodes and is
// shown as it is; any other secret (one set before Standard Webhooks, or paykit's
// generated whsec_ and base64url ones) is its own bytes, shown as whsec_ and their base64.
func TestStandardSecret(t *testing.T) {
	key32 := bytes.Repeat([]byte{0xfb}, 32)
	std := "whsec_" + base64.StdEncoding.EncodeToString(key32)
	for _, tc := range []struct {
		name, secret string
		key          []byte
		shown        string
	}{
		{name: "standard form", secret: std, key: key32, shown: std},
		{name: "raw secret", secret: "a-raw-secret-of-at-least-32-bytes!", key: []byte("a-raw-secret-of-at-least-32-bytes!"),
			shown: "whsec_" + base64.StdEncoding.EncodeToString([]byte("a-raw-secret-of-at-least-32-bytes!"))},
		{name: "generated before: whsec_ and base64url", secret: "whsec_" + base64.RawURLEncoding.EncodeToString(key32),
			key:   []byte("whsec_" + base64.RawURLEncoding.EncodeToString(key32)),
			shown: "whsec_" + base64.StdEncoding.EncodeToString([]byte("whsec_"+base64.RawURLEncoding.EncodeToString(key32)))},
		{name: "whsec_ but not base64", secret: "whsec_demo_local_only_0123456789abcdef", key: []byte("whsec_demo_local_only_0123456789abcdef"),
			shown: "whsec_" + base64.StdEncoding.EncodeToString([]byte("whsec_demo_local_only_0123456789abcdef"))},
		{name: "base64 without the prefix", secret: base64.StdEncoding.EncodeToString(key32),
			key: []byte(base64.StdEncoding.EncodeToString(key32)), shown: "whsec_" + base64.StdEncoding.EncodeToString([]byte(base64.StdEncoding.EncodeToString(key32)))},
		{name: "prefix alone", secret: "whsec_", key: []byte("whsec_"), shown: "whsec_" + base64.StdEncoding.EncodeToString([]byte("whsec_"))},
		{name: "empty", secret: "", key: []byte{}, shown: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := webhook.StandardKey(tc.secret); !bytes.Equal(got, tc.key) {
				t.Errorf("StandardKey = %q, want %q", got, tc.key)
			}
			if got := webhook.StandardSecret(tc.secret); got != tc.shown {
				t.Errorf("StandardSecret = %q, want %q", got, tc.shown)
			}
			if tc.shown == "" {
				return
			}
			// The shown form means the same key to the official library, and is a fixed point.
			wh, err := standardwebhooks.NewWebhook(tc.shown)
			if err != nil {
				t.Fatal(err)
			}
			body, now := []byte(`{"event_id":"evt_1"}`), time.Now()
			sig, err := webhook.StandardSignature("evt_1", now, body, tc.secret)
			if err != nil {
				t.Fatal(err)
			}
			if err := wh.Verify(body, standardHeaders("evt_1", now, sig)); err != nil {
				t.Errorf("the library with %q: %v", tc.shown, err)
			}
			if webhook.StandardSecret(tc.shown) != tc.shown || !webhook.IsStandardSecret(tc.shown) {
				t.Errorf("StandardSecret(%q) is not a fixed point", tc.shown)
			}
		})
	}
}

func standardHeaders(id string, t time.Time, sig string) http.Header {
	h := http.Header{}
	h.Set(webhook.StandardIDHeader, id)
	h.Set(webhook.StandardTimestampHeader, strconv.FormatInt(t.Unix(), 10))
	h.Set(webhook.StandardSignatureHeader, sig)
	return h
}

// TestStandardSignature: the signature is the one the official library makes, one per
// secret during a rotation, each verifying alone; an empty secret is refused.
func TestStandardSignature(t *testing.T) {
	body, now := []byte(`{"event_id":"evt_1"}`), time.Unix(1_800_000_000, 0)
	const next, old = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "an-older-raw-secret-0123456789abcdef"
	sig, err := webhook.StandardSignature("evt_1", now, body, next, old)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(sig, " ")
	if len(parts) != 2 {
		t.Fatalf("signature %q: want two, space separated", sig)
	}
	for i, s := range []string{next, old} {
		wh, err := standardwebhooks.NewWebhook(webhook.StandardSecret(s))
		if err != nil {
			t.Fatal(err)
		}
		want, err := wh.Sign("evt_1", now, body)
		if err != nil {
			t.Fatal(err)
		}
		if parts[i] != want {
			t.Errorf("signature %d = %q, the library signs %q", i, parts[i], want)
		}
		if err := wh.VerifyIgnoringTimestamp(body, standardHeaders("evt_1", now, sig)); err != nil {
			t.Errorf("secret %d: %v", i, err)
		}
	}
	for _, secrets := range [][]string{nil, {""}, {next, ""}} {
		if _, err := webhook.StandardSignature("evt_1", now, body, secrets...); !errors.Is(err, webhook.ErrNoSecret) {
			t.Errorf("secrets %q: %v, want ErrNoSecret", secrets, err)
		}
	}
}
