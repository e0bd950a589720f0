package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/internal/config"
	"github.com/paykit/paykit/orchestrator"
)

// Exit codes of paykit audit.
const (
	auditClean    = 0 // every invariant holds
	auditFindings = 1 // at least one finding
	auditFailed   = 2 // the audit could not run
)

// runAudit compares the payments that changed in a window with Alipay and prints what is
// broken. It returns the process exit code.
func runAudit(ctx context.Context, cfg config.Config, args []string, out, errOut io.Writer, logger *slog.Logger) int {
	p, asJSON, err := parseAuditFlags(args, time.Now(), errOut)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return auditClean
	case err != nil:
		fmt.Fprintln(errOut, "paykit audit:", err)
		return auditFailed
	}
	aud, closeAll, err := openAuditor(ctx, cfg, logger)
	if err != nil {
		logger.Error("paykit audit failed", "err", err)
		return auditFailed
	}
	defer closeAll()
	code, err := auditAndPrint(ctx, aud, p, asJSON, out)
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
	if p.Since, err = parseInstant(*since, now); err != nil {
		return audit.Params{}, false, fmt.Errorf("-since: %w", err)
	}
	if p.Until, err = parseInstant(*until, now); err != nil {
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

// parseInstant reads "now", a duration before now ("24h") or an RFC 3339 time.
func parseInstant(s string, now time.Time) (time.Time, error) {
	if s == "now" {
		return now, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration counts back from now and must not be negative", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither now, a duration like 24h nor an RFC 3339 time", s)
	}
	return t, nil
}

// openAuditor builds the auditor on MySQL, Alipay and Temporal from the configuration.
func openAuditor(ctx context.Context, cfg config.Config, logger *slog.Logger) (*audit.Auditor, func(), error) {
	store, err := openStore(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	closeStore := func() { _ = store.Close(); _ = store.DB().Close() }
	gws, err := newGateways(cfg, store)
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	tc, err := dialTemporal(ctx, cfg, logger, newRegistry(), nil)
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	aud := &audit.Auditor{Store: store, Gateways: gws, Workflows: orchestrator.New(tc, cfg.TaskQueue, cfg.Timing)}
	return aud, func() { tc.Close(); closeStore() }, nil
}

// auditAndPrint runs the audit and prints the report; it returns the exit code.
func auditAndPrint(ctx context.Context, aud *audit.Auditor, p audit.Params, asJSON bool, out io.Writer) (int, error) {
	rep, err := aud.Run(ctx, p)
	if err != nil {
		return auditFailed, err
	}
	if err := printReport(rep, asJSON, out); err != nil {
		return auditFailed, err
	}
	if len(rep.Findings) > 0 {
		return auditFindings, nil
	}
	return auditClean, nil
}

func printReport(rep audit.Report, asJSON bool, out io.Writer) error {
	if asJSON {
		enc := json.NewEncoder(out)
		for _, f := range rep.Findings {
			if err := enc.Encode(f); err != nil {
				return err
			}
		}
		return nil
	}
	counts := rep.Counts()
	var perKind []string
	for _, k := range audit.Kinds() {
		perKind = append(perKind, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	if _, err := fmt.Fprintf(out, "audit of payments changed %s to %s: %d payments, %d queried at Alipay, %d pending still in flight\nfindings: %d (%s)\n",
		rep.Since.UTC().Format(time.RFC3339), rep.Until.UTC().Format(time.RFC3339), rep.Payments, rep.Queried, rep.InFlight,
		len(rep.Findings), strings.Join(perKind, " ")); err != nil {
		return err
	}
	if len(rep.Findings) == 0 {
		_, err := fmt.Fprintln(out, "no findings")
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tTENANT\tORDER\tPAYMENT_NO\tSTATUS\tAMOUNT (CNY)\tALIPAY (CNY)\tDETAIL")
	for _, f := range rep.Findings {
		alipayAmount := "-"
		if f.AlipayAmountFen != 0 {
			alipayAmount = f.AlipayAmountFen.Yuan()
		}
		detail := strings.Join(strings.Fields(f.Detail), " ")
		if r := []rune(detail); len(r) > 200 {
			detail = string(r[:197]) + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Kind, f.TenantID, f.OrderID, f.PaymentNo, f.Status,
			f.AmountFen.Yuan(), alipayAmount, detail)
	}
	return tw.Flush()
}
