package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/system"
)

// runApps is `paykit apps`: the deployment's default apps, current and earlier, with
// whether their keys are kept; -keep records the current one (as every API and worker
// does at start); -forget drops an earlier one.
func runApps(ctx context.Context, cfg config.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("apps", flag.ContinueOnError)
	keep := fs.Bool("keep", false, "record the default app (ALIPAY_*) with its keys sealed by PAYKIT_SECRETS_KEYS, as the API and the worker do at start; run it before changing ALIPAY_APP_ID")
	forget := fs.String("forget", "", "drop this earlier default app: its payments can no longer be queried, refunded or verified (only once none can still be paid or refunded)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	store, err := system.OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer system.CloseStore(store)
	switch {
	case *keep && *forget != "":
		return fmt.Errorf("apps: -keep and -forget go alone")
	case *forget != "":
		if *forget == cfg.AlipayAppID {
			return fmt.Errorf("apps: %s is the default app (ALIPAY_APP_ID); change ALIPAY_APP_ID first", *forget)
		}
		ok, err := store.ForgetDeploymentApp(ctx, *forget)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("apps: %s is not an earlier default app of this deployment", *forget)
		}
		fmt.Fprintf(out, "forgot %s\n", *forget)
		return nil
	case *keep:
		keys, err := cfg.SecretsKeyring()
		if err != nil {
			return err
		}
		if keys == nil {
			return fmt.Errorf("apps: -keep needs PAYKIT_SECRETS_KEYS: without it the default app's keys cannot be kept, and its payments would be stranded when ALIPAY_APP_ID changes")
		}
		if err := system.KeepDefaultApp(ctx, cfg, store, keys, slog.New(slog.NewTextHandler(out, nil))); err != nil {
			return err
		}
	}
	apps, err := store.DeploymentApps(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%-20s %-20s %-8s %-10s %s\n", "APP_ID", "SELLER_ID", "DEFAULT", "KEYS_KEPT", "LAST_STARTED_ON")
	for _, k := range apps {
		fmt.Fprintf(out, "%-20s %-20s %-8t %-10t %s\n", k.AppID, k.SellerID, k.AppID == cfg.AlipayAppID, k.CredentialsSealed != "", k.LeftAt.UTC().Format(time.RFC3339))
	}
	return nil
}
