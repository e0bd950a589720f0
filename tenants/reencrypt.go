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
	after := ""
	for {
		ts, err := store.TenantsWithAlipayCredentials(ctx, after)
		if err != nil {
			return changed, total, err
		}
		if len(ts) == 0 {
			break
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
	afterTenant, afterApp := "", ""
	for {
		ks, err := store.KeptAlipayApps(ctx, afterTenant, afterApp)
		if err != nil {
			return changed, total, err
		}
		if len(ks) == 0 {
			return changed, total, nil
		}
		for _, k := range ks {
			total++
			afterTenant, afterApp = k.TenantID, k.AppID
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
