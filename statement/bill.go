// Package statement reconciles Alipay's daily trade bill (T+1 对账) with the payments
// and refunds of the day: it downloads the bill to a temporary file, verifies it whole
// in a first streaming pass, reads it again as a stream, matches its lines in batches
// against the store, and records every discrepancy as an anomaly of its own kind.
package statement

import (
	"archive/zip"
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
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
// Its amounts total the lines' 商家实收 and 商家优惠, signed as written (refunds negative).
type Footer struct {
	Found             bool
	Trades            int
	TradeFen          int64 // 商家实收 of the payments
	TradeDiscountFen  int64 // 商家优惠 of the payments
	Refunds           int
	RefundFen         int64 // 商家实收 of the refunds
	RefundDiscountFen int64 // 商家优惠 of the refunds
	// discounts says the footer declared the 商家优惠 totals (an older one did not).
	discounts bool
}

// ErrMalformedBill means the bill is not a readable Alipay trade bill. A bill refused as
// hostile (two detail files, an entry inflating past MaxEntryBytes, a record past
// MaxRecordBytes) is one too: the run fails and is retried like any damaged download.
var ErrMalformedBill = errors.New("statement: malformed bill")

// Bounds on what reading a bill may take, far above any real day's: the download is
// bounded by Reconciler.MaxBillBytes, but a small zip can inflate without end.
const (
	// MaxEntryBytes bounds the decompressed size of each file in the zip. A detail line is
	// about 300 bytes, so this is over 25 million lines, a merchant at 300 payments a
	// second all day; the lines are streamed, so it bounds the time a hostile zip can
	// take, not memory.
	MaxEntryBytes = 8 << 30
	// MaxRecordBytes bounds one CSV record, a line or a quoted field spanning lines
	// (Alipay's lines are well under 1 KiB).
	MaxRecordBytes = 64 << 10
)

// limits are the bounds a read applies; tests lower them.
type limits struct {
	entry  int64
	record int64
}

// The footer lines as Alipay writes them ("#交易合计：6笔，商家实收共0.06元，商家优惠共0.00元",
// "#退款合计：4笔，商家实收退款共-0.04元，商家优惠退款共0.00元"), and in the colon form the
// simulator wrote before.
var (
	footerTrades  = regexp.MustCompile(`^#交易合计：(\d+)笔，商家实收(?:共|：)(-?[0-9.]+)元(?:，商家优惠(?:共|：)(-?[0-9.]+)元)?`)
	footerRefunds = regexp.MustCompile(`^#退款合计：(\d+)笔，商家实收(?:退款共|：)(-?[0-9.]+)元(?:，商家优惠(?:退款共|：)(-?[0-9.]+)元)?`)
)

// columns are the detail columns reconciliation reads, found by name in the header row.
type columns struct {
	tradeNo, outTradeNo, kind, subject, finished, amount, received, discount, redPacket, requestNo, fee int
}

func (c columns) max() int {
	return max(c.tradeNo, c.outTradeNo, c.kind, c.subject, c.finished, c.amount, c.received, c.discount, c.redPacket, c.requestNo, c.fee)
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
		{&c.discount, "商家优惠（元）"}, {&c.redPacket, "商家红包消费金额（元）"},
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

// lineSums are the detail lines' totals, signed as written, to check the footer and the
// summary with.
type lineSums struct {
	trades, refunds               int
	tradeReceived, refundReceived int64 // 商家实收
	tradeDiscount, refundDiscount int64 // 商家优惠
	amount, fee                   int64 // 订单金额 and 服务费, payments and refunds together
}

func (s *lineSums) add(kind int, amount, received, discount, fee int64) {
	if kind == payment.BillLineRefund {
		s.refunds++
		s.refundReceived += received
		s.refundDiscount += discount
	} else {
		s.trades++
		s.tradeReceived += received
		s.tradeDiscount += discount
	}
	s.amount += amount
	s.fee += fee
}

// ReadBill reads the detail file of the bill zip at path and calls fn for every line,
// in order, holding one line at a time. It returns the footer's totals. A bill whose
// lines disagree with its own footer, or with its summary file (业务明细(汇总)), is
// refused as malformed: it is damaged or truncated, and its lines are not to be trusted.
// fn sees no line of such a bill: ReadBill verifies the whole bill in a first pass
// (OpenBill) and streams its lines to fn in a second (Bill.Lines).
//
// A hostile bill is refused as malformed too: a zip with two detail or two summary files
// (which one Alipay meant is anyone's guess), a file inflating past MaxEntryBytes, a
// record past MaxRecordBytes.
func ReadBill(path string, fn func(payment.BillLine) error) (Footer, error) {
	return readBill(path, defaultLimits, fn)
}

var defaultLimits = limits{entry: MaxEntryBytes, record: MaxRecordBytes}

func readBill(path string, lim limits, fn func(payment.BillLine) error) (Footer, error) {
	b, err := openBill(path, lim, nil)
	if err != nil {
		return Footer{}, err
	}
	defer b.Close()
	return b.Footer(), b.Lines(fn)
}

// Bill is a bill zip that OpenBill verified whole: its detail lines agree with their
// footer and with the summary file. Lines streams them again; nothing is held in memory
// but the line being read.
type Bill struct {
	zr     *zip.ReadCloser
	detail *zip.File
	lim    limits
	foot   Footer
	sums   lineSums
}

// OpenBill opens the bill zip at path and verifies it in one streaming pass over its
// detail and summary files (see ReadBill): a bill refused as malformed is an error
// wrapping ErrMalformedBill, before any of its lines reaches anyone. Close it when done.
func OpenBill(path string) (*Bill, error) {
	return openBill(path, defaultLimits, nil)
}

// checkEntries bounds the zip's entries before archive/zip reads its directory.
func checkEntries(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedBill, err)
	}
	defer f.Close()
	return checkZipEntries(f, MaxZipEntries)
}

// openBill is OpenBill within lim, calling beat (if set) on every line of the first pass.
func openBill(path string, lim limits, beat func()) (*Bill, error) {
	if err := checkEntries(path); err != nil {
		return nil, err
	}
	zr, err := zip.OpenReader(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedBill, err)
	}
	b := &Bill{zr: zr, lim: lim}
	if err := b.verify(beat); err != nil {
		_ = zr.Close()
		return nil, err
	}
	return b, nil
}

// verify finds the detail and summary files and checks the detail lines against the
// footer and the summary, reading each file once.
func (b *Bill) verify(beat func()) error {
	var summary *zip.File
	for _, f := range b.zr.File {
		name := entryName(f)
		var (
			slot **zip.File
			what string
		)
		switch {
		case strings.HasSuffix(name, "业务明细.csv"):
			slot, what = &b.detail, "detail (业务明细.csv)"
		case strings.HasSuffix(name, "业务明细(汇总).csv"), strings.HasSuffix(name, "业务明细（汇总）.csv"):
			slot, what = &summary, "summary (业务明细(汇总).csv)"
		default:
			continue
		}
		if *slot != nil {
			return fmt.Errorf("%w: the zip holds two %s files, %s and %s", ErrMalformedBill, what, entryName(*slot), name)
		}
		*slot = f
	}
	if b.detail == nil {
		return fmt.Errorf("%w: no 业务明细.csv in the zip", ErrMalformedBill)
	}
	if summary == nil {
		return fmt.Errorf("%w: no 业务明细(汇总).csv in the zip", ErrMalformedBill)
	}
	foot, err := readEntry(b.detail, b.lim, func(r *billCSV) (Footer, error) {
		return readDetail(r, &b.sums, func(payment.BillLine) error {
			if beat != nil {
				beat()
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	b.foot = foot
	if err := checkFooter(foot, b.sums); err != nil {
		return err
	}
	tot, err := readEntry(summary, b.lim, readSummary)
	if err != nil {
		return err
	}
	return checkSummary(tot, b.sums)
}

// Footer returns what the verified bill's footer declares.
func (b *Bill) Footer() Footer { return b.foot }

// Lines reads the verified detail file again and calls fn for every line, in order.
// A second pass that reads other lines than the first (the file changed under it) is
// refused as malformed once it is read.
func (b *Bill) Lines(fn func(payment.BillLine) error) error {
	var sums lineSums
	foot, err := readEntry(b.detail, b.lim, func(r *billCSV) (Footer, error) { return readDetail(r, &sums, fn) })
	if err != nil {
		return err
	}
	if foot != b.foot || sums != b.sums {
		return fmt.Errorf("%w: %s read differently the second time", ErrMalformedBill, entryName(b.detail))
	}
	return nil
}

// Close closes the zip.
func (b *Bill) Close() error { return b.zr.Close() }

// readEntry opens one entry of the zip and reads it as GBK-encoded CSV with read, within
// lim. An entry that says it is larger than lim.entry is refused unread; one that
// inflates past it anyway (archive/zip stops at the declared size, this does not rely
// on it) is refused when it gets there.
func readEntry[T any](f *zip.File, lim limits, read func(*billCSV) (T, error)) (T, error) {
	var zero T
	name := entryName(f)
	if f.UncompressedSize64 > uint64(lim.entry) {
		return zero, fmt.Errorf("%w: %s inflates to %d bytes, more than the %d a bill may", ErrMalformedBill, name, f.UncompressedSize64, lim.entry)
	}
	rc, err := f.Open()
	if err != nil {
		return zero, fmt.Errorf("%w: %s: %v", ErrMalformedBill, name, err)
	}
	defer rc.Close()
	capped := &capReader{r: io.LimitReader(rc, lim.entry+1), max: lim.entry, name: name}
	return read(newBillCSV(name, capped, lim.record))
}

// capReader fails once more than max bytes were read: a zip entry inflating past its
// bound is refused as soon as it passes it, not read to its end.
type capReader struct {
	r    io.Reader // limited to max+1 bytes: the one past the bound is the proof
	max  int64
	read int64
	name string
}

func (c *capReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += int64(n)
	if c.read > c.max {
		return n - int(c.read-c.max), fmt.Errorf("%w: %s inflates past the %d bytes a bill may", ErrMalformedBill, c.name, c.max)
	}
	return n, err
}

// billCSV reads one GBK-encoded CSV file of a bill, a record of at most a bound at a time.
type billCSV struct {
	name string
	cr   *csv.Reader
	rec  *recordCap
}

// csvBuffer is the read-ahead between the decoder and the CSV reader.
const csvBuffer = 64 << 10

// newBillCSV reads r with lazy quotes (Alipay's exporter is not known to double every
// quote in a subject), which a record bound keeps from swallowing the rest of the file
// into one field after a stray quote. A quote that merges lines within the bound loses
// them, which the footer's count then refuses.
func newBillCSV(name string, r io.Reader, maxRecord int64) *billCSV {
	rc := &recordCap{r: simplifiedchinese.GBK.NewDecoder().Reader(r), max: maxRecord + csvBuffer, name: name}
	cr := csv.NewReader(bufio.NewReaderSize(rc, csvBuffer))
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	cr.ReuseRecord = true
	return &billCSV{name: name, cr: cr, rec: rc}
}

// Read returns the next record, io.EOF at the end, or an error wrapping ErrMalformedBill.
func (b *billCSV) Read() ([]string, error) {
	b.rec.start = b.cr.InputOffset()
	rec, err := b.cr.Read()
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, ErrMalformedBill):
		return rec, err
	}
	return rec, fmt.Errorf("%w: %s: %v", ErrMalformedBill, b.name, err)
}

// recordCap fails a read that would take the current record past max bytes: the CSV
// reader holds a record whole, so one unterminated quote (or a file without a newline)
// would otherwise have it buffer everything after. Its bytes are those the CSV reader
// counts (decoded), and max includes the read-ahead, which may hold later records.
type recordCap struct {
	r         io.Reader
	max       int64
	name      string
	delivered int64
	start     int64 // the offset the current record starts at
}

func (c *recordCap) Read(p []byte) (int, error) {
	if c.delivered-c.start > c.max {
		return 0, fmt.Errorf("%w: %s: a line or quoted field longer than %d bytes (an unterminated quote?)", ErrMalformedBill, c.name, c.max-csvBuffer)
	}
	n, err := c.r.Read(p)
	c.delivered += int64(n)
	return n, err
}

// readDetail reads the detail file's lines into fn, their sums into sums, and returns its
// footer.
func readDetail(cr *billCSV, sums *lineSums, fn func(payment.BillLine) error) (Footer, error) {
	var foot Footer
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
			return foot, err
		}
		if len(rec) > 0 && strings.HasPrefix(rec[0], "#") {
			if err := foot.read(strings.Join(rec, ",")); err != nil {
				return foot, err
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
		l, signed, err := parseLine(rec, cols, lineNo)
		if err != nil {
			return foot, err
		}
		sums.add(l.Kind, signed.amount, signed.received, signed.discount, int64(l.Fee))
		if err := fn(l); err != nil {
			return foot, err
		}
	}
	if !header {
		return foot, fmt.Errorf("%w: no header row", ErrMalformedBill)
	}
	return foot, nil
}

// read takes the totals of a footer comment line, if it is one.
func (foot *Footer) read(comment string) error {
	if m := footerTrades.FindStringSubmatch(comment); m != nil {
		foot.Found = true
		if err := parseFooter(m, &foot.Trades, &foot.TradeFen, &foot.TradeDiscountFen, &foot.discounts); err != nil {
			return fmt.Errorf("%w: footer %q: %v", ErrMalformedBill, comment, err)
		}
	}
	if m := footerRefunds.FindStringSubmatch(comment); m != nil {
		if err := parseFooter(m, &foot.Refunds, &foot.RefundFen, &foot.RefundDiscountFen, &foot.discounts); err != nil {
			return fmt.Errorf("%w: footer %q: %v", ErrMalformedBill, comment, err)
		}
	}
	return nil
}

// parseFooter reads one footer line's count, 商家实收 and, if declared, 商家优惠.
func parseFooter(m []string, count *int, received, discount *int64, declared *bool) error {
	var err error
	if *count, err = strconv.Atoi(m[1]); err != nil {
		return err
	}
	if *received, err = parseSignedYuan(m[2]); err != nil {
		return err
	}
	if m[3] != "" {
		*declared = true
		if *discount, err = parseSignedYuan(m[3]); err != nil {
			return err
		}
	}
	return nil
}

// checkFooter refuses lines that disagree with their footer: each footer amount totals
// the column it names, 商家实收 (and 商家优惠), not 订单金额.
func checkFooter(f Footer, s lineSums) error {
	if !f.Found {
		return fmt.Errorf("%w: no #交易合计 footer (truncated?)", ErrMalformedBill)
	}
	if f.Trades != s.trades || f.Refunds != s.refunds || f.TradeFen != s.tradeReceived || f.RefundFen != s.refundReceived {
		return fmt.Errorf("%w: footer says %d payments of 商家实收 %d fen and %d refunds of %d fen, the lines hold %d, %d, %d and %d",
			ErrMalformedBill, f.Trades, f.TradeFen, f.Refunds, f.RefundFen, s.trades, s.tradeReceived, s.refunds, s.refundReceived)
	}
	if f.discounts && (f.TradeDiscountFen != s.tradeDiscount || f.RefundDiscountFen != s.refundDiscount) {
		return fmt.Errorf("%w: footer says 商家优惠 %d fen on payments and %d fen on refunds, the lines hold %d and %d",
			ErrMalformedBill, f.TradeDiscountFen, f.RefundDiscountFen, s.tradeDiscount, s.refundDiscount)
	}
	return nil
}

// summaryTotals is the summary file's 合计: the day's counts and the net of each amount
// column over payments and refunds, signed as written.
type summaryTotals struct {
	trades, refunds                 int
	amount, received, discount, fee int64
}

// readSummary reads the summary file (业务明细(汇总)): a header, one row per store and a
// 合计 row. It returns the 合计 row, or the sum of the rows if there is none.
func readSummary(cr *billCSV) (summaryTotals, error) {
	var (
		idx          map[string]int
		sum, total   summaryTotals
		rows, totals int
	)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sum, err
		}
		if noSummaryRow(rec) {
			continue
		}
		if idx == nil {
			if idx, err = summaryHeader(rec); err != nil {
				return sum, err
			}
			continue
		}
		row, err := parseSummaryRow(rec, idx)
		if err != nil {
			return sum, fmt.Errorf("%w: summary row %d: %v", ErrMalformedBill, rows+totals+1, err)
		}
		if isTotalRow(rec, idx) {
			totals++
			total = row
			continue
		}
		rows++
		sum.add(row)
	}
	switch {
	case idx == nil:
		return sum, fmt.Errorf("%w: summary: no header row", ErrMalformedBill)
	case totals > 1:
		return sum, fmt.Errorf("%w: summary: %d 合计 rows", ErrMalformedBill, totals)
	case totals == 1:
		return total, nil
	case rows == 0:
		return sum, fmt.Errorf("%w: summary: no rows", ErrMalformedBill)
	}
	return sum, nil
}

// noSummaryRow reports whether a record of the summary is a comment or blank.
func noSummaryRow(rec []string) bool {
	return len(rec) == 0 || strings.HasPrefix(rec[0], "#") || len(rec) == 1 && strings.TrimSpace(rec[0]) == ""
}

// summaryHeader indexes the summary's header row by column name, and refuses one that
// lacks a column of summaryColumns.
func summaryHeader(rec []string) (map[string]int, error) {
	idx := map[string]int{}
	for i, h := range rec {
		idx[strings.TrimSpace(h)] = i
	}
	for _, name := range summaryColumns {
		if _, ok := idx[name]; !ok {
			return nil, fmt.Errorf("%w: summary: no column %s", ErrMalformedBill, name)
		}
	}
	return idx, nil
}

// add adds a row of the summary to the sum.
func (t *summaryTotals) add(row summaryTotals) {
	t.trades += row.trades
	t.refunds += row.refunds
	t.amount += row.amount
	t.received += row.received
	t.discount += row.discount
	t.fee += row.fee
}

// summaryColumns are the summary columns checked against the detail lines.
var summaryColumns = []string{"门店编号", "门店名称", "交易订单总笔数", "退款订单总笔数", "订单金额（元）", "商家实收（元）", "商家优惠（元）", "服务费（元）"}

func isTotalRow(rec []string, idx map[string]int) bool {
	for _, name := range []string{"门店编号", "门店名称"} {
		if i := idx[name]; i < len(rec) && strings.TrimSpace(rec[i]) == "合计" {
			return true
		}
	}
	return false
}

func parseSummaryRow(rec []string, idx map[string]int) (summaryTotals, error) {
	var t summaryTotals
	field := func(name string) string {
		if i := idx[name]; i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	var err error
	for _, c := range []struct {
		p    *int
		name string
	}{{&t.trades, "交易订单总笔数"}, {&t.refunds, "退款订单总笔数"}} {
		if *c.p, err = strconv.Atoi(field(c.name)); err != nil {
			return t, fmt.Errorf("%s %q", c.name, field(c.name))
		}
	}
	for _, c := range []struct {
		p    *int64
		name string
	}{{&t.amount, "订单金额（元）"}, {&t.received, "商家实收（元）"}, {&t.discount, "商家优惠（元）"}, {&t.fee, "服务费（元）"}} {
		if *c.p, err = parseSignedYuan(field(c.name)); err != nil {
			return t, fmt.Errorf("%s %q", c.name, field(c.name))
		}
	}
	return t, nil
}

// checkSummary refuses detail lines that disagree with the summary file: Alipay writes
// both from the same day, so a difference means one of them is damaged.
func checkSummary(t summaryTotals, s lineSums) error {
	lines := summaryTotals{trades: s.trades, refunds: s.refunds, amount: s.amount,
		received: s.tradeReceived + s.refundReceived, discount: s.tradeDiscount + s.refundDiscount, fee: s.fee}
	if t != lines {
		return fmt.Errorf("%w: the summary (业务明细(汇总)) says %s; the detail lines hold %s", ErrMalformedBill, t, lines)
	}
	return nil
}

func (t summaryTotals) String() string {
	return fmt.Sprintf("%d payments, %d refunds, net 订单金额 %d fen, 商家实收 %d fen, 商家优惠 %d fen, 服务费 %d fen",
		t.trades, t.refunds, t.amount, t.received, t.discount, t.fee)
}

// signedAmounts are a line's amounts as written (a refund's negative), for the totals.
type signedAmounts struct{ amount, received, discount int64 }

func parseLine(rec []string, c columns, lineNo int) (payment.BillLine, signedAmounts, error) {
	var signed signedAmounts
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
		if l.OutRequestNo == "" {
			l.OutRequestNo = l.OutTradeNo // Alipay's default request number of a full refund
		}
	default:
		return l, signed, fmt.Errorf("%w: line %d: unknown 业务类型 %q", ErrMalformedBill, lineNo, f(c.kind))
	}
	// 订单金额 is what the buyer was asked for (or refunded), 商家实收 what the merchant
	// received (or gave back); the merchant-funded discounts make up the difference. An
	// empty discount column is none.
	var redPacket int64
	for _, a := range []struct {
		p        *int64
		col      int
		name     string
		optional bool
	}{
		{&signed.amount, c.amount, "订单金额", false}, {&signed.received, c.received, "商家实收", false},
		{&signed.discount, c.discount, "商家优惠", true}, {&redPacket, c.redPacket, "商家红包消费金额", true},
	} {
		v := f(a.col)
		if v == "" && a.optional {
			continue
		}
		fen, err := parseSignedYuan(v)
		if err != nil {
			return l, signed, fmt.Errorf("%w: line %d: %s %q", ErrMalformedBill, lineNo, a.name, v)
		}
		*a.p = fen
	}
	l.Amount = payment.Amount(abs(signed.amount))
	l.Received = payment.Amount(abs(signed.received))
	l.MerchantDiscount = payment.Amount(abs(signed.discount))
	l.RedPacket = payment.Amount(abs(redPacket))
	if fee := f(c.fee); fee != "" {
		v, err := parseSignedYuan(fee)
		if err != nil {
			return l, signed, fmt.Errorf("%w: line %d: fee %q", ErrMalformedBill, lineNo, fee)
		}
		l.Fee = payment.Amount(v)
	}
	if t := f(c.finished); t != "" {
		var err error
		if l.FinishedAt, err = time.ParseInLocation("2006-01-02 15:04:05", t, China); err != nil {
			return l, signed, fmt.Errorf("%w: line %d: 完成时间 %q", ErrMalformedBill, lineNo, t)
		}
	}
	return l, signed, nil
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
