package main

import (
	"context"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
)

// Re-running `paykit tenant` changes only the fields it is given: rotating the API key
// (the example of docs/operate/configuration.md) leaves the webhook URL, its secret, the auto-refund choice and
// the Alipay app as they are; a flag given empty clears its field (but never the
// webhook secret); a new tenant gives
// its API key or has one generated. Before, every flag left out was written as its empty default, so a key
// rotation silently stopped every webhook.
func TestTenantRerunChangesOnlyTheGivenFields(t *testing.T) {
	ctx := context.Background()
	k1, _ := secrets.NewKey("k1")
	kr, _ := secrets.ParseKeyring(k1)
	secretOf := func(tn payment.Tenant) string {
		t.Helper()
		s, err := tn.CurrentWebhookSecret(kr)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const whsecFirst = "whsec_first_0123456789abcdef01234"
	cfg := config.Config{SecretsKeys: k1, AlipayAppID: "2021default", AlipaySellerID: "2088default", AlipayGatewayURL: "http://127.0.0.1:1/gateway.do",
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
		f, _, err := parseTenantFlags(cfg, args, strings.NewReader(""), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tenantAdmin(cfg, st).Set(ctx, f.Change, payment.AlipayCredentials{}, false)
		return err
	}
	if err := run("-id", "demo", "-name", "Demo shop", "-api-key", "sk_test_0123456789abcdef", "-notify-url", "https://shop.example/hooks",
		"-webhook-secret", whsecFirst, "-auto-refund-paid-after-close"); err != nil {
		t.Fatal(err)
	}
	first := stored("demo")
	if err := run("-id", "demo", "-api-key", "sk_test_rotated_0123456789"); err != nil {
		t.Fatal(err)
	}
	got := stored("demo")
	if got.NotifyURL != "https://shop.example/hooks" || secretOf(got) != whsecFirst || !got.AutoRefundPaidAfterClose ||
		got.Name != "Demo shop" || got.AlipayAppID != first.AlipayAppID || got.AlipaySeller != first.AlipaySeller {
		t.Fatalf("after a key rotation the tenant is %+v, want everything but the key as before (%+v)", got, first)
	}
	if got.APIKeyHash == first.APIKeyHash || got.APIKeyHash == "" {
		t.Fatal("the API key was not rotated")
	}
	if err := run("-id", "demo", "-notify-url", ""); err != nil {
		t.Fatal(err)
	}
	if got := stored("demo"); got.NotifyURL != "" || secretOf(got) != whsecFirst || got.APIKeyHash == "" {
		t.Fatalf("an explicitly empty -notify-url: %+v, want only notify_url cleared", got)
	}
}

// TestTenantSecretsFromFileOrStdin: `paykit tenant` reads the API key, the webhook
// secret and a rotation's new secret from a file or, with "-", from stdin (a trailing
// newline dropped), so that none has to be on the command line, where ps and the shell
// history show it. A secret given on argv still works, with a warning; one given both
// ways, two read from stdin, or an empty file are refused. Before, argv was the only way.
func TestTenantSecretsFromFileOrStdin(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "api-key")
	if err := os.WriteFile(keyFile, []byte("sk_test_from_a_file_0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "whsec_from_stdin_0123456789abcdef"
	for _, c := range []struct {
		name                    string
		args                    []string
		stdin                   string
		wantKey, wantSecret     string
		wantRotation, wantError string
		wantWarning             bool
	}{
		{name: "files and stdin", args: []string{"-id", "a", "-api-key-file", keyFile, "-webhook-secret-file", "-"}, stdin: secret + "\r\n",
			wantKey: "sk_test_from_a_file_0123456789", wantSecret: secret},
		{name: "rotation from stdin", args: []string{"-id", "a", "-rotate-webhook-secret-file", "-"}, stdin: secret + "\n", wantRotation: secret},
		{name: "argv still works, with a warning", args: []string{"-id", "a", "-api-key", "sk_test_on_argv_0123456789"},
			wantKey: "sk_test_on_argv_0123456789", wantWarning: true},
		{name: "both ways", args: []string{"-id", "a", "-api-key", "sk_test_on_argv_0123456789", "-api-key-file", keyFile}, wantError: "not both"},
		{name: "two from stdin", args: []string{"-id", "a", "-api-key-file", "-", "-webhook-secret-file", "-"}, stdin: secret, wantError: "stdin"},
		{name: "empty file", args: []string{"-id", "a", "-webhook-secret-file", empty}, wantError: "empty"},
	} {
		var warn strings.Builder
		f, rot, err := parseTenantFlags(config.Config{}, c.args, strings.NewReader(c.stdin), &warn)
		if c.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantError) {
				t.Errorf("%s: %v, want an error with %q", c.name, err, c.wantError)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if f.APIKey != c.wantKey || f.WebhookSecret != c.wantSecret || rot.NewSecret != c.wantRotation {
			t.Errorf("%s: api key %q, webhook secret %q, rotation %q", c.name, f.APIKey, f.WebhookSecret, rot.NewSecret)
		}
		if c.wantKey != "" && !f.Has("api-key") || c.wantSecret != "" && !f.Has("webhook-secret") {
			t.Errorf("%s: a secret read from a file does not count as given: %v", c.name, f.Given)
		}
		if got := strings.Contains(warn.String(), "-api-key-file"); got != c.wantWarning {
			t.Errorf("%s: warning %q", c.name, warn.String())
		}
	}
}

// TestTenantPrintsTheStandardForm: `paykit tenant -standard-webhook-secret-file F` prints
// the whsec_ form of the secret in F, the one a merchant gives a standardwebhooks library,
// reading and storing nothing (no database is configured here): a secret of before as
// whsec_ and its base64, one already in that form as it is.
func TestTenantPrintsTheStandardForm(t *testing.T) {
	const raw = "whsec_from_stdin_0123456789abcdef"
	std := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	for _, c := range []struct{ secret, want string }{
		{raw, "whsec_" + base64.StdEncoding.EncodeToString([]byte(raw))},
		{std, std},
	} {
		f, rot, err := parseTenantFlags(config.Config{}, []string{"-standard-webhook-secret-file", "-"}, strings.NewReader(c.secret+"\n"), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if err := runTenantWith(context.Background(), config.Config{}, f, rot, &out); err != nil {
			t.Fatal(err)
		}
		if out.String() != c.want+"\n" {
			t.Errorf("secret %q printed %q, want %q", c.secret, out.String(), c.want)
		}
	}
}

// paykit dev seeds its demo tenant, every run, with the demo merchant's webhook secret
// sealed under the development keyring, over a tenant left in the clear by a run of
// before.
func TestDevSeedsTheDemoTenantSealed(t *testing.T) {
	ctx := context.Background()
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	t.Cleanup(func() { _ = st.Close() })
	k, _ := secrets.NewKey("dev")
	kr, _ := secrets.ParseKeyring(k)
	cfg := config.Config{SecretsKeys: k, AlipayAppID: "2021default", AlipaySellerID: "2088default"}
	if err := st.UpsertTenant(ctx, payment.Tenant{ID: demoTenantID, APIKeyHash: strings.Repeat("0", 64),
		NotifyURL: "http://127.0.0.1:8081/webhooks", WebhookSecret: "whsec_demo_local_only", AlipayAppID: "2021default"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := seedDemoTenant(ctx, cfg, st, "http://127.0.0.1:8081/webhooks"); err != nil {
			t.Fatal(err)
		}
		tn, err := st.GetTenant(ctx, demoTenantID)
		if err != nil {
			t.Fatal(err)
		}
		if s, err := tn.CurrentWebhookSecret(kr); err != nil || s != demoWebhookSecret || tn.WebhookSecret != "" {
			t.Fatalf("demo tenant's secret: %q, %v (in the clear: %q)", s, err, tn.WebhookSecret)
		}
	}
}
