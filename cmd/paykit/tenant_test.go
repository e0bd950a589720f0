package main

import (
	"context"
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
)

// Re-running `paykit tenant` changes only the fields it is given: rotating the API key
// (the README's example) leaves the webhook URL, its secret, the auto-refund choice and
// the Alipay app as they are; a flag given empty clears its field; a new tenant needs
// its API key. Before, every flag left out was written as its empty default, so a key
// rotation silently stopped every webhook.
func TestTenantRerunChangesOnlyTheGivenFields(t *testing.T) {
	ctx := context.Background()
	cfg := config.Config{AlipayAppID: "2021default", AlipaySellerID: "2088default", AlipayGatewayURL: "http://127.0.0.1:1/gateway.do",
		PublicURL: "http://127.0.0.1:2"}
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	t.Cleanup(func() { _ = st.Close() })
	stored := func(id string) payment.Tenant {
		t.Helper()
		tn, err := st.GetTenant(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return tn
	}
	run := func(args ...string) error {
		t.Helper()
		f, _, err := parseTenantFlags(cfg, args)
		if err != nil {
			t.Fatal(err)
		}
		return tenantAdmin(cfg, st).Set(ctx, f.Change, payment.AlipayCredentials{}, false)
	}
	if err := run("-id", "demo", "-notify-url", "https://shop.example/hooks"); err == nil || !strings.Contains(err.Error(), "-api-key") {
		t.Fatalf("new tenant without an API key: %v, want refused naming -api-key", err)
	}
	if err := run("-id", "demo", "-name", "Demo shop", "-api-key", "sk_test_0123456789abcdef", "-notify-url", "https://shop.example/hooks",
		"-webhook-secret", "whsec_first", "-auto-refund-paid-after-close"); err != nil {
		t.Fatal(err)
	}
	first := stored("demo")
	if err := run("-id", "demo", "-api-key", "sk_test_rotated_0123456789"); err != nil {
		t.Fatal(err)
	}
	got := stored("demo")
	if got.NotifyURL != "https://shop.example/hooks" || got.WebhookSecret != "whsec_first" || !got.AutoRefundPaidAfterClose ||
		got.Name != "Demo shop" || got.AlipayAppID != first.AlipayAppID || got.AlipaySeller != first.AlipaySeller {
		t.Fatalf("after a key rotation the tenant is %+v, want everything but the key as before (%+v)", got, first)
	}
	if got.APIKeyHash == first.APIKeyHash || got.APIKeyHash == "" {
		t.Fatal("the API key was not rotated")
	}
	if err := run("-id", "demo", "-notify-url", ""); err != nil {
		t.Fatal(err)
	}
	if got := stored("demo"); got.NotifyURL != "" || got.WebhookSecret != "whsec_first" || got.APIKeyHash == "" {
		t.Fatalf("an explicitly empty -notify-url: %+v, want only notify_url cleared", got)
	}
}
