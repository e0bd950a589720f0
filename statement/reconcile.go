package statement

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/paykit/paykit/payment"
)

// Defaults of a Reconciler.
const (
	DefaultBatch        = 500
	DefaultMaxBillBytes = 2 << 30 // a zip far larger than any day's bill is refused
	DateLayout          = "2006-01-02"
	// DefaultLineRetention keeps five weeks of staged lines: the runs of the last month,
	// for looking into what they reported.
	DefaultLineRetention = 35 * 24 * time.Hour
	// ReportRetention keeps a day's report for 400 days, as long as a kept app is
	// reconciled (KeptAppsReconciledFor): a year of refunds and a margin.
	ReportRetention = KeptAppsReconciledFor
)

// The retention purge after a run deletes purgeBatch lines per statement, so that none
// holds many row locks, and at most purgeRounds batches, so that a backlog (the first
// run after an upgrade) holds no run for long: the next runs take the rest.
const (
	purgeBatch  = 5000
	purgeRounds = 200
)

// App is one Alipay app whose bill is reconciled: its app_id, whether it is the global
// app (which also covers tenants that name no app), and where its bill comes from.
type App struct {
	ID      string
	Default bool
	Bills   payment.BillSource
}

// Params are one run: the app, the day, and whether to reconcile the day as having no
// bill at all (Alipay never published one).
type Params struct {
	App      App
	BillDate string // yyyy-MM-dd, China time
	NoBill   bool
	// quiet is set by Run for a quiet day (quietDay).
	quiet bool
	// Progress, if set, is called after every batch with the lines read so far.
	Progress func(lines int)
}

// Reconciler reconciles one app's bill of one day. It is safe for concurrent use.
type Reconciler struct {
	Store payment.StatementStore
	// Anomalies records what the reconciliation finds for an operator.
	Anomalies payment.Anomalies
	// Retention deletes old staged lines and reports after each run; nil keeps them.
	Retention payment.StatementRetention
	// HTTP downloads bills; nil means a client with a 5-minute timeout.
	HTTP *http.Client
	// TempDir holds a bill while it is read; empty means os.TempDir().
	TempDir string
	// Batch is how many lines are staged and looked up per query; zero means DefaultBatch.
	Batch int
	// MaxBillBytes bounds a download; zero means DefaultMaxBillBytes.
	MaxBillBytes int64
	// LineRetention is how long staged bill lines are kept (by bill date); zero means
	// DefaultLineRetention.
	LineRetention time.Duration
	Logger        *slog.Logger
	// QuietAfter is how long after a day's end Alipay's "no bill" for a day with no local
	// payment or refund on the app is taken as a quiet day (reconciled at once, status
	// quiet) rather than a bill not yet published; zero means DefaultQuietAfter.
	QuietAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultQuietAfter is the QuietAfter of a zero Reconciler: Alipay publishes a day's bill
// by the next morning (China time); noon leaves a margin.
const DefaultQuietAfter = 12 * time.Hour

// DayRange returns the China-time day billDate as [from, to).
func DayRange(billDate string) (time.Time, time.Time, error) {
	d, err := time.ParseInLocation(DateLayout, billDate, China)
	if err != nil {
		return time.Time{}, time.Time{}, payment.Errorf(payment.EINVALID, "bill date %q is not yyyy-MM-dd", billDate)
	}
	return d, d.AddDate(0, 0, 1), nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) log() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// Run downloads and reconciles the bill of p.BillDate. A day Alipay has no bill for is an
// error wrapping payment.ErrBillNotAvailable (unless p.NoBill). Running a day again
// replaces its staged lines, overwrites its report and records no anomaly twice.
func (r *Reconciler) Run(ctx context.Context, p Params) (payment.StatementReport, error) {
	from, to, err := DayRange(p.BillDate)
	if err != nil {
		return payment.StatementReport{}, err
	}
	if p.App.ID == "" {
		return payment.StatementReport{}, payment.Errorf(payment.EINVALID, "statement: no app_id")
	}
	started := r.now()
	url, err := r.billURL(ctx, &p, from, to)
	if err != nil {
		return payment.StatementReport{}, err
	}
	var bill *Bill
	if !p.NoBill {
		var closeBill func()
		if bill, closeBill, err = r.openDayBill(ctx, p, url); err != nil {
			return payment.StatementReport{}, err
		}
		defer closeBill()
	}
	if r.Store == nil || r.Anomalies == nil {
		return payment.StatementReport{}, errors.New("statement: the Reconciler needs a Store and Anomalies")
	}
	held, unlock, err := r.Store.LockStatement(ctx, p.App.ID, p.BillDate)
	if err != nil {
		return payment.StatementReport{}, err
	}
	defer unlock()
	// Everything from here is done under the lock: if it is lost, the run stops.
	ctx = held

	run := &run{r: r, ctx: ctx, p: p, rep: payment.StatementReport{
		AppID: p.App.ID, BillDate: p.BillDate, Status: payment.StatementReconciled, StartedAt: started,
		ByKind: map[string]int{},
	}}
	run.beat = everyFewSeconds(func() { p.progress(run.rep.BillLines) })
	if err := r.Store.ClearBillLines(ctx, p.App.ID, p.BillDate); err != nil {
		return payment.StatementReport{}, err
	}
	if err := run.stage(bill); err != nil {
		return payment.StatementReport{}, err
	}
	sc := payment.StatementScope{AppID: p.App.ID, BillDate: p.BillDate, DefaultApp: p.App.Default, From: from, To: to}
	if err := run.localSide(sc); err != nil {
		return payment.StatementReport{}, err
	}
	run.rep.FinishedAt = r.now()
	run.rep.DiffFen = run.rep.BillNet() - run.rep.LocalNet()
	saved, err := r.Store.SaveStatementReport(ctx, run.rep)
	if err != nil {
		return saved, err
	}
	r.purgeLines(ctx, p, run.beat)
	return saved, nil
}

// billURL asks Alipay where the day's bill is, unless p.NoBill. A day Alipay has no bill
// for that is quiet (quietDay) is reconciled without one: p becomes NoBill and quiet.
func (r *Reconciler) billURL(ctx context.Context, p *Params, from, to time.Time) (string, error) {
	if p.NoBill {
		return "", nil
	}
	if p.App.Bills == nil {
		return "", payment.Errorf(payment.EINVALID, "statement: app %s cannot download bills", p.App.ID)
	}
	url, err := p.App.Bills.BillDownloadURL(ctx, p.BillDate)
	if errors.Is(err, payment.ErrBillNotAvailable) {
		quiet, qerr := r.quietDay(ctx, *p, from, to)
		if qerr != nil {
			return "", qerr
		}
		if quiet {
			p.NoBill, p.quiet = true, true
		}
	}
	if err != nil && !p.quiet {
		return "", fmt.Errorf("statement: bill url of %s %s: %w", p.App.ID, p.BillDate, err)
	}
	return url, nil
}

// openDayBill downloads the bill at url and verifies it whole (footer, summary, counts)
// in a first pass before any line is staged, matched or recorded: a malformed bill leaves
// nothing behind. The function returned closes and deletes it.
func (r *Reconciler) openDayBill(ctx context.Context, p Params, url string) (*Bill, func(), error) {
	beat := everyFewSeconds(func() { p.progress(0) })
	path, err := r.download(ctx, url, beat)
	if err != nil {
		return nil, nil, err
	}
	bill, err := openBill(path, defaultLimits, beat)
	if err != nil {
		os.Remove(path)
		return nil, nil, fmt.Errorf("statement: %s %s: %w", p.App.ID, p.BillDate, err)
	}
	return bill, func() {
		bill.Close()
		os.Remove(path)
	}, nil
}

// stage sets the run's status and stages the bill's lines, if it has a bill.
func (x *run) stage(bill *Bill) error {
	switch {
	case x.p.quiet:
		x.rep.Status = payment.StatementQuiet
	case x.p.NoBill:
		x.rep.Status = payment.StatementNoBill
	default:
		err := bill.Lines(x.add)
		if err == nil {
			err = x.flush()
		}
		if err != nil {
			return fmt.Errorf("statement: %s %s: %w", x.p.App.ID, x.p.BillDate, err)
		}
	}
	return nil
}

// quietDay reports whether a day Alipay has no bill for is a quiet one: over for at
// least QuietAfter, with no payment paid and no refund succeeded on the app locally.
// Alipay publishes no bill for a day without a trade, which is most days of an app a
// tenant has left; such a day is reconciled at once instead of waiting for the give-up
// time and raising PaykitStatementNoBill. A day with local money on it keeps waiting:
// its bill must come.
func (r *Reconciler) quietDay(ctx context.Context, p Params, from, to time.Time) (bool, error) {
	after := r.QuietAfter
	if after <= 0 {
		after = DefaultQuietAfter
	}
	if r.Store == nil || r.now().Before(to.Add(after)) {
		return false, nil
	}
	t, err := r.Store.LocalStatementTotals(ctx, payment.StatementScope{AppID: p.App.ID, BillDate: p.BillDate, DefaultApp: p.App.Default, From: from, To: to})
	if err != nil {
		return false, fmt.Errorf("statement: local totals of %s %s: %w", p.App.ID, p.BillDate, err)
	}
	return t.Trades == 0 && t.Refunds == 0, nil
}

// purgeLines deletes the staged lines of the days older than the retention, once a day
// is reconciled, never those of the day itself nor those of a day another run holds
// (the store skips a locked day). A failure is logged and not returned:
// the day is reconciled, and the next run purges what this one left.
func (r *Reconciler) purgeLines(ctx context.Context, p Params, beat func()) {
	if r.Retention == nil {
		return
	}
	keep := r.LineRetention
	if keep <= 0 {
		keep = DefaultLineRetention
	}
	before := min(r.now().In(China).Add(-keep).Format(DateLayout), p.BillDate)
	var total int64
	for range purgeRounds {
		n, err := r.Retention.PurgeStatementLines(ctx, before, purgeBatch)
		total += n
		if err != nil {
			r.log().WarnContext(ctx, "statement lines not purged", "app_id", p.App.ID, "bill_date", p.BillDate, "before", before, "purged", total, "err", err)
			return
		}
		if n < purgeBatch {
			break
		}
		beat()
	}
	if total > 0 {
		r.log().InfoContext(ctx, "statement lines purged", "app_id", p.App.ID, "bill_date", p.BillDate, "before", before, "purged", total)
	}
	oldest := min(r.now().In(China).Add(-ReportRetention).Format(DateLayout), p.BillDate)
	if n, err := r.Retention.PurgeStatementReports(ctx, p.App.ID, oldest, 1000); err != nil {
		r.log().WarnContext(ctx, "statement reports not purged", "app_id", p.App.ID, "before", oldest, "err", err)
	} else if n > 0 {
		r.log().InfoContext(ctx, "statement reports purged", "app_id", p.App.ID, "before", oldest, "purged", n)
	}
}

// download saves the bill to a temporary file: a zip is read by random access, and a
// bill is never held in memory.
func (r *Reconciler) download(ctx context.Context, url string, beat func()) (string, error) {
	hc := r.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Minute}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("statement: bill url: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("statement: download bill: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("statement: download bill: HTTP %d", resp.StatusCode)
	}
	f, err := os.CreateTemp(r.TempDir, "paykit-bill-*.zip")
	if err != nil {
		return "", fmt.Errorf("statement: temp file: %w", err)
	}
	limit := r.MaxBillBytes
	if limit <= 0 {
		limit = DefaultMaxBillBytes
	}
	n, err := io.Copy(f, io.LimitReader(beatingReader{r: resp.Body, beat: beat}, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > limit {
		err = fmt.Errorf("bill larger than %d bytes", limit)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("statement: download bill: %w", err)
	}
	return f.Name(), nil
}

// run is the state of one reconciliation: the pending batch and the report.
type run struct {
	r     *Reconciler
	ctx   context.Context
	p     Params
	rep   payment.StatementReport
	batch []payment.BillLine
	beat  func() // progress every few seconds while the local side is walked
}

// progress reports lines read so far, if the caller asked for progress (the activity
// heartbeats with it).
func (p Params) progress(lines int) {
	if p.Progress != nil {
		p.Progress(lines)
	}
}

// everyFewSeconds returns fn throttled to one call per heartbeatEvery: a long download
// or a day with many local-only payments still heartbeats well within its timeout.
func everyFewSeconds(fn func()) func() {
	var last time.Time
	return func() {
		if now := time.Now(); now.Sub(last) >= heartbeatEvery {
			last = now
			fn()
		}
	}
}

const heartbeatEvery = 5 * time.Second

// beatingReader calls beat on every read (beat throttles itself).
type beatingReader struct {
	r    io.Reader
	beat func()
}

func (b beatingReader) Read(p []byte) (int, error) {
	b.beat()
	return b.r.Read(p)
}

func (x *run) add(l payment.BillLine) error {
	x.rep.BillLines++
	x.rep.BillFeeFen += int64(l.Fee)
	if l.Kind == payment.BillLineRefund {
		x.rep.BillRefundCount++
		x.rep.BillRefundFen += int64(l.Amount)
	} else {
		x.rep.BillTradeCount++
		x.rep.BillTradeFen += int64(l.Amount)
	}
	x.batch = append(x.batch, l)
	size := x.r.Batch
	if size <= 0 {
		size = DefaultBatch
	}
	if len(x.batch) >= size {
		return x.flush()
	}
	return nil
}

// flush stages the batch and matches it with two lookups.
func (x *run) flush() error {
	if len(x.batch) == 0 {
		return nil
	}
	ctx := x.ctx
	if err := x.r.Store.StageBillLines(ctx, x.p.App.ID, x.p.BillDate, x.batch); err != nil {
		return err
	}
	var nos, reqs []string
	for _, l := range x.batch {
		nos = append(nos, l.OutTradeNo)
		if l.Kind == payment.BillLineRefund {
			reqs = append(reqs, l.OutRequestNo)
		}
	}
	pays, err := x.r.Store.PaymentsByNo(ctx, nos)
	if err != nil {
		return err
	}
	refs, err := x.r.Store.RefundsByOutRequestNo(ctx, reqs)
	if err != nil {
		return err
	}
	for _, l := range x.batch {
		if err := x.match(l, pays, refs); err != nil {
			return err
		}
	}
	x.batch = x.batch[:0]
	if x.p.Progress != nil {
		x.p.Progress(x.rep.BillLines)
	}
	return nil
}

func (x *run) match(l payment.BillLine, pays map[string]payment.Payment, refs map[string]payment.Refund) error {
	p, known := pays[l.OutTradeNo]
	if !known {
		return x.found(payment.AnomalyStatementUnknownTrade, "", l.OutTradeNo, lineSubject(l), l.TradeNo, l.Amount,
			fmt.Sprintf("bill line %d (%s) names out_trade_no %s, which is no local payment", l.LineNo, kindName(l.Kind), l.OutTradeNo))
	}
	if why := x.otherTrade(l, p, refs); why != "" {
		ref := l.OutTradeNo
		if l.Kind == payment.BillLineRefund {
			ref = l.OutRequestNo
		}
		return x.found(payment.AnomalyStatementTradeMismatch, p.TenantID, ref, lineSubject(l), l.TradeNo, l.Amount,
			fmt.Sprintf("bill line %d (%s) names out_trade_no %s with trade_no %s, but %s", l.LineNo, kindName(l.Kind), l.OutTradeNo, l.TradeNo, why))
	}
	if l.Kind == payment.BillLineTrade {
		if p.Status != payment.StatusPaid {
			return x.found(payment.AnomalyStatementPaidNotLocal, p.TenantID, p.PaymentNo, "", l.TradeNo, l.Amount,
				fmt.Sprintf("Alipay's bill has the payment (%s fen, trade_no %s); locally it is %s", fen(l.Amount), l.TradeNo, p.Status))
		}
		if p.Amount != l.Amount {
			return x.found(payment.AnomalyStatementAmountMismatch, p.TenantID, p.PaymentNo, "", l.TradeNo, l.Amount,
				fmt.Sprintf("bill amount %s fen, local amount %s fen", fen(l.Amount), fen(p.Amount)))
		}
		if want := p.Amount - l.MerchantDiscount - l.RedPacket; l.Received != want {
			return x.found(payment.AnomalyStatementDiscountMismatch, p.TenantID, p.PaymentNo, "", l.TradeNo, l.Received,
				fmt.Sprintf("bill 商家实收 %s fen; local amount %s fen less the line's 商家优惠 %s fen and 商家红包 %s fen is %s fen",
					fen(l.Received), fen(p.Amount), fen(l.MerchantDiscount), fen(l.RedPacket), fen(want)))
		}
		return nil
	}
	rf, ok := refs[l.OutRequestNo]
	switch {
	case !ok || rf.Status != payment.RefundSucceeded:
		state := "absent"
		if ok {
			state = rf.Status.String()
		}
		return x.found(payment.AnomalyStatementRefundNotLocal, p.TenantID, l.OutRequestNo, l.OutRequestNo, l.TradeNo, l.Amount,
			fmt.Sprintf("Alipay's bill has refund %s of payment %s (%s fen); locally it is %s", l.OutRequestNo, l.OutTradeNo, fen(l.Amount), state))
	case rf.Amount != l.Amount:
		return x.found(payment.AnomalyStatementRefundAmountMismatch, p.TenantID, l.OutRequestNo, l.OutRequestNo, l.TradeNo, l.Amount,
			fmt.Sprintf("refund %s of payment %s: bill amount %s fen, local amount %s fen", l.OutRequestNo, l.OutTradeNo, fen(l.Amount), fen(rf.Amount)))
	case l.Received != rf.Amount-l.MerchantDiscount-l.RedPacket:
		return x.found(payment.AnomalyStatementRefundDiscountMismatch, p.TenantID, l.OutRequestNo, l.OutRequestNo, l.TradeNo, l.Received,
			fmt.Sprintf("refund %s of payment %s: bill 商家实收 %s fen; local refund %s fen less the line's 商家优惠 %s fen and 商家红包 %s fen is %s fen",
				l.OutRequestNo, l.OutTradeNo, fen(l.Received), fen(rf.Amount), fen(l.MerchantDiscount), fen(l.RedPacket),
				fen(rf.Amount-l.MerchantDiscount-l.RedPacket)))
	}
	return nil
}

// otherTrade says why line l, which names payment p's out_trade_no, is not p's trade on
// this app (another charge of the same order number), or "" if it is: the payment was
// opened on this app, and its trade_no and, for a refund line, its refund's are the
// line's where they are known. Such a line matches nothing.
func (x *run) otherTrade(l payment.BillLine, p payment.Payment, refs map[string]payment.Refund) string {
	app := x.p.App
	if p.AlipayAppID != app.ID && (p.AlipayAppID != "" || !app.Default) {
		opened := p.AlipayAppID
		if opened == "" {
			opened = "the default app"
		}
		return fmt.Sprintf("payment %s was opened on %s, not on app %s", p.PaymentNo, opened, app.ID)
	}
	if p.TradeNo != "" && p.TradeNo != l.TradeNo {
		return fmt.Sprintf("payment %s is trade_no %s", p.PaymentNo, p.TradeNo)
	}
	if l.Kind == payment.BillLineRefund {
		if rf, ok := refs[l.OutRequestNo]; ok && rf.TradeNo != "" && rf.TradeNo != l.TradeNo {
			return fmt.Sprintf("refund %s (out_request_no %s) is of trade_no %s", rf.RefundNo, rf.OutRequestNo, rf.TradeNo)
		}
	}
	return ""
}

// localSide finds what the bill lacks and counts the local totals of the day.
func (x *run) localSide(sc payment.StatementScope) error {
	st := x.r.Store
	err := st.EachDuplicateBillLine(x.ctx, sc.AppID, sc.BillDate, func(l payment.BillLine, n int) error {
		ref := l.OutTradeNo
		if l.Kind == payment.BillLineRefund {
			ref = l.OutRequestNo
		}
		return x.found(payment.AnomalyStatementDuplicateLine, "", ref, lineSubject(l), "", 0,
			fmt.Sprintf("the bill has %d %s lines for %s", n, kindName(l.Kind), ref))
	})
	if err != nil {
		return err
	}
	err = st.EachPaymentNotInBill(x.ctx, sc, func(p payment.Payment) error {
		return x.found(payment.AnomalyStatementLocalNotInBill, p.TenantID, p.PaymentNo, "", p.TradeNo, p.Amount,
			fmt.Sprintf("PAID locally at %s (%s fen, trade_no %s) and absent from Alipay's bill", p.PaidAt.In(China).Format(time.DateTime), fen(p.Amount), p.TradeNo))
	})
	if err != nil {
		return err
	}
	err = st.EachRefundNotInBill(x.ctx, sc, func(rf payment.Refund) error {
		return x.found(payment.AnomalyStatementRefundNotInBill, rf.TenantID, rf.OutRequestNo, rf.OutRequestNo, rf.TradeNo, rf.Amount,
			fmt.Sprintf("refund %s of payment %s succeeded locally at %s (%s fen) and is absent from Alipay's bill",
				rf.RefundNo, rf.PaymentNo, rf.RefundedAt.In(China).Format(time.DateTime), fen(rf.Amount)))
	})
	if err != nil {
		return err
	}
	t, err := st.LocalStatementTotals(x.ctx, sc)
	if err != nil {
		return err
	}
	x.rep.LocalTradeCount, x.rep.LocalTradeFen = t.Trades, t.TradeFen
	x.rep.LocalRefundCount, x.rep.LocalRefundFen = t.Refunds, t.RefundFen
	return nil
}

// found records one discrepancy as an anomaly and counts it. It is about the bill line's
// reference (the out_trade_no, or the out_request_no of a refund line), recorded once per
// kind: subject is the out_request_no of the refund a refund line names, as every anomaly
// about a refund has it, and empty for a payment line, which is about the payment as a
// whole. The day is not part of it: a later day's run, or the same day's again, that
// meets the same discrepancy records nothing new.
func (x *run) found(kind, tenantID, ref, subject, tradeNo string, amount payment.Amount, detail string) error {
	if x.beat != nil {
		x.beat()
	}
	x.rep.Discrepancies++
	x.rep.ByKind[kind]++
	err := x.r.Anomalies.RecordAnomaly(x.ctx, payment.Anomaly{
		Kind: kind, TenantID: tenantID, PaymentNo: ref, Subject: subject, TradeNo: tradeNo, Amount: amount,
		Detail:    fmt.Sprintf("statement %s %s: %s", x.p.App.ID, x.p.BillDate, detail),
		CreatedAt: x.r.now(),
	})
	if err != nil {
		return fmt.Errorf("statement: record %s %s: %w", kind, ref, err)
	}
	x.r.log().WarnContext(x.ctx, "statement discrepancy", "kind", kind, "app_id", x.p.App.ID, "bill_date", x.p.BillDate,
		"tenant_id", tenantID, "ref", ref, "subject", subject, "trade_no", tradeNo, "amount_fen", int64(amount))
	return nil
}

// lineSubject is what an anomaly about bill line l is about within its payment: the
// refund a refund line names, or the payment as a whole.
func lineSubject(l payment.BillLine) string {
	if l.Kind == payment.BillLineRefund {
		return l.OutRequestNo
	}
	return ""
}

func kindName(k int) string {
	if k == payment.BillLineRefund {
		return "refund"
	}
	return "payment"
}

func fen(a payment.Amount) string { return fmt.Sprint(int64(a)) }

// IsNotAvailable reports whether err means Alipay has no bill for the day yet.
func IsNotAvailable(err error) bool { return errors.Is(err, payment.ErrBillNotAvailable) }
