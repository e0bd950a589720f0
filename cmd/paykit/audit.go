package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/internal/system"
)

// runAudit compares the payments that changed in a window with Alipay and prints what is
// broken. It returns the process exit code.
func runAudit(ctx context.Context, cfg config.Config, args []string, out, errOut io.Writer, logger *slog.Logger) int {
	p, asJSON, err := parseAuditFlags(args, time.Now(), errOut)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return audit.ExitClean
	case err != nil:
		fmt.Fprintln(errOut, "paykit audit:", err)
		return audit.ExitFailed
	}
	aud, closeAll, err := system.OpenAuditor(ctx, cfg, logger)
	if err != nil {
		logger.Error("paykit audit failed", "err", err)
		return audit.ExitFailed
	}
	defer closeAll()
	code, err := aud.RunAndPrint(ctx, out, p, asJSON)
	if err != nil {
		logger.Error("paykit audit failed", "err", err)
	}
	return code
}

// parseAuditFlags reads the window and thresholds; -since and -until are durations
// before now, RFC 3339 times, or (for -until) "now".
func parseAuditFlags(args []string, now time.Time, errOut io.Writer) (audit.Params, bool, error) {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(errOut)
	since := fs.String("since", "24h", "audit payments that changed since this long ago, or since an RFC 3339 time")
	until := fs.String("until", "now", "and before this long ago, an RFC 3339 time, or now")
	asJSON := fs.Bool("json", false, "print one JSON object per finding, one per line")
	grantSLA := fs.Duration("grant-sla", audit.DefaultGrantSLA, "a PAID payment without a benefit grant this long after it was paid is a finding")
	webhookSLA := fs.Duration("webhook-sla", audit.DefaultWebhookSLA, "a PAID payment whose payment.paid event is undelivered this long after it was paid is a finding")
	grace := fs.Duration("pending-grace", audit.DefaultPendingGrace, "a payment pending this long past its expiry with no running workflow is a finding")
	tenantID := fs.String("tenant", "", "audit this tenant's payments only (default: every tenant's)")
	notifySLA := fs.Duration("notification-sla", audit.DefaultNotificationSLA, "a verified Alipay notification acknowledged this long ago and not settled is a finding")
	if err := fs.Parse(args); err != nil {
		return audit.Params{}, false, err
	}
	if fs.NArg() > 0 {
		return audit.Params{}, false, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	p := audit.Params{TenantID: *tenantID, GrantSLA: *grantSLA, WebhookSLA: *webhookSLA, PendingGrace: *grace, NotificationSLA: *notifySLA}
	var err error
	if p.Since, err = audit.ParseInstant(*since, now); err != nil {
		return audit.Params{}, false, fmt.Errorf("-since: %w", err)
	}
	if p.Until, err = audit.ParseInstant(*until, now); err != nil {
		return audit.Params{}, false, fmt.Errorf("-until: %w", err)
	}
	if p.GrantSLA <= 0 || p.WebhookSLA <= 0 || p.PendingGrace <= 0 || p.NotificationSLA <= 0 {
		return audit.Params{}, false, errors.New("-grant-sla, -webhook-sla, -pending-grace and -notification-sla must be positive")
	}
	if err := p.Validate(); err != nil {
		return audit.Params{}, false, err
	}
	return p, *asJSON, nil
}
