package payment

import (
	"context"
	"errors"
	"time"
)

// ErrBillNotAvailable means Alipay has no bill for the day (isp.bill_not_exist): not
// published yet, or no bill at all.
var ErrBillNotAvailable = errors.New("bill not available")

// BillSource is the channel capability of downloading a day's trade bill. It is separate
// from Gateway so that a gateway without it still is one.
type BillSource interface {
	// BillDownloadURL returns the short-lived download URL of the trade bill of billDate
	// (yyyy-MM-dd, China time). A day Alipay has no bill for is an error wrapping
	// ErrBillNotAvailable.
	BillDownloadURL(ctx context.Context, billDate string) (string, error)
}

// Anomaly kinds of the daily statement reconciliation. Each is recorded once per
// (kind, reference, subject): the reference (the anomaly's payment_no) is the out_trade_no,
// or the out_request_no for refund kinds; the subject is the out_request_no of a refund
// line, empty for a payment line.
const (
	// AnomalyStatementPaidNotLocal: the bill has a payment whose local record is not PAID (长款).
	AnomalyStatementPaidNotLocal = "statement_paid_not_local"
	// AnomalyStatementLocalNotInBill: a local PAID payment of the day is not in the bill (短款).
	AnomalyStatementLocalNotInBill = "statement_local_not_in_bill"
	// AnomalyStatementAmountMismatch: the bill's amount of a payment differs from the local one.
	AnomalyStatementAmountMismatch = "statement_amount_mismatch"
	// AnomalyStatementDiscountMismatch: what the bill says the merchant received of a
	// payment (商家实收) is not its local amount less the merchant-funded discounts the line
	// declares (商家优惠, 商家红包): money is missing or extra beyond any discount.
	AnomalyStatementDiscountMismatch = "statement_discount_mismatch"
	// AnomalyStatementRefundNotLocal: the bill has a refund that is not SUCCEEDED locally.
	AnomalyStatementRefundNotLocal = "statement_refund_not_local"
	// AnomalyStatementRefundNotInBill: a local refund that succeeded that day is not in the bill.
	AnomalyStatementRefundNotInBill = "statement_refund_not_in_bill"
	// AnomalyStatementRefundAmountMismatch: the bill's amount of a refund differs from the local one.
	AnomalyStatementRefundAmountMismatch = "statement_refund_amount_mismatch"
	// AnomalyStatementRefundDiscountMismatch: what the bill says the merchant gave back
	// for a refund (商家实收) is not the local refund less the discounts the line declares.
	AnomalyStatementRefundDiscountMismatch = "statement_refund_discount_mismatch"
	// AnomalyStatementUnknownTrade: a bill line names an out_trade_no this system never created.
	AnomalyStatementUnknownTrade = "statement_unknown_trade"
	// AnomalyStatementDuplicateLine: the bill carries the same payment or refund twice.
	AnomalyStatementDuplicateLine = "statement_duplicate_line"
	// AnomalyStatementTradeMismatch: a bill line names a local payment's out_trade_no, but
	// not its Alipay trade_no or not the app it was opened on: another charge of the same
	// order number (on another app, or a trade the local record does not know). The line
	// matches nothing; the reference is the out_trade_no, or the out_request_no of a refund line.
	AnomalyStatementTradeMismatch = "statement_trade_mismatch"
)

// Statement report statuses.
const (
	StatementReconciled = "reconciled" // the bill was downloaded and every line matched or recorded
	StatementNoBill     = "no_bill"    // Alipay never published a bill; the day was reconciled as empty
	StatementQuiet      = "quiet"      // no bill, and no local payment or refund on the app: a day without trades
)

// StatementReport is the result of reconciling one app's bill of one day. Fen totals are
// positive; the net of each side is payments minus refunds. The bill's are its 订单金额,
// what the buyers were asked for and what was refunded to them, which is what the local
// amounts are: merchant-funded discounts (the bill's 商家实收 is lower by them) are
// checked line by line, not in these totals.
type StatementReport struct {
	AppID    string `json:"app_id"`
	BillDate string `json:"bill_date"`
	Status   string `json:"status"`

	BillLines       int   `json:"bill_lines"`
	BillTradeCount  int   `json:"bill_trade_count"`
	BillTradeFen    int64 `json:"bill_trade_fen"`
	BillRefundCount int   `json:"bill_refund_count"`
	BillRefundFen   int64 `json:"bill_refund_fen"`
	BillFeeFen      int64 `json:"bill_fee_fen"`

	LocalTradeCount  int   `json:"local_trade_count"`
	LocalTradeFen    int64 `json:"local_trade_fen"`
	LocalRefundCount int   `json:"local_refund_count"`
	LocalRefundFen   int64 `json:"local_refund_fen"`

	// DiffFen is the bill's net minus the local net.
	DiffFen int64 `json:"diff_fen"`
	// Discrepancies counts every discrepancy the run found, by kind in ByKind; a re-run
	// counts them again but records no anomaly twice.
	Discrepancies int            `json:"discrepancies"`
	ByKind        map[string]int `json:"by_kind,omitempty"`

	Runs       int       `json:"runs"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// BillNet is the bill's payments minus refunds, in fen.
func (r StatementReport) BillNet() int64 { return r.BillTradeFen - r.BillRefundFen }

// LocalNet is the local payments minus refunds of the day, in fen.
func (r StatementReport) LocalNet() int64 { return r.LocalTradeFen - r.LocalRefundFen }

// Bill line kinds.
const (
	BillLineTrade  = 1 // 交易: a payment
	BillLineRefund = 2 // 退款: a refund
)

// BillLine is one line of a downloaded trade bill. Its amounts are positive for both
// kinds (the bill writes refunds negative), except Fee.
type BillLine struct {
	LineNo       int
	Kind         int
	TradeNo      string
	OutTradeNo   string
	OutRequestNo string
	Subject      string
	FinishedAt   time.Time
	// Amount is 订单金额: the payment's total_amount, or the refund's amount.
	Amount Amount
	// Received is 商家实收: what the merchant received (or gave back). It is Amount less
	// the merchant-funded MerchantDiscount (商家优惠) and RedPacket (商家红包消费金额);
	// Alipay-funded discounts lower what the buyer paid, not this.
	Received         Amount
	MerchantDiscount Amount
	RedPacket        Amount
	Fee              Amount // signed, as the bill writes it
}

// StatementScope is the local side of one app's bill of one day: the payments of the
// app's tenants paid, and their refunds succeeded, in [From, To).
type StatementScope struct {
	AppID    string
	BillDate string // yyyy-MM-dd
	// DefaultApp also covers tenants that name no Alipay app (they use the global one).
	DefaultApp bool
	From, To   time.Time
}

// StatementTotals counts the local side of a day.
type StatementTotals struct {
	Trades    int
	TradeFen  int64
	Refunds   int
	RefundFen int64
}

// StatementRetention deletes what reconciliation keeps for a while: staged bill lines
// and old reports.
type StatementRetention interface {
	// PurgeStatementLines deletes up to limit staged lines of days before before
	// (yyyy-MM-dd), of every app, oldest first, and says how many it deleted. It never
	// touches an (app, day) whose LockStatement another run holds.
	PurgeStatementLines(ctx context.Context, before string, limit int) (int64, error)
	// PurgeStatementReports deletes up to limit reports of an app's days before before.
	PurgeStatementReports(ctx context.Context, appID, before string, limit int) (int64, error)
}

// StatementStore is what reconciliation needs from storage.
type StatementStore interface {
	// LockStatement serialises runs of one (app, day) across processes. The run works
	// under the returned context, which is cancelled if the lock is lost.
	LockStatement(ctx context.Context, appID, billDate string) (held context.Context, unlock func(), err error)
	// ClearBillLines forgets the staged lines of a day; StageBillLines adds some.
	ClearBillLines(ctx context.Context, appID, billDate string) error
	StageBillLines(ctx context.Context, appID, billDate string, lines []BillLine) error
	// PaymentsByNo and RefundsByOutRequestNo look a batch of bill lines up locally.
	PaymentsByNo(ctx context.Context, paymentNos []string) (map[string]Payment, error)
	RefundsByOutRequestNo(ctx context.Context, outRequestNos []string) (map[string]Refund, error)
	// EachPaymentNotInBill and EachRefundNotInBill stream the local side of the scope
	// that no staged line names.
	EachPaymentNotInBill(ctx context.Context, sc StatementScope, fn func(Payment) error) error
	EachRefundNotInBill(ctx context.Context, sc StatementScope, fn func(Refund) error) error
	// EachDuplicateBillLine streams the staged (kind, reference) pairs that appear more than once.
	EachDuplicateBillLine(ctx context.Context, appID, billDate string, fn func(l BillLine, n int) error) error
	LocalStatementTotals(ctx context.Context, sc StatementScope) (StatementTotals, error)
	// SaveStatementReport inserts or updates the one report of (AppID, BillDate) and
	// returns it as stored (Runs counts the runs).
	SaveStatementReport(ctx context.Context, r StatementReport) (StatementReport, error)
	GetStatementReport(ctx context.Context, appID, billDate string) (StatementReport, error)
}
