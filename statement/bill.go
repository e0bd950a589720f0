// Package statement reconciles Alipay's daily trade bill (T+1 对账) with the payments
// and refunds of the day: it downloads the bill to a temporary file, reads it as a
// stream, matches its lines in batches against the store, and records every discrepancy
// as an anomaly of its own kind.
package statement

import (
	"archive/zip"
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/paykit/paykit/payment"
)

// China is Alipay's time zone (UTC+8, no daylight saving), without tzdata.
var China = time.FixedZone("CST", 8*3600)

// Footer is what the detail file's # footer lines declare, to check the lines against.
type Footer struct {
	Found     bool
	Trades    int
	TradeFen  int64 // signed, as written
	Refunds   int
	RefundFen int64 // signed (negative), as written
}

// ErrMalformedBill means the bill is not a readable Alipay trade bill.
var ErrMalformedBill = errors.New("statement: malformed bill")

var (
	footerTrades  = regexp.MustCompile(`^#交易合计：(\d+)笔，商家实收：(-?[0-9.]+)元`)
	footerRefunds = regexp.MustCompile(`^#退款合计：(\d+)笔，商家实收：(-?[0-9.]+)元`)
)

// columns are the detail columns reconciliation reads, found by name in the header row.
type columns struct {
	tradeNo, outTradeNo, kind, subject, finished, amount, received, requestNo, fee int
}

func (c columns) max() int {
	return max(c.tradeNo, c.outTradeNo, c.kind, c.subject, c.finished, c.amount, c.received, c.requestNo, c.fee)
}

func findColumns(header []string) (columns, error) {
	idx := map[string]int{}
	for i, h := range header {
		idx[strings.TrimSpace(h)] = i
	}
	get := func(name string) (int, error) {
		i, ok := idx[name]
		if !ok {
			return 0, fmt.Errorf("%w: no column %s", ErrMalformedBill, name)
		}
		return i, nil
	}
	var c columns
	var errs []error
	for _, f := range []struct {
		p    *int
		name string
	}{
		{&c.tradeNo, "支付宝交易号"}, {&c.outTradeNo, "商户订单号"}, {&c.kind, "业务类型"}, {&c.subject, "商品名称"},
		{&c.finished, "完成时间"}, {&c.amount, "订单金额（元）"}, {&c.received, "商家实收（元）"},
		{&c.requestNo, "退款批次号/请求号"}, {&c.fee, "服务费（元）"},
	} {
		var err error
		*f.p, err = get(f.name)
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// entryName decodes a zip entry name, which Alipay writes in GBK without the UTF-8 flag.
func entryName(f *zip.File) string {
	if !f.NonUTF8 && utf8.ValidString(f.Name) {
		return f.Name
	}
	if s, err := simplifiedchinese.GBK.NewDecoder().String(f.Name); err == nil {
		return s
	}
	return f.Name
}

// ReadBill reads the detail file of the bill zip at path and calls fn for every line,
// in order, holding one line at a time. It returns the footer's totals.
func ReadBill(path string, fn func(payment.BillLine) error) (Footer, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return Footer{}, fmt.Errorf("%w: %v", ErrMalformedBill, err)
	}
	defer zr.Close()
	var detail *zip.File
	for _, f := range zr.File {
		name := entryName(f)
		if strings.HasSuffix(name, "业务明细.csv") {
			detail = f
		}
	}
	if detail == nil {
		return Footer{}, fmt.Errorf("%w: no 业务明细.csv in the zip", ErrMalformedBill)
	}
	rc, err := detail.Open()
	if err != nil {
		return Footer{}, fmt.Errorf("%w: %v", ErrMalformedBill, err)
	}
	defer rc.Close()
	return readDetail(rc, fn)
}

func readDetail(r io.Reader, fn func(payment.BillLine) error) (Footer, error) {
	var foot Footer
	cr := csv.NewReader(bufio.NewReaderSize(simplifiedchinese.GBK.NewDecoder().Reader(r), 64<<10))
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	cr.ReuseRecord = true
	var (
		cols   columns
		header bool
		lineNo int
	)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return foot, fmt.Errorf("%w: %v", ErrMalformedBill, err)
		}
		if len(rec) > 0 && strings.HasPrefix(rec[0], "#") {
			comment := strings.Join(rec, ",")
			if m := footerTrades.FindStringSubmatch(comment); m != nil {
				foot.Found = true
				foot.Trades, _ = strconv.Atoi(m[1])
				foot.TradeFen, _ = parseSignedYuan(m[2])
			}
			if m := footerRefunds.FindStringSubmatch(comment); m != nil {
				foot.Refunds, _ = strconv.Atoi(m[1])
				foot.RefundFen, _ = parseSignedYuan(m[2])
			}
			continue
		}
		if !header {
			if cols, err = findColumns(rec); err != nil {
				return foot, err
			}
			header = true
			continue
		}
		if len(rec) <= cols.max() {
			if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
				continue
			}
			return foot, fmt.Errorf("%w: line %d has %d fields", ErrMalformedBill, lineNo+1, len(rec))
		}
		lineNo++
		l, err := parseLine(rec, cols, lineNo)
		if err != nil {
			return foot, err
		}
		if err := fn(l); err != nil {
			return foot, err
		}
	}
	if !header {
		return foot, fmt.Errorf("%w: no header row", ErrMalformedBill)
	}
	return foot, nil
}

func parseLine(rec []string, c columns, lineNo int) (payment.BillLine, error) {
	f := func(i int) string { return strings.TrimSpace(rec[i]) }
	l := payment.BillLine{
		LineNo: lineNo, TradeNo: f(c.tradeNo), OutTradeNo: f(c.outTradeNo), OutRequestNo: f(c.requestNo),
		Subject: f(c.subject),
	}
	switch f(c.kind) {
	case "交易":
		l.Kind = payment.BillLineTrade
	case "退款":
		l.Kind = payment.BillLineRefund
	default:
		return l, fmt.Errorf("%w: line %d: unknown 业务类型 %q", ErrMalformedBill, lineNo, f(c.kind))
	}
	col := c.amount
	if l.Kind == payment.BillLineRefund {
		col = c.received
		if l.OutRequestNo == "" {
			l.OutRequestNo = l.OutTradeNo // Alipay's default request number of a full refund
		}
	}
	fen, err := parseSignedYuan(f(col))
	if err != nil {
		return l, fmt.Errorf("%w: line %d: amount %q", ErrMalformedBill, lineNo, f(col))
	}
	l.Amount = payment.Amount(abs(fen))
	if fee := f(c.fee); fee != "" {
		v, err := parseSignedYuan(fee)
		if err != nil {
			return l, fmt.Errorf("%w: line %d: fee %q", ErrMalformedBill, lineNo, fee)
		}
		l.Fee = payment.Amount(v)
	}
	if t := f(c.finished); t != "" {
		if l.FinishedAt, err = time.ParseInLocation("2006-01-02 15:04:05", t, China); err != nil {
			return l, fmt.Errorf("%w: line %d: 完成时间 %q", ErrMalformedBill, lineNo, t)
		}
	}
	return l, nil
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// parseSignedYuan parses "-12.30" into fen without floating point.
func parseSignedYuan(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	a, err := payment.ParseYuan(strings.TrimPrefix(s, "-"))
	if err != nil {
		return 0, err
	}
	if neg {
		return -int64(a), nil
	}
	return int64(a), nil
}
