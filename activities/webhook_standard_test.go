package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/gateways/gatewaystest"
	"github.com/paykit/paykit/tenants"
	"github.com/paykit/paykit/webhook"
)

// standardDelivery is a delivered webhook as the Node check (tools/standardwebhooks-check)
// reads it: the headers and the body as the merchant's server received them.
type standardDelivery struct {
	Name    string            `json:"name"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// TestStandardWebhooks: a webhook delivered by DeliverWebhook verifies with the official
// Standard Webhooks library for Go (github.com/standard-webhooks/standard-webhooks),
// given the tenant's secret in the form `paykit tenant` shows: a secret set before
// paykit sent Standard Webhooks (not whsec_ and base64) as whsec_ and the base64 of it,
// and during a rotation the old and the new secret alike. The library refuses the same
// delivery with its body, its webhook-id or its webhook-timestamp changed, and one
// signed six minutes ago (a captured webhook replayed outside the tolerance); the older
// Paykit-Signature still verifies beside it. With PAYKIT_STANDARD_WEBHOOKS_OUT set, the
// deliveries and the secrets are written there for the Node library to check.
func TestStandardWebhooks(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	kr := gatewaystest.Keyring(t)
	f.acts.Secrets = kr
	events := f.paidEvents(t, f.tenantID, 3)
	deliver := func(t *testing.T, eventID string) delivery {
		t.Helper()
		before := len(f.merchant.deliveries())
		if err := f.remote(t, nil, f.acts.DeliverWebhook, eventID); err != nil {
			t.Fatal(err)
		}
		got := f.merchant.deliveries()
		if len(got) != before+1 {
			t.Fatalf("merchant received %d webhooks, want %d", len(got), before+1)
		}
		return got[len(got)-1]
	}
	verifier := func(t *testing.T, secret string) *standardwebhooks.Webhook {
		t.Helper()
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatalf("standardwebhooks.NewWebhook(%q): %v", secret, err)
		}
		return wh
	}
	var exported []standardDelivery
	export := func(name string, d delivery) {
		h := map[string]string{}
		for _, k := range []string{webhook.StandardIDHeader, webhook.StandardTimestampHeader, webhook.StandardSignatureHeader,
			activities.SignatureHeader, activities.EventIDHeader} {
			h[strings.ToLower(k)] = d.header.Get(k)
		}
		exported = append(exported, standardDelivery{Name: name, Headers: h, Body: string(d.body)})
	}

	legacyShown := webhook.StandardSecret(testSecret)
	if webhook.IsStandardSecret(testSecret) || legacyShown == testSecret {
		t.Fatalf("test secret %q should be one of before Standard Webhooks", testSecret)
	}

	// A secret of before: whsec_ and the base64 of it verifies; the secret as it is, the
	// Paykit-Signature. The webhook-id is the signed body's event_id.
	d := deliver(t, events[0])
	export("legacy", d)
	if err := verifier(t, legacyShown).Verify(d.body, d.header); err != nil {
		t.Fatalf("legacy secret, shown as %q: %v (headers %v)", legacyShown, err, d.header)
	}
	if _, err := webhook.VerifyEvent(d.signature, d.eventID, d.body, testSecret, webhook.DefaultTolerance); err != nil {
		t.Fatalf("Paykit-Signature beside it: %v", err)
	}
	var body struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(d.body, &body); err != nil || body.EventID != events[0] ||
		d.header.Get(webhook.StandardIDHeader) != events[0] || d.eventID != events[0] {
		t.Fatalf("webhook-id %q, Paykit-Event-Id %q, body's event_id %q: want %q for all", d.header.Get(webhook.StandardIDHeader),
			d.eventID, body.EventID, events[0])
	}

	// The secret of before as it is is refused by the library at once, not taken for
	// another key: the merchant sees that it needs the shown form.
	if _, err := standardwebhooks.NewWebhook(testSecret); err == nil {
		t.Fatalf("standardwebhooks.NewWebhook(%q) accepted a secret not in the whsec_ form", testSecret)
	}

	// What an attacker holding a captured webhook may change is refused.
	for _, tc := range []struct {
		name   string
		body   []byte
		header func() map[string]string
		want   error
	}{
		{name: "tampered body", body: bytes.Replace(d.body, []byte(events[0]), []byte(events[1]), 1), want: standardwebhooks.ErrNoMatchingSignature},
		{name: "another webhook-id", header: func() map[string]string {
			return map[string]string{webhook.StandardIDHeader: events[1]}
		}, want: standardwebhooks.ErrNoMatchingSignature},
		{name: "timestamp moved", header: func() map[string]string {
			ts, _ := strconv.ParseInt(d.header.Get(webhook.StandardTimestampHeader), 10, 64)
			return map[string]string{webhook.StandardTimestampHeader: strconv.FormatInt(ts+1, 10)}
		}, want: standardwebhooks.ErrNoMatchingSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, h := d.body, d.header.Clone()
			if tc.body != nil {
				b = tc.body
			}
			if tc.header != nil {
				for k, v := range tc.header() {
					h.Set(k, v)
				}
			}
			if err := verifier(t, legacyShown).Verify(b, h); !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}

	// Replayed outside the tolerance: signed six minutes ago, refused for its age alone.
	f.acts.WebhookNow = func() time.Time { return time.Now().Add(-6 * time.Minute) }
	old := deliver(t, events[1])
	f.acts.WebhookNow = nil
	export("replayed", old)
	if err := verifier(t, legacyShown).Verify(old.body, old.header); !errors.Is(err, standardwebhooks.ErrMessageTooOld) {
		t.Fatalf("a webhook signed 6 minutes ago: %v, want %v", err, standardwebhooks.ErrMessageTooOld)
	}
	if err := verifier(t, legacyShown).VerifyIgnoringTimestamp(old.body, old.header); err != nil {
		t.Fatalf("its signature is sound all the same: %v", err)
	}

	// A rotation to a generated secret (already in the whsec_ form): both secrets verify.
	next, err := tenants.NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	if !webhook.IsStandardSecret(next) || len(webhook.StandardKey(next)) != 32 {
		t.Fatalf("generated secret %q: want whsec_ and the base64 of 32 bytes", next)
	}
	if _, err := tenants.RotateSecret(ctx, f.store, kr, f.tenantID, tenants.Rotation{NewSecret: next, Window: time.Hour}, time.Now()); err != nil {
		t.Fatal(err)
	}
	rot := deliver(t, events[2])
	export("rotation", rot)
	if n := len(strings.Fields(rot.header.Get(webhook.StandardSignatureHeader))); n != 2 {
		t.Fatalf("webhook-signature %q: want 2 signatures during the rotation", rot.header.Get(webhook.StandardSignatureHeader))
	}
	for _, s := range []string{next, legacyShown} {
		if err := verifier(t, s).Verify(rot.body, rot.header); err != nil {
			t.Fatalf("rotation, secret %q: %v", s, err)
		}
	}
	for _, s := range []string{next, testSecret} {
		if err := webhook.Verify(rot.signature, rot.body, s, webhook.DefaultTolerance); err != nil {
			t.Fatalf("rotation, Paykit-Signature under %q: %v", s, err)
		}
	}
	other, err := tenants.NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := verifier(t, other).Verify(rot.body, rot.header); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Fatalf("a third secret: %v, want %v", err, standardwebhooks.ErrNoMatchingSignature)
	}

	if dir := os.Getenv("PAYKIT_STANDARD_WEBHOOKS_OUT"); dir != "" {
		out, err := json.MarshalIndent(map[string]any{
			"secrets":    map[string]string{"legacy": legacyShown, "next": next, "other": other},
			"deliveries": exported,
		}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "deliveries.json"), out, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
