package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/system"
	"github.com/paykit/paykit/secrets"
	"github.com/paykit/paykit/tenants"
	"github.com/paykit/paykit/webhook"
)

// tenantFlags are the flags of `paykit tenant`.
type tenantFlags struct {
	tenants.Change
	reencrypt bool
	newKey    string
	apiKeys   tenants.KeyChange
	// standardOf is a secret whose Standard Webhooks form to print.
	standardOf string
}

func runTenant(ctx context.Context, cfg config.Config, args []string) error {
	f, rot, err := parseTenantFlags(cfg, args, os.Stdin, os.Stderr)
	if err != nil {
		return err
	}
	return runTenantWith(ctx, cfg, f, rot, os.Stdout)
}

// secretInput is a secret flag given on the command line (discouraged: ps and the shell
// history show it) and its -file twin, which reads it from a file or stdin.
type secretInput struct {
	flag     string
	dst      *string
	fromFile string
}

// parseTenantFlags reads `paykit tenant`'s flags and records which were given. Secrets
// given with a -file flag are read here, from stdin for "-"; one given on the command
// line draws a warning on stderr.
func parseTenantFlags(cfg config.Config, args []string, stdin io.Reader, stderr io.Writer) (tenantFlags, tenants.Rotation, error) {
	var f tenantFlags
	var rot tenants.Rotation
	inputs := []*secretInput{{flag: "api-key", dst: &f.APIKey}, {flag: "webhook-secret", dst: &f.WebhookSecret},
		{flag: "rotate-webhook-secret", dst: &rot.NewSecret}, {flag: "standard-webhook-secret", dst: &f.standardOf}}
	fs := flag.NewFlagSet("tenant", flag.ContinueOnError)
	fs.StringVar(&f.ID, "id", "", "tenant id (A-Z a-z 0-9 _ -)")
	fs.StringVar(&f.Name, "name", "", "display name")
	fs.StringVar(&f.APIKey, "api-key", "", "API key the tenant authenticates with (stored only as a hash); discouraged, ps and the shell history "+
		"show it: use -api-key-file. A new tenant without one is given a random key, printed once. "+
		"On an existing tenant every flag left out keeps its stored value")
	fs.StringVar(&inputs[0].fromFile, "api-key-file", "", "read the API key from this file (- for stdin)")
	fs.StringVar(&f.NotifyURL, "notify-url", "", "merchant webhook URL")
	fs.StringVar(&f.WebhookSecret, "webhook-secret", "", "HMAC-SHA256 secret for webhook signatures, at least 32 bytes (sealed with PAYKIT_SECRETS_KEYS); "+
		"discouraged, use -webhook-secret-file. A tenant with a -notify-url and no secret is given a random one, printed once; "+
		"an empty value keeps the stored secret")
	fs.StringVar(&inputs[1].fromFile, "webhook-secret-file", "", "read the webhook secret from this file (- for stdin)")
	fs.StringVar(&f.AppID, "alipay-app-id", cfg.AlipayAppID, "Alipay app_id for this tenant (another app than ALIPAY_APP_ID needs its keys)")
	fs.StringVar(&f.Seller, "alipay-seller-id", cfg.AlipaySellerID, "Alipay seller_id (PID) for this tenant")
	fs.BoolVar(&f.AutoRefund, "auto-refund-paid-after-close", false, "refund money Alipay takes for a payment closed locally as soon as it is detected")
	fs.StringVar(&f.AppPrivateKeyFile, "alipay-app-private-key-file", "", "PEM file of the tenant's own app private key (sealed with PAYKIT_SECRETS_KEYS)")
	fs.StringVar(&f.AlipayPublicKeyFile, "alipay-public-key-file", "", "PEM file of the Alipay public key of the tenant's app")
	fs.StringVar(&f.AppCertFile, "alipay-app-cert-file", "", "certificate mode: the app's certificate (appCertPublicKey_….crt)")
	fs.StringVar(&f.AlipayCertFile, "alipay-public-cert-file", "", "certificate mode: Alipay's certificate (alipayCertPublicKey_RSA2.crt)")
	fs.StringVar(&f.RootCertFile, "alipay-root-cert-file", "", "certificate mode: Alipay's root certificate (alipayRootCert.crt)")
	fs.BoolVar(&f.ClearKeys, "clear-alipay-keys", false, "remove the tenant's own app keys; its payments go through the default app")
	fs.BoolVar(&f.reencrypt, "reencrypt", false, "seal every tenant's Alipay keys and webhook secrets again under the first key of PAYKIT_SECRETS_KEYS "+
		"(after a rotation, and once after upgrading to sealed webhook secrets), then exit")
	fs.StringVar(&f.newKey, "new-secrets-key", "", "print a new random key for PAYKIT_SECRETS_KEYS with this id, then exit")
	fs.StringVar(&rot.NewSecret, "rotate-webhook-secret", "", "make this the webhook secret (at least 32 bytes), keeping the current one valid for "+
		"-old-secret-valid-for (changes nothing else); discouraged, use -rotate-webhook-secret-file")
	fs.StringVar(&inputs[2].fromFile, "rotate-webhook-secret-file", "", "read the new webhook secret of -rotate-webhook-secret from this file (- for stdin)")
	fs.StringVar(&f.standardOf, "standard-webhook-secret", "", "print the Standard Webhooks form (whsec_…) of this webhook secret, "+
		"the one a merchant gives the standardwebhooks libraries, then exit (reads and stores nothing); discouraged, use -standard-webhook-secret-file")
	fs.StringVar(&inputs[3].fromFile, "standard-webhook-secret-file", "", "read the secret of -standard-webhook-secret from this file (- for stdin)")
	fs.BoolVar(&f.apiKeys.Rotate, "rotate-api-key", false, "issue a new API key (printed once), keeping the tenant's other keys valid for -api-key-overlap (changes nothing else)")
	fs.DurationVar(&f.apiKeys.Overlap, "api-key-overlap", tenants.DefaultAPIKeyOverlap, "how long the keys a rotation replaces still authenticate")
	fs.StringVar(&f.apiKeys.Revoke, "revoke-api-key", "", "revoke the key with this hash (or hash prefix), or every key but the newest with \"old\"; every API process refuses it within a second")
	fs.DurationVar(&rot.Window, "old-secret-valid-for", tenants.DefaultOldSecretWindow, "how long the rotated-out webhook secret still signs")
	fs.BoolVar(&rot.ExpireOld, "expire-old-secret", false, "stop signing with the rotated-out webhook secret now (changes nothing else)")
	if err := fs.Parse(args); err != nil {
		return f, rot, err
	}
	f.Given = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.Given[fl.Name] = true })
	stdinTaken := ""
	for _, in := range inputs {
		fileFlag := in.flag + "-file"
		if !f.Given[fileFlag] {
			if f.Given[in.flag] && *in.dst != "" {
				fmt.Fprintf(stderr, "paykit tenant: warning: -%s on the command line is visible to other users (ps) and kept in the shell history; use -%s (- for stdin)\n",
					in.flag, fileFlag)
			}
			continue
		}
		if f.Given[in.flag] {
			return f, rot, fmt.Errorf("tenant: give -%s or -%s, not both", in.flag, fileFlag)
		}
		if in.fromFile == "-" {
			if stdinTaken != "" {
				return f, rot, fmt.Errorf("tenant: -%s and -%s both read stdin; give one of them a file", stdinTaken, fileFlag)
			}
			stdinTaken = fileFlag
		}
		s, err := readSecret(in.fromFile, stdin)
		if err != nil {
			return f, rot, fmt.Errorf("tenant: -%s: %w", fileFlag, err)
		}
		*in.dst = s
		f.Given[in.flag] = true
	}
	return f, rot, nil
}

// maxSecretFile bounds what a secret file may hold.
const maxSecretFile = 64 << 10

// readSecret reads a secret from path, or from stdin if path is "-", without its
// trailing line break.
func readSecret(path string, stdin io.Reader) (string, error) {
	r := stdin
	if path != "-" {
		file, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer file.Close()
		r = file
	}
	b, err := io.ReadAll(io.LimitReader(r, maxSecretFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxSecretFile {
		return "", errors.New("more than 64 KiB")
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", errors.New("the secret is empty")
	}
	return s, nil
}

// runTenantWith runs `paykit tenant` with its parsed flags: the one action they ask for
// (print a secret's Standard Webhooks form, change API keys, rotate the webhook secret,
// print a new secrets key, re-encrypt), or else the tenant's creation or update.
func runTenantWith(ctx context.Context, cfg config.Config, f tenantFlags, rot tenants.Rotation, stdout io.Writer) error {
	switch {
	case f.Given["standard-webhook-secret"]:
		fmt.Fprintln(stdout, webhook.StandardSecret(f.standardOf))
		return nil
	case f.apiKeys.Requested():
		return changeAPIKeys(ctx, cfg, f.ID, f.apiKeys, stdout)
	case rot.Requested():
		return rotateWebhookSecret(ctx, cfg, f.ID, rot, stdout)
	case f.newKey != "":
		return printNewSecretsKey(f.newKey, stdout)
	case f.reencrypt:
		return reencryptTenants(ctx, cfg, stdout)
	}
	return setTenant(ctx, cfg, f, stdout)
}

// changeAPIKeys rotates or revokes the API keys of tenant id (-rotate-api-key,
// -revoke-api-key) and prints what changed.
func changeAPIKeys(ctx context.Context, cfg config.Config, id string, change tenants.KeyChange, stdout io.Writer) error {
	store, err := system.OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer system.CloseStore(store)
	msg, err := tenants.ChangeKeys(ctx, store, id, change, time.Now())
	if err == nil {
		fmt.Fprintln(stdout, msg)
	}
	return err
}

// rotateWebhookSecret rotates the webhook secret of tenant id, or expires the old one
// (rot), and prints what changed, with the new secret's Standard Webhooks note if it has
// one.
func rotateWebhookSecret(ctx context.Context, cfg config.Config, id string, rot tenants.Rotation, stdout io.Writer) error {
	kr, err := cfg.SecretsKeyring()
	if err != nil {
		return err
	}
	store, err := system.OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer system.CloseStore(store)
	msg, err := tenants.RotateSecret(ctx, store, kr, id, rot, time.Now())
	if err == nil {
		fmt.Fprintln(stdout, msg)
		if note := tenants.StandardSecretNote(id, rot.NewSecret); note != "" {
			fmt.Fprintln(stdout, note)
		}
	}
	return err
}

// printNewSecretsKey prints a new random key for PAYKIT_SECRETS_KEYS with the given id
// (-new-secrets-key).
func printNewSecretsKey(id string, stdout io.Writer) error {
	k, err := secrets.NewKey(id)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, k)
	return nil
}

// reencryptTenants seals every tenant's Alipay keys, then its webhook secrets, again under
// the first key of PAYKIT_SECRETS_KEYS (-reencrypt), printing how many of each.
func reencryptTenants(ctx context.Context, cfg config.Config, stdout io.Writer) error {
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
	fmt.Fprintf(stdout, "re-encrypted %d of %d tenants' Alipay keys (current and kept apps) under key %q\n", n, total, kr.PrimaryID())
	if err != nil {
		return err
	}
	n, total, err = tenants.SealWebhookSecrets(ctx, store, kr)
	fmt.Fprintf(stdout, "sealed %d of %d tenants' webhook secrets under key %q\n", n, total, kr.PrimaryID())
	return err
}

// setTenant creates or updates the tenant as the flags say and prints what was issued
// for it, with the webhook secret's Standard Webhooks note if one was given.
func setTenant(ctx context.Context, cfg config.Config, f tenantFlags, stdout io.Writer) error {
	creds, setKeys, err := f.Check()
	if err != nil {
		return err
	}
	store, err := system.OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer system.CloseStore(store)
	issued, err := tenantAdmin(cfg, store).Set(ctx, f.Change, creds, setKeys)
	if err != nil {
		return err
	}
	printIssued(stdout, f.ID, issued)
	if f.Has("webhook-secret") {
		if note := tenants.StandardSecretNote(f.ID, f.WebhookSecret); note != "" {
			fmt.Fprintln(stdout, note)
		}
	}
	return nil
}

// printIssued shows what was generated for the tenant: it is shown this once, since
// neither the hash of the key nor the sealed secret can be read back.
func printIssued(w io.Writer, id string, issued tenants.Issued) {
	if issued.APIKey != "" {
		fmt.Fprintf(w, "tenant %s: API key (shown only now; store it): %s\n", id, issued.APIKey)
	}
	if issued.WebhookSecret != "" {
		fmt.Fprintf(w, "tenant %s: webhook secret, in the Standard Webhooks form (shown only now; give it to the merchant): %s\n", id, issued.WebhookSecret)
	}
}

// tenantAdmin applies tenant changes to store under the deployment's configuration.
func tenantAdmin(cfg config.Config, store tenants.Store) tenants.Admin {
	return tenants.Admin{Store: store, DefaultApp: cfg.AlipayAppID, Keys: cfg.SecretsKeyring,
		Build: system.AlipayApps(cfg).Build, Webhooks: cfg.WebhookPolicy}
}
