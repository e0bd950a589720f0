package statement

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paykit/paykit/payment"
)

// AppLister pages through the tenants that have an Alipay app of their own, and lists
// the apps tenants have left; *mysql.Store implements it.
type AppLister interface {
	TenantsWithAlipayCredentials(ctx context.Context, afterID string) ([]payment.Tenant, error)
	KeptAlipayAppIDs(ctx context.Context, leftSince time.Time) ([]string, error)
}

// AppGateways gives the apps their bill sources (gateways.Resolver).
type AppGateways interface {
	// Default is the gateway of the deployment's default app.
	Default() payment.Gateway
	ForApp(ctx context.Context, appID string) (payment.Gateway, error)
}

// KeptAppsReconciledFor is how long after a tenant left an app its bills are still
// reconciled: a payment opened on it before the move may be paid there until it expires
// and refunded there for 12 months after that (Alipay's longest refund window, 366 days
// with a leap day), so a year and a margin for the payments still open at the move.
const KeptAppsReconciledFor = 400 * 24 * time.Hour

// Apps is the one list of Alipay apps whose bills are reconciled: the deployment's
// default app defaultApp (ALIPAY_APP_ID), every app a tenant has its own keys for, and
// every app a tenant left less than KeptAppsReconciledFor ago, each once. With gws set
// each carries its bill source (its app's gateway); without, only the IDs are listed.
func Apps(ctx context.Context, defaultApp string, store AppLister, gws AppGateways) ([]App, error) {
	def := App{ID: defaultApp, Default: true}
	if gws != nil {
		def.Bills, _ = gws.Default().(payment.BillSource)
	}
	apps := []App{def}
	seen := map[string]bool{defaultApp: true}
	for after := ""; store != nil; {
		ts, err := store.TenantsWithAlipayCredentials(ctx, after)
		if err != nil {
			return nil, fmt.Errorf("statement apps: %w", err)
		}
		if len(ts) == 0 {
			break
		}
		after = ts[len(ts)-1].ID
		for _, t := range ts {
			if t.AlipayAppID == "" || seen[t.AlipayAppID] {
				continue
			}
			seen[t.AlipayAppID] = true
			apps = append(apps, tenantApp(ctx, gws, t.AlipayAppID))
		}
	}
	if store == nil {
		return apps, nil
	}
	kept, err := store.KeptAlipayAppIDs(ctx, time.Now().Add(-KeptAppsReconciledFor))
	if err != nil {
		return nil, fmt.Errorf("statement apps: %w", err)
	}
	for _, id := range kept {
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		apps = append(apps, tenantApp(ctx, gws, id))
	}
	return apps, nil
}

// tenantApp is a tenant's app (current or kept) in the statements' list; with gws set
// it carries its bill source.
func tenantApp(ctx context.Context, gws AppGateways, id string) App {
	app := App{ID: id}
	if gws != nil {
		if gw, err := gws.ForApp(ctx, id); err != nil {
			// One app whose keys do not load fails its own day, not every app's.
			app.Bills = unavailableBills{app: id, err: err}
		} else {
			app.Bills, _ = gw.(payment.BillSource)
		}
	}
	return app
}

// unavailableBills is the bill source of an app whose gateway cannot be built.
type unavailableBills struct {
	app string
	err error
}

func (u unavailableBills) BillDownloadURL(context.Context, string) (string, error) {
	return "", fmt.Errorf("alipay app %s: %w", u.app, u.err)
}

// AppIDs lists the apps' IDs.
func AppIDs(apps []App) []string {
	ids := make([]string, len(apps))
	for i, a := range apps {
		ids[i] = a.ID
	}
	return ids
}

// Select is the app id among apps, or every app when id is empty. An id that is none of
// them is refused with an error that lists the apps there are.
func Select(apps []App, id string) ([]App, error) {
	if id == "" {
		return apps, nil
	}
	i := slices.IndexFunc(apps, func(a App) bool { return a.ID == id })
	if i < 0 {
		return nil, fmt.Errorf("%s is not an Alipay app of this deployment (%s)", id, strings.Join(AppIDs(apps), ", "))
	}
	return apps[i : i+1], nil
}

// WithBills gives each of apps the bill source of the app of the same ID in withBills
// (Apps listed with the gateways); an app missing there keeps its own.
func WithBills(apps, withBills []App) []App {
	out := slices.Clone(apps)
	for i, app := range out {
		if j := slices.IndexFunc(withBills, func(b App) bool { return b.ID == app.ID }); j >= 0 {
			out[i] = withBills[j]
		}
	}
	return out
}

// RunDay reconciles the day of every app in this process, in turn.
func (r *Reconciler) RunDay(ctx context.Context, apps []App, billDate string) error {
	for _, app := range apps {
		if _, err := r.Run(ctx, Params{App: app, BillDate: billDate}); err != nil {
			if IsNotAvailable(err) {
				return fmt.Errorf("alipay has not published the bill of %s for app %s yet (isp.bill_not_exist)", billDate, app.ID)
			}
			return err
		}
	}
	return nil
}
