package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Exit codes of an audit, which `paykit audit` exits with.
const (
	ExitClean    = 0 // every invariant holds
	ExitFindings = 1 // at least one finding
	ExitFailed   = 2 // the audit could not run
)

// RunAndPrint runs the audit and prints its report to out; it returns the exit code.
func (a *Auditor) RunAndPrint(ctx context.Context, out io.Writer, p Params, asJSON bool) (int, error) {
	rep, err := a.Run(ctx, p)
	if err != nil {
		return ExitFailed, err
	}
	if err := WriteReport(out, rep, asJSON); err != nil {
		return ExitFailed, err
	}
	if len(rep.Findings) > 0 {
		return ExitFindings, nil
	}
	return ExitClean, nil
}

// WriteReport prints a report: a summary and a table of the findings, or with asJSON
// one JSON object per finding, one per line.
func WriteReport(out io.Writer, rep Report, asJSON bool) error {
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
	for _, k := range Kinds() {
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

// Lag is how long before a scheduled audit its window ends, for payments that live
// paymentTTL: long enough that every payment in it is past its expiry plus the pending
// grace, and one paid at the last moment of its life is past the grant and webhook SLAs.
// A lag of the SLAs alone let a payment created near the window's end and paid near its
// expiry be audited before its webhook was due, and never again.
func Lag(paymentTTL time.Duration) time.Duration {
	return max(paymentTTL+DefaultGrantSLA, paymentTTL+DefaultWebhookSLA, paymentTTL+DefaultPendingGrace)
}

// ParseInstant reads "now", a duration before now ("24h") or an RFC 3339 time.
func ParseInstant(s string, now time.Time) (time.Time, error) {
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
