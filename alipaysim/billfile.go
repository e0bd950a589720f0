package alipaysim

import (
	"archive/zip"
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"iter"
	"time"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/simplifiedchinese"
)

// Business types of a bill line (业务类型).
const (
	BillTypeTrade  = "交易"
	BillTypeRefund = "退款"
)

// BillDetailColumns is the header row of Alipay's trade bill detail file (业务明细), in
// Alipay's order.
var BillDetailColumns = []string{
	"支付宝交易号", "商户订单号", "业务类型", "商品名称", "创建时间", "完成时间",
	"门店编号", "门店名称", "操作员", "终端号", "对方账户",
	"订单金额（元）", "商家实收（元）", "支付宝红包（元）", "集分宝（元）", "支付宝优惠（元）",
	"商家优惠（元）", "券核销金额（元）", "券名称", "商家红包消费金额（元）", "卡消费金额（元）",
	"退款批次号/请求号", "服务费（元）", "分润（元）", "备注",
}

// billSummaryColumns is the header row of the summary file (业务明细(汇总)).
var billSummaryColumns = []string{
	"门店编号", "门店名称", "交易订单总笔数", "退款订单总笔数", "订单金额（元）", "商家实收（元）",
	"支付宝优惠（元）", "商家优惠（元）", "卡消费金额（元）", "服务费（元）", "分润（元）", "实收净额（元）",
}

// BillRow is one line of a trade bill: a payment (BillTypeTrade) or a refund
// (BillTypeRefund). Amounts are fen; a refund's are negative, as Alipay writes them.
type BillRow struct {
	TradeNo    string
	OutTradeNo string
	Type       string
	Subject    string
	CreatedAt  time.Time
	FinishedAt time.Time
	Buyer      string
	// AmountFen is 订单金额: the trade's total_amount, or the refund_amount of a refund.
	AmountFen int64
	// ReceivedFen is 商家实收: what the merchant received (or gave back). In the
	// simulator's model (see PayOptions) it is AmountFen less MerchantDiscountFen and
	// RedPacketFen, unless a planted fault says otherwise.
	ReceivedFen         int64
	MerchantDiscountFen int64 // 商家优惠
	RedPacketFen        int64 // 商家红包消费金额
	OutRequestNo        string
	FeeFen              int64 // 服务费: negative on a payment (charged), positive on a refund (returned)
	Memo                string
}

// BillHeader names the account and day of a bill.
type BillHeader struct {
	// Account is the merchant's PID, shown as 账号.
	Account string
	// Date is the China-time day the bill covers.
	Date time.Time
	// ExportedAt is shown as 导出时间.
	ExportedAt time.Time
}

// BillFileNames returns the names of the detail and summary entries inside a bill zip,
// as Alipay names them: <PID>_<yyyyMMdd>_业务明细.csv and …_业务明细(汇总).csv.
func BillFileNames(account string, day time.Time) (detail, summary string) {
	base := account + "_" + day.Format("20060102")
	return base + "_业务明细.csv", base + "_业务明细(汇总).csv"
}

// serviceFee is the simulator's 0.6% fee on what the merchant received, rounded to the
// fen.
func serviceFee(fen int64) int64 {
	if fen < 0 {
		return -serviceFee(-fen)
	}
	return (fen*6 + 500) / 1000
}

// WriteBill writes a trade bill zip in Alipay's format to w: a GBK-encoded detail file
// with the #-prefixed header and footer lines, then the summary file. rows is read once,
// so a bill of any size is written in constant memory.
func WriteBill(w io.Writer, h BillHeader, rows iter.Seq[BillRow]) error {
	zw := zip.NewWriter(w)
	detail, summary := BillFileNames(h.Account, h.Date)
	tot, err := writeDetail(zw, h, detail, rows)
	if err != nil {
		return err
	}
	if err := writeSummary(zw, h, summary, tot); err != nil {
		return err
	}
	return zw.Close()
}

// billTotals sums the detail lines, signed as written, for the footer and the summary.
type billTotals struct {
	trades, refunds               int
	tradeFen, refundFen           int64 // 订单金额
	tradeReceived, refundReceived int64 // 商家实收
	tradeDiscount, refundDiscount int64 // 商家优惠
	tradeFeeFen, refundFees       int64 // 服务费
}

// gbkEntry opens a zip entry whose name and content are GBK, as Alipay's are (the name
// without the UTF-8 flag).
func gbkEntry(zw *zip.Writer, name string, at time.Time) (*bufio.Writer, error) {
	gbkName, err := simplifiedchinese.GBK.NewEncoder().String(name)
	if err != nil {
		return nil, fmt.Errorf("bill entry name: %w", err)
	}
	f, err := zw.CreateHeader(&zip.FileHeader{Name: gbkName, NonUTF8: true, Method: zip.Deflate, Modified: at})
	if err != nil {
		return nil, err
	}
	// Characters GBK cannot carry (emoji) become '?', as Alipay's export does.
	enc := encoding.ReplaceUnsupported(simplifiedchinese.GBK.NewEncoder())
	return bufio.NewWriterSize(enc.Writer(f), 32<<10), nil
}

func chinaDay(t time.Time) string { return t.Format("2006年01月02日 15:04:05") }

func writeDetail(zw *zip.Writer, h BillHeader, name string, rows iter.Seq[BillRow]) (billTotals, error) {
	var tot billTotals
	bw, err := gbkEntry(zw, name, h.ExportedAt)
	if err != nil {
		return tot, err
	}
	start := time.Date(h.Date.Year(), h.Date.Month(), h.Date.Day(), 0, 0, 0, 0, h.Date.Location())
	fmt.Fprintf(bw, "#支付宝业务明细查询\n#账号：[%s]\n#起始日期：[%s]   终止日期：[%s]\n", h.Account, chinaDay(start), chinaDay(start.AddDate(0, 0, 1)))
	fmt.Fprintf(bw, "#-----------------------------------------业务明细列表----------------------------------------\n")
	cw := csv.NewWriter(bw)
	if err := cw.Write(BillDetailColumns); err != nil {
		return tot, err
	}
	rec := make([]string, len(BillDetailColumns))
	for r := range rows {
		fillDetail(rec, r)
		if err := cw.Write(rec); err != nil {
			return tot, err
		}
		if r.Type == BillTypeRefund {
			tot.refunds++
			tot.refundFen += r.AmountFen
			tot.refundReceived += r.ReceivedFen
			tot.refundDiscount += r.MerchantDiscountFen
			tot.refundFees += r.FeeFen
		} else {
			tot.trades++
			tot.tradeFen += r.AmountFen
			tot.tradeReceived += r.ReceivedFen
			tot.tradeDiscount += r.MerchantDiscountFen
			tot.tradeFeeFen += r.FeeFen
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return tot, err
	}
	fmt.Fprintf(bw, "#-----------------------------------------业务明细列表结束------------------------------------\n")
	fmt.Fprintf(bw, "#交易合计：%d笔，商家实收共%s元，商家优惠共%s元\n", tot.trades, formatSigned(tot.tradeReceived), formatSigned(tot.tradeDiscount))
	fmt.Fprintf(bw, "#退款合计：%d笔，商家实收退款共%s元，商家优惠退款共%s元\n", tot.refunds, formatSigned(tot.refundReceived), formatSigned(tot.refundDiscount))
	fmt.Fprintf(bw, "#导出时间：[%s]\n", chinaDay(h.ExportedAt))
	return tot, bw.Flush()
}

// fillDetail writes r into rec in BillDetailColumns order. Alipay pads most values with a
// tab; readers trim it.
func fillDetail(rec []string, r BillRow) {
	const zero = "0.00"
	for i := range rec {
		rec[i] = ""
	}
	rec[0], rec[1], rec[2], rec[3] = r.TradeNo+"\t", r.OutTradeNo+"\t", r.Type, r.Subject
	rec[4], rec[5] = r.CreatedAt.Format(timeLayout), r.FinishedAt.Format(timeLayout)
	rec[10] = r.Buyer
	rec[11], rec[12] = formatSigned(r.AmountFen), formatSigned(r.ReceivedFen)
	for _, i := range []int{13, 14, 15, 17, 20, 23} {
		rec[i] = zero
	}
	rec[16], rec[19] = formatSigned(r.MerchantDiscountFen), formatSigned(r.RedPacketFen)
	rec[21] = r.OutRequestNo
	if r.OutRequestNo != "" {
		rec[21] += "\t"
	}
	rec[22] = formatSigned(r.FeeFen)
	rec[24] = r.Memo
}

func writeSummary(zw *zip.Writer, h BillHeader, name string, tot billTotals) error {
	bw, err := gbkEntry(zw, name, h.ExportedAt)
	if err != nil {
		return err
	}
	start := time.Date(h.Date.Year(), h.Date.Month(), h.Date.Day(), 0, 0, 0, 0, h.Date.Location())
	fmt.Fprintf(bw, "#支付宝业务汇总查询\n#账号：[%s]\n#起始日期：[%s]   终止日期：[%s]\n", h.Account, chinaDay(start), chinaDay(start.AddDate(0, 0, 1)))
	fmt.Fprintf(bw, "#-----------------------------------------业务汇总列表----------------------------------------\n")
	cw := csv.NewWriter(bw)
	// Each amount is the day's net (payments plus the negative refunds) of its detail
	// column; the summary has no column of its own for red packets, which are the rest
	// of 订单金额 − 商家实收. 实收净额 is what the merchant keeps after the fees.
	amount := tot.tradeFen + tot.refundFen
	received := tot.tradeReceived + tot.refundReceived
	discount := tot.tradeDiscount + tot.refundDiscount
	fees := tot.tradeFeeFen + tot.refundFees
	_ = cw.Write(billSummaryColumns)
	_ = cw.Write([]string{"", "合计", fmt.Sprint(tot.trades), fmt.Sprint(tot.refunds), formatSigned(amount), formatSigned(received),
		"0.00", formatSigned(discount), "0.00", formatSigned(fees), "0.00", formatSigned(received + fees)})
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	fmt.Fprintf(bw, "#-----------------------------------------业务汇总列表结束------------------------------------\n")
	fmt.Fprintf(bw, "#导出时间：[%s]\n", chinaDay(h.ExportedAt))
	return bw.Flush()
}

// formatSigned formats fen as yuan with a leading minus for negative amounts.
func formatSigned(fen int64) string {
	if fen < 0 {
		return "-" + formatYuan(-fen)
	}
	return formatYuan(fen)
}
