// Package anomalies is the operator's side of the anomalies the system records (money
// Alipay reports for a payment closed locally, a paid amount that differs, a
// statement's discrepancies): their list, and the refund that resolves a payment paid
// after it was closed.
package anomalies

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paykit/paykit/payment"
)

// Lister is what the list reads from; *mysql.Store implements it.
type Lister interface {
	ListAnomalies(ctx context.Context, since time.Time, limit int) ([]payment.Anomaly, error)
}

// Print prints at most limit anomalies recorded, or recorded again, since, the last seen
// first: a table, or with asJSON one JSON object per line. Each names its subject, what
// it is about within its payment ("-" in the table, "" in JSON, for the payment as a
// whole), when it was first recorded and when last ("-" if not since migration 0049).
func Print(ctx context.Context, out io.Writer, l Lister, since time.Time, limit int, asJSON bool) error {
	as, err := l.ListAnomalies(ctx, since, limit)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		for _, a := range as {
			obj := map[string]any{
				"kind": a.Kind, "tenant_id": a.TenantID, "payment_no": a.PaymentNo, "subject": a.Subject, "trade_no": a.TradeNo,
				"amount_fen": int64(a.Amount), "detail": a.Detail, "created_at": a.CreatedAt.UTC(),
			}
			if !a.ResolvedAt.IsZero() {
				obj["resolved_at"], obj["resolution"] = a.ResolvedAt.UTC(), a.Resolution
			}
			if !a.LastSeenAt.IsZero() {
				obj["last_seen_at"] = a.LastSeenAt.UTC()
			}
			if err := enc.Encode(obj); err != nil {
				return err
			}
		}
		return nil
	}
	if len(as) == 0 {
		_, err := fmt.Fprintf(out, "no anomalies since %s\n", since.UTC().Format(time.RFC3339))
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CREATED (UTC)\tLAST SEEN (UTC)\tKIND\tTENANT\tPAYMENT_NO\tSUBJECT\tTRADE_NO\tAMOUNT (CNY)\tSTATE\tDETAIL")
	for _, a := range as {
		detail := strings.Join(strings.Fields(a.Detail), " ")
		if r := []rune(detail); len(r) > 120 {
			detail = string(r[:117]) + "..."
		}
		subject := a.Subject
		if subject == "" {
			subject = "-" // about the payment as a whole
		}
		state := "open"
		if !a.ResolvedAt.IsZero() {
			state = "resolved " + a.ResolvedAt.UTC().Format("2006-01-02")
			if a.LastSeenAt.After(a.ResolvedAt) {
				state += ", seen again " + a.LastSeenAt.UTC().Format("2006-01-02 15:04")
			}
		}
		seen := "-"
		if !a.LastSeenAt.IsZero() {
			seen = a.LastSeenAt.UTC().Format("2006-01-02 15:04:05")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.CreatedAt.UTC().Format("2006-01-02 15:04:05"), seen,
			a.Kind, a.TenantID, a.PaymentNo, subject, a.TradeNo, a.Amount.Yuan(), state, detail)
	}
	return tw.Flush()
}

// Refunder is what resolving an anomaly by refund needs: *mysql.Store reads and
// reserves, the orchestrator starts the refund's workflow.
type Refunder interface {
	GetAnomaly(ctx context.Context, kind, paymentNo string) (payment.Anomaly, error)
	GetPayment(ctx context.Context, paymentNo string) (payment.Payment, error)
	CreateRefund(ctx context.Context, n payment.NewRefund) (payment.Refund, bool, error)
}

// RefundStarter starts (or joins) a refund's workflow; *orchestrator.Orchestrator implements it.
type RefundStarter interface {
	StartRefund(ctx context.Context, r payment.Refund) error
}

// RefundPaidAfterClose refunds the money Alipay took for a payment closed locally, through the
// refund workflow. Its refund_no is derived from the payment, so running it any number of
// times makes one refund, and a run after a failed start starts that same refund again.
func RefundPaidAfterClose(ctx context.Context, out io.Writer, st Refunder, starter RefundStarter, paymentNo string) error {
	a, err := st.GetAnomaly(ctx, payment.AnomalyPaidAfterClose, paymentNo)
	if err != nil {
		return fmt.Errorf("anomalies: no %s anomaly for payment %s: %w", payment.AnomalyPaidAfterClose, paymentNo, err)
	}
	p, err := st.GetPayment(ctx, paymentNo)
	if err != nil {
		return fmt.Errorf("anomalies: %w", err)
	}
	r, existed, err := st.CreateRefund(ctx, payment.AnomalyRefund(p, a))
	if err != nil {
		return fmt.Errorf("anomalies: refund %s: %w", paymentNo, err)
	}
	if err := starter.StartRefund(ctx, r); err != nil {
		return fmt.Errorf("anomalies: refund %s recorded but not started (run the command again): %w", r.RefundNo, err)
	}
	verb := "started"
	if existed {
		verb = "already requested"
	}
	_, err = fmt.Fprintf(out, "refund %s of %s CNY for payment %s %s: %s (workflow %s)\n",
		r.RefundNo, r.Amount.Yuan(), p.PaymentNo, verb, r.Status, payment.RefundWorkflowID(r.TenantID, r.RefundNo))
	return err
}

// Resolver marks an anomaly resolved; *mysql.Store implements it.
type Resolver interface {
	ResolveAnomaly(ctx context.Context, kind, paymentNo, subject, note string) (payment.Anomaly, bool, error)
}

// Resolve marks the anomaly (kind, paymentNo, subject) resolved with the operator's note
// and says so. Resolving it again changes nothing and shows the first resolution.
func Resolve(ctx context.Context, out io.Writer, st Resolver, kind, paymentNo, subject, note string) error {
	a, resolved, err := st.ResolveAnomaly(ctx, kind, paymentNo, subject, note)
	if err != nil {
		return fmt.Errorf("anomalies: resolve %s of payment %s (subject %q): %w", kind, paymentNo, subject, err)
	}
	verb := "resolved"
	if !resolved {
		verb = "already resolved"
	}
	_, err = fmt.Fprintf(out, "anomaly %s of payment %s (subject %q) %s at %s: %s\n",
		a.Kind, a.PaymentNo, a.Subject, verb, a.ResolvedAt.UTC().Format(time.RFC3339), a.Resolution)
	return err
}
