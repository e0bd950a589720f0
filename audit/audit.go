// Package audit checks the invariants exactly-once promises by comparing MySQL with
// Alipay over a window of payments: nothing paid at Alipay is left unpaid locally, no
// order is charged twice without the re-purchase opt-in, every paid payment is granted
// and announced to its merchant, nothing pending is abandoned, and every paid amount
// matches. It reads through narrow interfaces, so it runs as well against the real
// Alipay as against the simulator.
package audit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/paykit/paykit/payment"
)

// Finding kinds. They are stable: operators filter on them and the scheduled audit
// records them as anomalies named AnomalyPrefix + kind.
const (
	// KindLost is a payment Alipay reports paid that is not PAID locally.
	KindLost = "lost"
	// KindDouble is a second PAID payment of one order without the re-purchase opt-in.
	KindDouble = "double"
	// KindMissingGrant is a PAID payment without a benefit grant past the grant SLA.
	KindMissingGrant = "missing_grant"
	// KindUndeliveredEvent is a PAID payment whose payment.paid event was not delivered
	// to the merchant within the webhook SLA, or was never written.
	KindUndeliveredEvent = "undelivered_event"
	// KindStuckPending is a payment still pending past its expiry and grace with no
	// running workflow to finish it.
	KindStuckPending = "stuck_pending"
	// KindAmountMismatch is a PAID payment whose amount at Alipay differs from ours.
	KindAmountMismatch = "amount_mismatch"
	// KindNotPaidAtAlipay is a PAID payment whose trade Alipay does not report paid.
	KindNotPaidAtAlipay = "not_paid_at_alipay"
	// KindUnsettledNotification is a payment with a verified Alipay notification that was
	// acknowledged and whose effect is still not seen past the notification SLA.
	KindUnsettledNotification = "unsettled_notification"
	// KindUnverifiable is a payment the audit could not check because Alipay or
	// Temporal did not answer.
	KindUnverifiable = "unverifiable"
)

// Kinds lists every finding kind in the order a payment's findings are reported.
func Kinds() []string {
	return []string{KindLost, KindDouble, KindMissingGrant, KindUndeliveredEvent, KindStuckPending,
		KindAmountMismatch, KindNotPaidAtAlipay, KindRefundNotSucceeded, KindRefundNotAtAlipay, KindRefundAmountMismatch, KindRefundExceedsPaid,
		KindUnsettledNotification, KindUnverifiable, KindUnverifiableGaveUp}
}

// AnomalyPrefix starts the kind of every anomaly the scheduled audit records, so that
// they are told apart from the ones the payment path records.
const AnomalyPrefix = "audit_"

// Defaults of the thresholds, and the limits of one run.
const (
	DefaultGrantSLA     = 10 * time.Minute
	DefaultWebhookSLA   = time.Hour
	DefaultPendingGrace = 5 * time.Minute
	// DefaultNotificationSLA is how long an acknowledged notification may stay unsettled:
	// the inbox hands it over again after 30 s, then with backoff.
	DefaultNotificationSLA = 10 * time.Minute
	// DefaultConcurrency bounds the Alipay queries and workflow checks in flight.
	DefaultConcurrency = 8
	// DefaultPageSize is how many payments are read at once.
	DefaultPageSize = 200
	// MaxWindow bounds [Since, Until): one run queries Alipay for nearly every payment
	// created in it.
	MaxWindow = 31 * 24 * time.Hour
)

// Query attempts for a retryable Alipay failure before the payment is unverifiable.
const (
	queryAttempts = 3
	queryBackoff  = 200 * time.Millisecond
)

// EventState is the state of a PAID payment's payment.paid outbox event.
type EventState int8

// The event states.
const (
	EventMissing EventState = iota // no event row at all
	EventOwed                      // written, not delivered yet
	EventSettled                   // delivered: nothing more is owed to the merchant
	// EventDead is an event the outbox gave up on: the sweeper no longer sends it, so
	// the merchant never heard of the payment unless an operator redelivers it.
	EventDead
)

// Record is one payment of the window with the local facts the checks need.
type Record struct {
	Payment payment.Payment
	// Granted is true if the payment has a row in benefit_grants.
	Granted bool
	// Event is the state of the payment.paid event; EventMissing for a payment that is
	// not PAID.
	Event          EventState
	EventAttempts  int
	EventLastError string
	// EarlierPaid is the payment_no of an earlier PAID payment of the same order. It is
	// set only for a PAID payment without the re-purchase opt-in.
	EarlierPaid string
	// LaterPaid is the payment_no of a later PAID payment of the same order without the
	// re-purchase opt-in, for a PAID payment. The run audits it too: when an earlier
	// payment of the order becomes PAID after the later one was audited, the later one
	// is the second PAID payment, and its own row did not change.
	LaterPaid string
	// UnsettledNotificationSince is when the oldest verified notification of the payment
	// that is not settled yet was received; zero if there is none.
	UnsettledNotificationSince time.Time
	// Changed is the latest change of the payment, its refunds and its outbox events.
	// A finding is recorded only if it has not moved since the facts were read: a
	// payment that changed while it was audited is audited again in the window of that
	// change, on facts that are not half old and half new.
	Changed time.Time
}

// Source is what a run reads its payments from, in this order: the payments whose row
// changed in the window, then those whose refunds did, then those whose outbox events
// did. A payment is audited once per run whichever of them changed.
type Source int8

// The sources of a payment to audit.
const (
	SourcePayments Source = iota
	SourceRefunds
	SourceEvents
	// SourceEnd is past the last source: the run is complete.
	SourceEnd
)

// Cursor is where a run stands: the source it reads and the (time, id) of the last row
// of it already audited. The zero Cursor is the start of a run; a run resumed from a
// Cursor audits only what follows it.
type Cursor struct {
	Source Source    `json:"source"`
	At     time.Time `json:"at,omitzero"`
	ID     int64     `json:"id,omitempty"`
}

// Store is what the audit reads from MySQL; *mysql.Store implements it.
type Store interface {
	// ChangedPage reads up to limit rows of after.Source that changed in [since, until)
	// past after's position, in (time, id) order, and returns the payments they belong
	// to with their facts (each payment once, in no particular order) and the cursor
	// that follows them: after.Source's last row read, or the start of the next source
	// if fewer than limit rows were left. Every tenant's, or only tenantID's if it is not
	// empty.
	ChangedPage(ctx context.Context, tenantID string, since, until time.Time, after Cursor, limit int) ([]Record, Cursor, error)
	// AuditRecords reads the facts of the given payments again; a payment that no longer
	// exists is left out.
	AuditRecords(ctx context.Context, paymentNos []string) ([]Record, error)
	// AnomalyKinds returns the kinds of the anomalies recorded for a payment.
	AnomalyKinds(ctx context.Context, paymentNo string) ([]string, error)
}

// Gateway is the one Alipay call the audit makes; payment.Gateway implements it.
type Gateway interface {
	Query(ctx context.Context, paymentNo string) (payment.Trade, error)
}

// WorkflowChecker tells whether a workflow has a running execution. No such workflow,
// or a closed one, is not running. *orchestrator.Orchestrator implements it.
type WorkflowChecker interface {
	Running(ctx context.Context, workflowID string) (bool, error)
}

// Finding is one broken invariant, about one payment.
type Finding struct {
	Kind      string         `json:"kind"`
	TenantID  string         `json:"tenant_id"`
	OrderID   string         `json:"order_id"`
	PaymentNo string         `json:"payment_no"`
	Status    payment.Status `json:"status"`
	TradeNo   string         `json:"trade_no,omitempty"`
	AmountFen payment.Amount `json:"amount_fen"`
	// AlipayAmountFen is the trade's total_amount when Alipay was asked and has the trade.
	AlipayAmountFen payment.Amount `json:"alipay_amount_fen,omitempty"`
	CreatedAt       time.Time      `json:"created_at"`
	Detail          string         `json:"detail"`
	// Subject is what the finding is about within the payment: the out_request_no of the
	// refund a refund finding names, empty for a finding about the payment as a whole.
	Subject string `json:"subject,omitempty"`
}

// Anomaly is the finding as the operator-visible anomaly the scheduled audit records,
// about the finding's subject: a finding is its kind, payment and subject, whatever
// window found it, so an audit run again over the window, or a later window that meets
// the same payment, records nothing twice.
func (f Finding) Anomaly() payment.Anomaly {
	return payment.Anomaly{
		Kind: AnomalyPrefix + f.Kind, TenantID: f.TenantID, PaymentNo: f.PaymentNo, Subject: f.Subject, TradeNo: f.TradeNo,
		Amount: f.AmountFen, Detail: "order " + f.OrderID + ": " + f.Detail,
	}
}

// Progress is reported while a run goes on, for heartbeats: a run resumed from Cursor
// (Params.After) audits everything that was not recorded yet.
type Progress struct {
	Payments int    `json:"payments"`
	Cursor   Cursor `json:"cursor"`
}

// Params are the window and thresholds of one run. Zero thresholds take the defaults.
type Params struct {
	// Since and Until bound the window: the run audits every payment that changed in
	// [Since, Until): its row, one of its refunds or one of its outbox events.
	Since, Until time.Time
	// TenantID, if set, audits that tenant's payments only.
	TenantID     string
	GrantSLA     time.Duration
	WebhookSLA   time.Duration
	PendingGrace time.Duration
	// NotificationSLA bounds how long an acknowledged notification may stay unsettled.
	NotificationSLA time.Duration
	// After resumes a run where an earlier attempt reported it stood (Progress.Cursor).
	After Cursor
	// Record, if set, is handed each page's findings as soon as they are found, and they
	// are not kept in the Report (which counts them): a window too large for one attempt
	// still records what it found. An error from it ends the run.
	Record func(context.Context, []Finding) error
	// Progress, if set, is called from the goroutine running Run after each page and
	// each check started.
	Progress func(Progress)
}

func (p Params) withDefaults() Params {
	if p.GrantSLA <= 0 {
		p.GrantSLA = DefaultGrantSLA
	}
	if p.WebhookSLA <= 0 {
		p.WebhookSLA = DefaultWebhookSLA
	}
	if p.PendingGrace <= 0 {
		p.PendingGrace = DefaultPendingGrace
	}
	if p.NotificationSLA <= 0 {
		p.NotificationSLA = DefaultNotificationSLA
	}
	return p
}

// Validate checks the window: a start before its end, at most MaxWindow apart.
func (p Params) Validate() error {
	switch {
	case p.Since.IsZero() || p.Until.IsZero():
		return payment.Errorf(payment.EINVALID, "audit: the window needs a start and an end")
	case !p.Since.Before(p.Until):
		return payment.Errorf(payment.EINVALID, "audit: the window start %s is not before its end %s",
			p.Since.UTC().Format(time.RFC3339), p.Until.UTC().Format(time.RFC3339))
	case p.Until.Sub(p.Since) > MaxWindow:
		return payment.Errorf(payment.EINVALID, "audit: the window %s is longer than %s", p.Until.Sub(p.Since), MaxWindow)
	}
	return nil
}

// Report is the outcome of one run.
type Report struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Payments counts the payments that changed in the window.
	Payments int `json:"payments"`
	// InFlight counts pending payments not yet past expire_at + grace: still being
	// worked on, so not checked.
	InFlight int `json:"in_flight"`
	// Queried counts the payments whose trade was queried at Alipay.
	Queried int `json:"queried"`
	// ChangedWhileAudited counts the payments whose findings were dropped because the
	// payment, a refund or an event of it changed between the read and the record: that
	// change puts the payment in a later window, where it is audited again.
	ChangedWhileAudited int `json:"changed_while_audited"`
	// Findings are the findings, unless Params.Record took them.
	Findings []Finding      `json:"findings"`
	ByKind   map[string]int `json:"by_kind"`
}

// Counts returns the number of findings of each kind that occurs.
func (r Report) Counts() map[string]int {
	c := map[string]int{}
	for k, n := range r.ByKind {
		c[k] = n
	}
	return c
}

// Auditor runs audits. Its fields are its dependencies; it keeps no state between runs.
type Auditor struct {
	Store   Store
	Gateway Gateway
	// Gateways, if set, asks the account each payment was opened on at its channel (its
	// tenant's own Alipay app, the default one, or the WeChat Pay merchant); Gateway is
	// then unused.
	Gateways  payment.Gateways
	Workflows WorkflowChecker
	// Concurrency bounds remote checks in flight (default 8); PageSize bounds one read
	// (default 200).
	Concurrency int
	PageSize    int
	// Now is the clock the SLAs are measured with; nil means time.Now.
	Now func() time.Time
}

func (a *Auditor) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Run audits the payments that changed in [p.Since, p.Until). Every check that could
// not be carried out is reported as an unverifiable finding; an error means the audit
// itself failed (MySQL unreadable, invalid window, ctx done, Record failed).
func (a *Auditor) Run(ctx context.Context, p Params) (Report, error) {
	p = p.withDefaults()
	if err := p.Validate(); err != nil {
		return Report{}, err
	}
	pageSize := a.PageSize
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	rep := Report{Since: p.Since, Until: p.Until, Findings: []Finding{}, ByKind: map[string]int{}}
	now := a.now()
	inWindow := func(t time.Time) bool { return !t.Before(p.Since) && t.Before(p.Until) }
	// A payment found through its refunds or events whose own row changed in the window
	// was audited from the payments source already; seen keeps the others to once a run.
	seen := map[string]bool{}
	cur := p.After
	for cur.Source < SourceEnd {
		recs, next, err := a.Store.ChangedPage(ctx, p.TenantID, p.Since, p.Until, cur, pageSize)
		if err != nil {
			return rep, fmt.Errorf("audit: read changes after %+v: %w", cur, err)
		}
		if cur.Source > SourcePayments {
			recs = slices.DeleteFunc(recs, func(r Record) bool {
				skip := inWindow(r.Payment.UpdatedAt) || seen[r.Payment.PaymentNo]
				seen[r.Payment.PaymentNo] = true
				return skip
			})
		}
		if recs, err = a.withLaterPaid(ctx, recs, inWindow, seen); err != nil {
			return rep, err
		}
		slices.SortFunc(recs, func(x, y Record) int { return cmp.Compare(x.Payment.ID, y.Payment.ID) })
		found, err := a.checkPage(ctx, recs, p, now, cur, &rep)
		if err != nil {
			return rep, err
		}
		if found, err = a.stillTrue(ctx, recs, found, &rep); err != nil {
			return rep, err
		}
		if p.Record != nil && len(found) > 0 {
			if err := p.Record(ctx, found); err != nil {
				return rep, fmt.Errorf("audit: record %d findings: %w", len(found), err)
			}
		} else {
			rep.Findings = append(rep.Findings, found...)
		}
		for _, f := range found {
			rep.ByKind[f.Kind]++
		}
		rep.Payments += len(recs)
		cur = next
		p.progress(Progress{Payments: rep.Payments, Cursor: cur})
	}
	return rep, nil
}

// withLaterPaid adds to a page the later PAID payments of its PAID payments' orders
// that no source of the window reads (their own row did not change in it) and that are
// not on the page or audited already in this run.
func (a *Auditor) withLaterPaid(ctx context.Context, recs []Record, inWindow func(time.Time) bool, seen map[string]bool) ([]Record, error) {
	var nos []string
	for _, r := range recs {
		if r.LaterPaid != "" && !seen[r.LaterPaid] && !slices.ContainsFunc(recs, func(o Record) bool { return o.Payment.PaymentNo == r.LaterPaid }) {
			nos = append(nos, r.LaterPaid)
		}
	}
	if len(nos) == 0 {
		return recs, nil
	}
	later, err := a.Store.AuditRecords(ctx, nos)
	if err != nil {
		return nil, fmt.Errorf("audit: read the later PAID payments %v: %w", nos, err)
	}
	for _, r := range later {
		if !inWindow(r.Payment.UpdatedAt) && !seen[r.Payment.PaymentNo] {
			seen[r.Payment.PaymentNo] = true
			recs = append(recs, r)
		}
	}
	return recs, nil
}

// stillTrue keeps the findings of the payments that did not change while they were
// audited: each is read again, and one whose latest change moved since the page was
// read loses its findings (it is audited again in the window of that change).
func (a *Auditor) stillTrue(ctx context.Context, recs []Record, found []Finding, rep *Report) ([]Finding, error) {
	if len(found) == 0 {
		return found, nil
	}
	changed := map[string]time.Time{}
	for _, r := range recs {
		changed[r.Payment.PaymentNo] = r.Changed
	}
	var nos []string
	for _, f := range found {
		if !slices.Contains(nos, f.PaymentNo) {
			nos = append(nos, f.PaymentNo)
		}
	}
	again, err := a.Store.AuditRecords(ctx, nos)
	if err != nil {
		return nil, fmt.Errorf("audit: read %d payments again before recording their findings: %w", len(nos), err)
	}
	moved := map[string]bool{}
	for _, r := range again {
		if !r.Changed.Equal(changed[r.Payment.PaymentNo]) {
			moved[r.Payment.PaymentNo] = true
		}
	}
	rep.ChangedWhileAudited += len(moved)
	return slices.DeleteFunc(found, func(f Finding) bool { return moved[f.PaymentNo] }), nil
}

func (p Params) progress(pr Progress) {
	if p.Progress != nil {
		p.Progress(pr)
	}
}

// remote is what Alipay and Temporal said about one payment.
type remote struct {
	queried  bool
	trade    payment.Trade
	queryErr error
	checked  bool // the workflow was looked up
	running  bool
	checkErr error
	refunds  refundRemote
}

// checkPage checks one page: the local facts at once, the remote ones with bounded
// concurrency. Findings come out in the page's order, each payment's in Kinds order.
func (a *Auditor) checkPage(ctx context.Context, recs []Record, p Params, now time.Time, at Cursor, rep *Report) ([]Finding, error) {
	conc := a.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	results := make([]remote, len(recs))
	var g errgroup.Group
	g.SetLimit(conc)
	for i, rec := range recs {
		pay := rec.Payment
		query, check := false, false
		switch {
		case pay.Status == payment.StatusPaid:
			query = true
		case pay.Status == payment.StatusPending && !now.After(pay.ExpireAt.Add(p.PendingGrace)):
			rep.InFlight++
		case pay.Status == payment.StatusPending:
			query, check = true, true
		default:
			query = true
		}
		if !query && !check {
			continue
		}
		if query {
			rep.Queried++
		}
		p.progress(Progress{Payments: rep.Payments, Cursor: at})
		g.Go(func() error {
			results[i] = a.remoteCheck(ctx, pay, query, check)
			if query && pay.Status != payment.StatusPending {
				results[i].refunds = a.checkRefunds(ctx, pay, p.PendingGrace, now)
			}
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}

	var out []Finding
	for i, rec := range recs {
		fs, err := a.findings(ctx, rec, results[i], p, now)
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}

func (a *Auditor) remoteCheck(ctx context.Context, pay payment.Payment, query, check bool) remote {
	var r remote
	if query {
		r.queried = true
		r.trade, r.queryErr = a.query(ctx, pay)
	}
	if check {
		r.checked = true
		wid := pay.WorkflowID
		if wid == "" {
			wid = payment.WorkflowID(pay.TenantID, pay.OrderID)
		}
		r.running, r.checkErr = a.Workflows.Running(ctx, wid)
	}
	return r
}

// query asks Alipay for a trade, retrying a retryable failure a few times so that one
// dropped call does not make a payment unverifiable.
func (a *Auditor) query(ctx context.Context, pay payment.Payment) (payment.Trade, error) {
	gw, err := a.gatewayOf(ctx, pay)
	if err != nil {
		return payment.Trade{}, err
	}
	return withRetries(ctx, func() (payment.Trade, error) { return gw.Query(ctx, pay.PaymentNo) })
}

// gatewayOf returns the gateway of the account a payment was opened on at its channel,
// wherever its tenant has moved since.
func (a *Auditor) gatewayOf(ctx context.Context, pay payment.Payment) (Gateway, error) {
	if a.Gateways == nil {
		return a.Gateway, nil
	}
	app, err := a.Gateways.ForPayment(ctx, pay.TenantID, pay.Channel, pay.AlipayAppID)
	if err != nil {
		return nil, fmt.Errorf("gateway of tenant %s app %q: %w", pay.TenantID, pay.AlipayAppID, err)
	}
	return app.Gateway, nil
}

// withRetries calls ask up to queryAttempts times while it fails with a retryable error,
// waiting a little longer before each new attempt.
func withRetries[T any](ctx context.Context, ask func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for attempt := range queryAttempts {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(attempt) * queryBackoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return v, fmt.Errorf("%w (after %d attempts: %w)", ctx.Err(), attempt, err)
			case <-t.C:
			}
		}
		v, err = ask()
		if err == nil || !payment.IsRetryable(err) {
			return v, err
		}
	}
	return v, fmt.Errorf("%d attempts: %w", queryAttempts, err)
}

// findings applies every check to one payment.
func (a *Auditor) findings(ctx context.Context, rec Record, r remote, p Params, now time.Time) ([]Finding, error) {
	newFinding := findingOf(rec.Payment, r)
	lost, err := a.lostFindings(ctx, rec.Payment, r, newFinding)
	if err != nil {
		return nil, err
	}
	out := lost
	out = append(out, paidFindings(rec, p, now, newFinding)...)
	out = append(out, stuckFindings(rec.Payment, r, p, now, newFinding)...)
	out = append(out, tradeFindings(rec.Payment, r, newFinding)...)
	out = append(out, refundFindings(rec.Payment, r.refunds, newFinding)...)
	out = append(out, notificationFindings(rec, p, now, newFinding)...)
	out = append(out, unverifiableFindings(rec.Payment, r, newFinding)...)
	return out, nil
}

// findingOf returns the constructor of pay's findings, which carry Alipay's view of the
// trade when it was read.
func findingOf(pay payment.Payment, r remote) func(kind, detail string) Finding {
	return func(kind, detail string) Finding {
		f := Finding{Kind: kind, TenantID: pay.TenantID, OrderID: pay.OrderID, PaymentNo: pay.PaymentNo,
			Status: pay.Status, TradeNo: pay.TradeNo, AmountFen: pay.Amount, CreatedAt: pay.CreatedAt, Detail: detail}
		if r.queried && r.queryErr == nil && r.trade.State != payment.TradeNotExist {
			f.AlipayAmountFen = r.trade.Amount
			if f.TradeNo == "" {
				f.TradeNo = r.trade.TradeNo
			}
		}
		return f
	}
}

// lostFindings: Alipay has the trade paid and the payment is not PAID here.
func (a *Auditor) lostFindings(ctx context.Context, pay payment.Payment, r remote, newFinding func(kind, detail string) Finding) ([]Finding, error) {
	if !r.queried || r.queryErr != nil || r.trade.State != payment.TradePaid || pay.Status == payment.StatusPaid {
		return nil, nil
	}
	detail := fmt.Sprintf("alipay reports %s (trade_no %s, %s CNY) but the payment is %s locally",
		rawStatus(r.trade), r.trade.TradeNo, r.trade.Amount.Yuan(), pay.Status)
	kinds, err := a.Store.AnomalyKinds(ctx, pay.PaymentNo)
	if err != nil {
		return nil, fmt.Errorf("audit: anomalies of %s: %w", pay.PaymentNo, err)
	}
	kinds = slices.DeleteFunc(kinds, func(k string) bool { return strings.HasPrefix(k, AnomalyPrefix) })
	if len(kinds) > 0 {
		detail += "; already recorded as anomaly " + strings.Join(kinds, ", ")
	} else {
		detail += "; no anomaly records it"
	}
	return []Finding{newFinding(KindLost, detail)}, nil
}

// paidFindings: a PAID payment that is a second one for its order, or whose grant or
// webhook is late.
func paidFindings(rec Record, p Params, now time.Time, newFinding func(kind, detail string) Finding) []Finding {
	pay := rec.Payment
	if pay.Status != payment.StatusPaid {
		return nil
	}
	var out []Finding
	paidFor := now.Sub(paidAt(pay)).Truncate(time.Second)
	if rec.EarlierPaid != "" {
		out = append(out, newFinding(KindDouble, fmt.Sprintf(
			"order already PAID by payment %s; this second PAID payment has no re-purchase opt-in", rec.EarlierPaid)))
	}
	if !rec.Granted && paidFor > p.GrantSLA {
		out = append(out, newFinding(KindMissingGrant, fmt.Sprintf(
			"PAID %s ago (grant SLA %s) and no benefit_grants row", paidFor, p.GrantSLA)))
	}
	if rec.Event != EventSettled && paidFor > p.WebhookSLA {
		out = append(out, newFinding(KindUndeliveredEvent, undeliveredDetail(rec, paidFor, p.WebhookSLA)))
	}
	return out
}

// undeliveredDetail says where a late payment.paid event stands.
func undeliveredDetail(rec Record, paidFor, sla time.Duration) string {
	detail := fmt.Sprintf("PAID %s ago (webhook SLA %s) and it has no payment.paid event row", paidFor, sla)
	switch rec.Event {
	case EventOwed:
		detail = fmt.Sprintf("PAID %s ago (webhook SLA %s) and the payment.paid event is not delivered after %d attempts",
			paidFor, sla, rec.EventAttempts)
	case EventDead:
		detail = fmt.Sprintf("PAID %s ago (webhook SLA %s) and the payment.paid event is dead after %d attempts: the sweeper no longer sends it",
			paidFor, sla, rec.EventAttempts)
	}
	if rec.Event != EventMissing && rec.EventLastError != "" {
		detail += "; last error: " + rec.EventLastError
	}
	return detail
}

// stuckFindings: a pending payment past its expiry whose workflow is not running.
func stuckFindings(pay payment.Payment, r remote, p Params, now time.Time, newFinding func(kind, detail string) Finding) []Finding {
	if !r.checked || r.checkErr != nil || r.running {
		return nil
	}
	return []Finding{newFinding(KindStuckPending, fmt.Sprintf(
		"pending %s past expire_at %s (grace %s) and workflow %s is not running",
		now.Sub(pay.ExpireAt).Truncate(time.Second), pay.ExpireAt.UTC().Format(time.RFC3339), p.PendingGrace,
		workflowID(pay)))}
}

// tradeFindings: a PAID payment whose trade Alipay does not have paid, or for another amount.
func tradeFindings(pay payment.Payment, r remote, newFinding func(kind, detail string) Finding) []Finding {
	if !r.queried || r.queryErr != nil || pay.Status != payment.StatusPaid {
		return nil
	}
	switch {
	case r.trade.State == payment.TradeClosed && pay.Refunded >= pay.Amount:
		// Refunded in full through paykit: Alipay closes the trade, the payment stays
		// PAID. The refund checks compare the refunds themselves.
	case r.trade.State != payment.TradePaid:
		return []Finding{newFinding(KindNotPaidAtAlipay, fmt.Sprintf(
			"PAID locally but alipay reports the trade as %s", rawStatus(r.trade)))}
	case r.trade.Amount != pay.Amount:
		return []Finding{newFinding(KindAmountMismatch, fmt.Sprintf(
			"alipay total_amount %s CNY, local amount %s CNY", r.trade.Amount.Yuan(), pay.Amount.Yuan()))}
	}
	return nil
}

// notificationFindings: a verified notification unsettled past its SLA.
func notificationFindings(rec Record, p Params, now time.Time, newFinding func(kind, detail string) Finding) []Finding {
	since := rec.UnsettledNotificationSince
	if since.IsZero() || now.Sub(since) <= p.NotificationSLA {
		return nil
	}
	return []Finding{newFinding(KindUnsettledNotification, fmt.Sprintf(
		"a verified alipay notification acknowledged %s ago (notification SLA %s) is not settled: the payment is %s and no anomaly names it",
		now.Sub(since).Truncate(time.Second), p.NotificationSLA, rec.Payment.Status))}
}

// unverifiableFindings is one finding per payment, whatever failed: the anomaly it
// becomes is about the payment as a whole.
func unverifiableFindings(pay payment.Payment, r remote, newFinding func(kind, detail string) Finding) []Finding {
	var failed []string
	if r.refunds.err != nil {
		failed = append(failed, r.refunds.err.Error())
	}
	if r.queryErr != nil {
		failed = append(failed, "alipay query failed: "+r.queryErr.Error())
	}
	if r.checkErr != nil {
		failed = append(failed, fmt.Sprintf("workflow %s could not be described: %v", workflowID(pay), r.checkErr))
	}
	if len(failed) == 0 {
		return nil
	}
	return []Finding{newFinding(KindUnverifiable, strings.Join(failed, "; "))}
}

// paidAt is when the payment became PAID locally: paid_at may be Alipay's gmt_payment,
// earlier than our transition, and the SLAs run from the transition.
func paidAt(p payment.Payment) time.Time {
	if p.UpdatedAt.After(p.PaidAt) {
		return p.UpdatedAt
	}
	return p.PaidAt
}

func workflowID(p payment.Payment) string {
	if p.WorkflowID != "" {
		return p.WorkflowID
	}
	return payment.WorkflowID(p.TenantID, p.OrderID)
}

func rawStatus(t payment.Trade) string {
	if t.RawStatus != "" {
		return t.RawStatus
	}
	return t.State.String()
}

// Retry is a payment a scheduled audit could not verify (an unverifiable finding): the
// watermark moves past it, so the audit comes back to it (Auditor.Recheck) until it can
// verify it, or for RecheckFor since FirstAt, after which it records that it gave up.
type Retry struct {
	PaymentNo string
	FirstAt   time.Time
	NextAt    time.Time
	// Attempts counts the checks again that found it still unverifiable.
	Attempts int
	Detail   string
}

// KindUnverifiableGaveUp is the anomaly the scheduled audit records (with AnomalyPrefix)
// for a payment it could not verify for RecheckFor: an operator checks it by hand.
const KindUnverifiableGaveUp = "unverifiable_gave_up"

// RecheckFor is how long the scheduled audit keeps checking a payment it could not
// verify before it gives up on it.
const RecheckFor = 7 * 24 * time.Hour

// RecheckAfter is when a payment found unverifiable again after attempts checks is due
// next: an hour, doubling, at most a day.
func RecheckAfter(attempts int) time.Duration {
	d := time.Hour
	for range min(attempts, 5) {
		d *= 2
	}
	return min(d, 24*time.Hour)
}

// Recheck audits the given payments again, whatever window they changed in, with the
// checks of Run (a PAID payment at Alipay, a pending one past its expiry at Alipay and
// in Temporal, its refunds): the scheduled audit comes back to the payments it could not
// verify. Payments that no longer exist are left out of the report.
func (a *Auditor) Recheck(ctx context.Context, p Params, paymentNos []string) (Report, error) {
	p = p.withDefaults()
	rep := Report{Findings: []Finding{}, ByKind: map[string]int{}}
	if len(paymentNos) == 0 {
		return rep, nil
	}
	recs, err := a.Store.AuditRecords(ctx, paymentNos)
	if err != nil {
		return rep, fmt.Errorf("audit: read %d payments to check again: %w", len(paymentNos), err)
	}
	slices.SortFunc(recs, func(x, y Record) int { return cmp.Compare(x.Payment.ID, y.Payment.ID) })
	found, err := a.checkPage(ctx, recs, p, a.now(), Cursor{}, &rep)
	if err != nil {
		return rep, err
	}
	if found, err = a.stillTrue(ctx, recs, found, &rep); err != nil {
		return rep, err
	}
	rep.Findings = found
	for _, f := range found {
		rep.ByKind[f.Kind]++
	}
	rep.Payments = len(recs)
	return rep, nil
}
