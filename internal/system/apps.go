package system

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/secrets"
)

// KeepDefaultApp records the deployment's default app (ALIPAY_*) with its keys, sealed
// with the keyring when there is one, so that when ALIPAY_APP_ID changes the payments
// opened on this app are still queried, closed, refunded, verified and reconciled on it
// (gateways.Resolver.ForPayment and ForApp fall back to the deployment's kept apps). The
// payments recorded before payments named their app (alipay_app_id ”) are written with
// the first app the deployment recorded: they were opened on it. Until a start has
// written them all, every start does (a start killed part way leaves the rest to the
// next), with that first app whatever ALIPAY_APP_ID says now. An earlier default app
// recorded without keys is reported: its payments can no longer be acted on.
func KeepDefaultApp(ctx context.Context, cfg config.Config, store *mysql.Store, keys *secrets.Keyring, logger *slog.Logger) error {
	sealed := ""
	if keys != nil {
		creds, err := cfg.DefaultAppCredentials()
		if err != nil {
			return err
		}
		plain, err := creds.EncodeForSealing()
		if err != nil {
			return err
		}
		if sealed, err = keys.Seal(plain, payment.AlipayCredentialsAAD(payment.DeploymentAppsTenant)); err != nil {
			return fmt.Errorf("seal the default app's keys: %w", err)
		}
	}
	first, err := store.KeepDeploymentApp(ctx, cfg.AlipayAppID, cfg.AlipaySellerID, sealed)
	if err != nil {
		return err
	}
	apps, err := store.DeploymentApps(ctx)
	if err != nil {
		return err
	}
	for _, k := range apps {
		if k.AppID != cfg.AlipayAppID && k.CredentialsSealed == "" {
			logger.Error("an earlier default app's keys were not kept: its payments cannot be queried, refunded or verified",
				"app_id", k.AppID, "default_app_id", cfg.AlipayAppID, "last_default_at", k.LeftAt,
				"fix", "set PAYKIT_SECRETS_KEYS and start one process with that app's ALIPAY_* to keep its keys; `paykit apps -forget "+k.AppID+"` once none of its payments can still be paid or refunded")
		}
	}
	firstApp, pending, err := store.DefaultAppToBackfill(ctx)
	if err != nil {
		return err
	}
	if pending {
		n, err := store.BackfillDefaultApp(ctx, firstApp, 5000)
		if err != nil {
			return fmt.Errorf("record the default app on older payments: %w", err)
		}
		logger.Info("default app recorded", "app_id", cfg.AlipayAppID, "keys_kept", sealed != "",
			"older_rows_app_id", firstApp, "older_rows_written", n, "resumed", !first)
	}
	return nil
}
