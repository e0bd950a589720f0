package tenants

import (
	"context"
	"fmt"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
)

// Resealer is what the re-encryption reads and writes; *mysql.Store implements it.
type Resealer interface {
	TenantsWithAlipayCredentials(ctx context.Context, afterID string) ([]payment.Tenant, error)
	SwapTenantAlipayCredentials(ctx context.Context, tenantID, old, sealed string) (bool, error)
	KeptAlipayApps(ctx context.Context, afterTenant, afterApp string) ([]payment.KeptAlipayApp, error)
	SwapKeptAlipayCredentials(ctx context.Context, tenantID, appID, old, sealed string) (bool, error)
}

// Reencrypt seals every tenant's credentials again under the keyring's first key, those
// of its current app and those it keeps of the apps it has left: after it, the old key
// can leave PAYKIT_SECRETS_KEYS without making an old app's payments unreachable. It is
// idempotent: a value already sealed by that key is left alone, and a value changed
// meanwhile (new keys set) is not overwritten.
func Reencrypt(ctx context.Context, store Resealer, kr *secrets.Keyring) (changed, total int, err error) {
	changed, total, err = reencryptCurrent(ctx, store, kr)
	if err != nil {
		return changed, total, err
	}
	c, t, err := reencryptKept(ctx, store, kr)
	return changed + c, total + t, err
}

// reencryptCurrent reseals the credentials of every tenant's current app.
func reencryptCurrent(ctx context.Context, store Resealer, kr *secrets.Keyring) (changed, total int, err error) {
	after := ""
	for {
		ts, err := store.TenantsWithAlipayCredentials(ctx, after)
		if err != nil || len(ts) == 0 {
			return changed, total, err
		}
		for _, t := range ts {
			total++
			after = t.ID
			re, ok, err := kr.Reseal(t.AlipayCredentialsSealed, payment.AlipayCredentialsAAD(t.ID))
			if err != nil {
				return changed, total, fmt.Errorf("tenant %s: %w", t.ID, err)
			}
			if !ok {
				continue
			}
			swapped, err := store.SwapTenantAlipayCredentials(ctx, t.ID, t.AlipayCredentialsSealed, re)
			if err != nil {
				return changed, total, err
			}
			if swapped {
				changed++
			}
		}
	}
}

// reencryptKept reseals the credentials tenants keep of the apps they have left.
func reencryptKept(ctx context.Context, store Resealer, kr *secrets.Keyring) (changed, total int, err error) {
	afterTenant, afterApp := "", ""
	for {
		ks, err := store.KeptAlipayApps(ctx, afterTenant, afterApp)
		if err != nil || len(ks) == 0 {
			return changed, total, err
		}
		for _, k := range ks {
			total++
			afterTenant, afterApp = k.TenantID, k.AppID
			if k.CredentialsSealed == "" {
				// An app the deployment recorded without a keyring: no keys to reseal.
				continue
			}
			re, ok, err := kr.Reseal(k.CredentialsSealed, payment.AlipayCredentialsAAD(k.TenantID))
			if err != nil {
				return changed, total, fmt.Errorf("tenant %s kept app %s: %w", k.TenantID, k.AppID, err)
			}
			if !ok {
				continue
			}
			swapped, err := store.SwapKeptAlipayCredentials(ctx, k.TenantID, k.AppID, k.CredentialsSealed, re)
			if err != nil {
				return changed, total, err
			}
			if swapped {
				changed++
			}
		}
	}
}

// SecretSealer is what SealWebhookSecrets reads and writes; *mysql.Store implements it.
type SecretSealer interface {
	TenantsWithWebhookSecrets(ctx context.Context, afterID string) ([]payment.Tenant, error)
	SwapTenantWebhookSecrets(ctx context.Context, old, next payment.Tenant) (bool, error)
}

// SealWebhookSecrets seals every tenant's webhook secrets, current and previous, under
// the keyring's first key: those stored in the clear (before migration 0037), whose
// clear column it empties, and those sealed by another key (after a key rotation). It is
// idempotent as Reencrypt is: a secret already sealed by that key is left alone, and a
// tenant whose secrets changed meanwhile is not overwritten. It returns how many tenants
// it changed of how many hold a secret.
func SealWebhookSecrets(ctx context.Context, store SecretSealer, kr *secrets.Keyring) (changed, total int, err error) {
	after := ""
	for {
		ts, err := store.TenantsWithWebhookSecrets(ctx, after)
		if err != nil {
			return changed, total, err
		}
		if len(ts) == 0 {
			return changed, total, nil
		}
		for _, t := range ts {
			total++
			after = t.ID
			next := t
			var cur, prev bool
			if next.WebhookSecret, next.WebhookSecretSealed, cur, err = sealSecret(kr, t.ID, t.WebhookSecret, t.WebhookSecretSealed); err != nil {
				return changed, total, err
			}
			if next.PreviousWebhookSecret, next.PreviousWebhookSecretSealed, prev, err = sealSecret(kr, t.ID, t.PreviousWebhookSecret, t.PreviousWebhookSecretSealed); err != nil {
				return changed, total, err
			}
			if !cur && !prev {
				continue
			}
			swapped, err := store.SwapTenantWebhookSecrets(ctx, t, next)
			if err != nil {
				return changed, total, err
			}
			if swapped {
				changed++
			}
		}
	}
}

// sealSecret seals a secret held in the clear, or seals again one sealed by another key
// than kr's first; changed is false when there is nothing to do.
func sealSecret(kr *secrets.Keyring, tenantID, plain, sealed string) (string, string, bool, error) {
	aad := payment.WebhookSecretAAD(tenantID)
	switch {
	case sealed != "":
		re, ok, err := kr.Reseal(sealed, aad)
		if err != nil {
			return "", "", false, fmt.Errorf("tenant %s webhook secret: %w", tenantID, err)
		}
		// A clear value beside a sealed one is a leftover: the sealed one is read.
		return "", re, ok || plain != "", nil
	case plain != "":
		s, err := kr.Seal([]byte(plain), aad)
		if err != nil {
			return "", "", false, fmt.Errorf("tenant %s webhook secret: %w", tenantID, err)
		}
		return "", s, true, nil
	}
	return "", "", false, nil
}
