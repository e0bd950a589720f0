package activities_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/gateways/gatewaystest"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/webhook"
)

// TestNoWebhookIsSentUnsigned: an event of a tenant with no usable webhook secret (none,
// or one sealed under a key the worker does not hold) reaches no merchant: the attempt
// is recorded with a clear error, the event stays undelivered in the outbox and is
// retried, and once the worker can sign, the next attempt is delivered and verifies.
// Before, it was posted with a "Paykit-Signature: t=…" that carried no signature.
func TestNoWebhookIsSentUnsigned(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var got atomic.Int64
	var lastSig atomic.Value
	var lastBody atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		lastSig.Store(r.Header.Get(activities.SignatureHeader))
		b := make([]byte, r.ContentLength)
		_, _ = r.Body.Read(b)
		lastBody.Store(b)
	}))
	t.Cleanup(srv.Close)
	kr := gatewaystest.Keyring(t)
	const secret = "whsec_sealed_0123456789abcdef0123"
	sealed, err := kr.Seal([]byte(secret), payment.WebhookSecretAAD("t_sealed"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		tenant payment.Tenant
		keys   bool
	}{
		{"no secret", payment.Tenant{ID: "t_none"}, true},
		{"sealed, no keyring", payment.Tenant{ID: "t_sealed", WebhookSecretSealed: sealed}, false},
	} {
		tn := c.tenant
		tn.Name, tn.APIKeyHash, tn.NotifyURL, tn.AlipayAppID, tn.AlipaySeller = c.name, randomHex(32), srv.URL+"/hooks", testAppID, testSellerID
		if err := f.store.UpsertTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
		f.acts.Secrets = nil
		if c.keys {
			f.acts.Secrets = kr
		}
		ev := f.paidEvents(t, tn.ID, 1)[0]
		err := f.remote(t, nil, f.acts.DeliverWebhook, ev)
		stored, gerr := f.store.GetEvent(ctx, ev)
		if gerr != nil {
			t.Fatal(gerr)
		}
		if err == nil || stored.Delivered || stored.Dead || got.Load() != 0 || stored.Attempts != 1 ||
			!strings.Contains(stored.LastError, "webhook secret") {
			t.Fatalf("%s: err %v, event %+v, %d requests sent; want none sent, the event kept with its error", c.name, err, stored, got.Load())
		}
		if c.name == "sealed, no keyring" {
			// With the keyring the same event goes out, signed.
			f.acts.Secrets = kr
			if err := f.remote(t, nil, f.acts.DeliverWebhook, ev); err != nil {
				t.Fatal(err)
			}
			sig, _ := lastSig.Load().(string)
			body, _ := lastBody.Load().([]byte)
			if got.Load() != 1 || webhook.VerifyAt(sig, body, secret, webhook.DefaultTolerance, time.Now()) != nil {
				t.Fatalf("with the keyring: %d requests, signature %q", got.Load(), sig)
			}
		}
	}
}
