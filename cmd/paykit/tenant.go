package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/system"
	"github.com/paykit/paykit/secrets"
	"github.com/paykit/paykit/tenants"
)

// tenantFlags are the flags of `paykit tenant`.
type tenantFlags struct {
	tenants.Change
	reencrypt bool
	newKey    string
	apiKeys   tenants.KeyChange
}

func runTenant(ctx context.Context, cfg config.Config, args []string) error {
	f, rot, err := parseTenantFlags(cfg, args)
	if err != nil {
		return err
	}
	return runTenantWith(ctx, cfg, f, rot)
}

// parseTenantFlags reads `paykit tenant`'s flags and records which were given.
func parseTenantFlags(cfg config.Config, args []string) (tenantFlags, tenants.Rotation, error) {
	var f tenantFlags
	fs := flag.NewFlagSet("tenant", flag.ContinueOnError)
	fs.StringVar(&f.ID, "id", "", "tenant id (A-Z a-z 0-9 _ -)")
	fs.StringVar(&f.Name, "name", "", "display name")
	fs.StringVar(&f.APIKey, "api-key", "", "API key the tenant authenticates with (stored only as a hash); required for a new tenant. "+
		"On an existing tenant every flag left out keeps its stored value")
	fs.StringVar(&f.NotifyURL, "notify-url", "", "merchant webhook URL")
	fs.StringVar(&f.WebhookSecret, "webhook-secret", "", "HMAC-SHA256 secret for webhook signatures")
	fs.StringVar(&f.AppID, "alipay-app-id", cfg.AlipayAppID, "Alipay app_id for this tenant (another app than ALIPAY_APP_ID needs its keys)")
	fs.StringVar(&f.Seller, "alipay-seller-id", cfg.AlipaySellerID, "Alipay seller_id (PID) for this tenant")
	fs.BoolVar(&f.AutoRefund, "auto-refund-paid-after-close", false, "refund money Alipay takes for a payment closed locally as soon as it is detected")
	fs.StringVar(&f.AppPrivateKeyFile, "alipay-app-private-key-file", "", "PEM file of the tenant's own app private key (sealed with PAYKIT_SECRETS_KEYS)")
	fs.StringVar(&f.AlipayPublicKeyFile, "alipay-public-key-file", "", "PEM file of the Alipay public key of the tenant's app")
	fs.StringVar(&f.AppCertFile, "alipay-app-cert-file", "", "certificate mode: the app's certificate (appCertPublicKey_….crt)")
	fs.StringVar(&f.AlipayCertFile, "alipay-public-cert-file", "", "certificate mode: Alipay's certificate (alipayCertPublicKey_RSA2.crt)")
	fs.StringVar(&f.RootCertFile, "alipay-root-cert-file", "", "certificate mode: Alipay's root certificate (alipayRootCert.crt)")
	fs.BoolVar(&f.ClearKeys, "clear-alipay-keys", false, "remove the tenant's own app keys; its payments go through the default app")
	fs.BoolVar(&f.reencrypt, "reencrypt", false, "seal every tenant's Alipay keys again under the first key of PAYKIT_SECRETS_KEYS (after a rotation), then exit")
	fs.StringVar(&f.newKey, "new-secrets-key", "", "print a new random key for PAYKIT_SECRETS_KEYS with this id, then exit")
	fs.BoolVar(&f.apiKeys.Rotate, "rotate-api-key", false, "issue a new API key (printed once), keeping the tenant's other keys valid for -api-key-overlap (changes nothing else)")
	fs.DurationVar(&f.apiKeys.Overlap, "api-key-overlap", tenants.DefaultAPIKeyOverlap, "how long the keys a rotation replaces still authenticate")
	fs.StringVar(&f.apiKeys.Revoke, "revoke-api-key", "", "revoke the key with this hash (or hash prefix), or every key but the newest with \"old\"; every API process refuses it within a second")
	var rot tenants.Rotation
	fs.StringVar(&rot.NewSecret, "rotate-webhook-secret", "", "make this the webhook secret, keeping the current one valid for -old-secret-valid-for (changes nothing else)")
	fs.DurationVar(&rot.Window, "old-secret-valid-for", tenants.DefaultOldSecretWindow, "how long the rotated-out webhook secret still signs")
	fs.BoolVar(&rot.ExpireOld, "expire-old-secret", false, "stop signing with the rotated-out webhook secret now (changes nothing else)")
	if err := fs.Parse(args); err != nil {
		return f, rot, err
	}
	f.Given = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.Given[fl.Name] = true })
	return f, rot, nil
}

func runTenantWith(ctx context.Context, cfg config.Config, f tenantFlags, rot tenants.Rotation) error {
	if f.apiKeys.Requested() {
		store, err := system.OpenStore(ctx, cfg)
		if err != nil {
			return err
		}
		defer system.CloseStore(store)
		msg, err := tenants.ChangeKeys(ctx, store, f.ID, f.apiKeys, time.Now())
		if err == nil {
			fmt.Println(msg)
		}
		return err
	}
	if rot.Requested() {
		store, err := system.OpenStore(ctx, cfg)
		if err != nil {
			return err
		}
		defer system.CloseStore(store)
		msg, err := tenants.RotateSecret(ctx, store, f.ID, rot, time.Now())
		if err == nil {
			fmt.Println(msg)
		}
		return err
	}
	if f.newKey != "" {
		k, err := secrets.NewKey(f.newKey)
		if err != nil {
			return err
		}
		fmt.Println(k)
		return nil
	}
	if f.reencrypt {
		kr, err := cfg.SecretsKeyring()
		if err != nil {
			return err
		}
		if kr == nil {
			return tenants.ErrNoSecretsKey
		}
		store, err := system.OpenStore(ctx, cfg)
		if err != nil {
			return err
		}
		defer system.CloseStore(store)
		n, total, err := tenants.Reencrypt(ctx, store, kr)
		fmt.Printf("re-encrypted %d of %d tenants' Alipay keys (current and kept apps) under key %q\n", n, total, kr.PrimaryID())
		return err
	}
	creds, setKeys, err := f.Check()
	if err != nil {
		return err
	}
	store, err := system.OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer system.CloseStore(store)
	return tenantAdmin(cfg, store).Set(ctx, f.Change, creds, setKeys)
}

// tenantAdmin applies tenant changes to store under the deployment's configuration.
func tenantAdmin(cfg config.Config, store tenants.Store) tenants.Admin {
	return tenants.Admin{Store: store, DefaultApp: cfg.AlipayAppID, Keys: cfg.SecretsKeyring,
		Build: system.AlipayApps(cfg).Build, Webhooks: cfg.WebhookPolicy}
}
