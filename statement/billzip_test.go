package statement_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/paykit/paykit/alipaysim"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/statement"
)

// zipEntry is one file of a hand-made bill zip: its name and its text (UTF-8, written
// in GBK as Alipay does), or a body written as it is.
type zipEntry struct {
	name string
	text string
	body io.Reader
}

// simBillEntries is the bill the simulator writes for rows, as its entries' text.
func simBillEntries(tb testing.TB, rows ...alipaysim.BillRow) []zipEntry {
	tb.Helper()
	var buf bytes.Buffer
	h := alipaysim.BillHeader{Account: "20880000000000010156", Date: benchDay, ExportedAt: benchDay.AddDate(0, 0, 1)}
	seq := func(yield func(alipaysim.BillRow) bool) {
		for _, r := range rows {
			if !yield(r) {
				return
			}
		}
	}
	if err := alipaysim.WriteBill(&buf, h, seq); err != nil {
		tb.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		tb.Fatal(err)
	}
	var out []zipEntry
	for _, f := range zr.File {
		name, _ := simplifiedchinese.GBK.NewDecoder().String(f.Name)
		rc, err := f.Open()
		if err != nil {
			tb.Fatal(err)
		}
		text, err := io.ReadAll(simplifiedchinese.GBK.NewDecoder().Reader(rc))
		rc.Close()
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, zipEntry{name: name, text: string(text)})
	}
	return out
}

// edit returns entries with old replaced by repl in the entry whose name ends in suffix,
// failing the test if old is not there.
func edit(tb testing.TB, entries []zipEntry, suffix, old, repl string) []zipEntry {
	tb.Helper()
	out := append([]zipEntry(nil), entries...)
	for i, e := range out {
		if strings.HasSuffix(e.name, suffix) {
			if !strings.Contains(e.text, old) {
				tb.Fatalf("%s has no %q:\n%s", e.name, old, e.text)
			}
			out[i].text = strings.Replace(e.text, old, repl, 1)
			return out
		}
	}
	tb.Fatalf("no entry ending in %s", suffix)
	return nil
}

// writeBillZip writes entries into a zip file as Alipay names and encodes them.
func writeBillZip(tb testing.TB, entries []zipEntry) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "bill.zip")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, e := range entries {
		name, err := simplifiedchinese.GBK.NewEncoder().String(e.name)
		if err != nil {
			tb.Fatal(err)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, NonUTF8: true, Method: zip.Deflate, Modified: time.Now()})
		if err != nil {
			tb.Fatal(err)
		}
		if e.body == nil {
			text, err := simplifiedchinese.GBK.NewEncoder().String(e.text)
			if err != nil {
				tb.Fatal(err)
			}
			_, err = io.WriteString(w, text)
			if err != nil {
				tb.Fatal(err)
			}
		} else if _, err := io.Copy(w, e.body); err != nil {
			tb.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// discountedRows are a payment of 100.00 with a merchant discount of 10.00 and a red
// packet of 5.00 (the merchant received 85.00), and a refund of 30.00 of it that gives
// back 3.00 and 1.50 of them (25.50).
func discountedRows() []alipaysim.BillRow {
	at := benchDay.Add(10 * time.Hour)
	return []alipaysim.BillRow{
		{TradeNo: "2026120122000000000000000001", OutTradeNo: "PD1", Type: alipaysim.BillTypeTrade, Subject: "会员",
			CreatedAt: at, FinishedAt: at, AmountFen: 10000, ReceivedFen: 8500, MerchantDiscountFen: 1000, RedPacketFen: 500, FeeFen: -51},
		{TradeNo: "2026120122000000000000000001", OutTradeNo: "PD1", Type: alipaysim.BillTypeRefund, Subject: "会员", OutRequestNo: "RD1",
			CreatedAt: at, FinishedAt: at.Add(time.Hour), AmountFen: -3000, ReceivedFen: -2550, MerchantDiscountFen: -300, RedPacketFen: -150, FeeFen: 15},
	}
}

// TestReadBillDiscounts: a line's 订单金额, 商家实收 and merchant-funded discounts are read
// apart; the footer is checked on the 商家实收 and 商家优惠 it totals, the summary on
// every column; a bill whose lines disagree with either is refused as malformed.
func TestReadBillDiscounts(t *testing.T) {
	clean := simBillEntries(t, discountedRows()...)
	var lines []payment.BillLine
	foot, err := statement.ReadBill(writeBillZip(t, clean), func(l payment.BillLine) error {
		lines = append(lines, l)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []payment.BillLine{
		{Kind: payment.BillLineTrade, OutTradeNo: "PD1", Amount: 10000, Received: 8500, MerchantDiscount: 1000, RedPacket: 500, Fee: -51},
		{Kind: payment.BillLineRefund, OutTradeNo: "PD1", OutRequestNo: "RD1", Amount: 3000, Received: 2550, MerchantDiscount: 300, RedPacket: 150, Fee: 15},
	}
	if len(lines) != len(want) {
		t.Fatalf("lines %+v", lines)
	}
	for i, w := range want {
		l := lines[i]
		if l.Kind != w.Kind || l.OutTradeNo != w.OutTradeNo || l.OutRequestNo != w.OutRequestNo || l.Amount != w.Amount ||
			l.Received != w.Received || l.MerchantDiscount != w.MerchantDiscount || l.RedPacket != w.RedPacket || l.Fee != w.Fee {
			t.Errorf("line %d: %+v, want %+v", i+1, l, w)
		}
	}
	if foot.TradeFen != 8500 || foot.TradeDiscountFen != 1000 || foot.RefundFen != -2550 || foot.RefundDiscountFen != -300 {
		t.Errorf("footer %+v", foot)
	}
	// The footer as the simulator wrote it before, with colons, reads the same.
	colons := edit(t, clean, "_业务明细.csv", "商家实收共85.00元，商家优惠共", "商家实收：85.00元，商家优惠：")
	colons = edit(t, colons, "_业务明细.csv", "商家实收退款共-25.50元，商家优惠退款共", "商家实收：-25.50元，商家优惠：")
	if foot, err := statement.ReadBill(writeBillZip(t, colons), func(payment.BillLine) error { return nil }); err != nil ||
		foot.TradeFen != 8500 || foot.TradeDiscountFen != 1000 || foot.RefundFen != -2550 || foot.RefundDiscountFen != -300 {
		t.Errorf("colon footer %+v, %v", foot, err)
	}

	const detail, summary = "_业务明细.csv", "_业务明细(汇总).csv"
	for _, c := range []struct {
		name    string
		entries []zipEntry
		want    string
	}{
		{"footer totals 订单金额", edit(t, clean, detail, "商家实收共85.00元", "商家实收共100.00元"), "footer says"},
		{"footer 商家优惠 a fen off", edit(t, clean, detail, "商家优惠共10.00元", "商家优惠共9.99元"), "footer says 商家优惠"},
		{"refund footer 商家实收 a fen off", edit(t, clean, detail, "商家实收退款共-25.50元", "商家实收退款共-25.49元"), "footer says"},
		{"old footer wording, 商家实收 a fen off", edit(t, clean, detail, "商家实收共85.00元，商家优惠共", "商家实收：85.01元，商家优惠："), "footer says"},
		{"summary 商家实收 a fen off", edit(t, clean, summary, ",70.00,59.50,", ",70.00,59.49,"), "summary"},
		{"summary 订单金额 a fen off", edit(t, clean, summary, ",70.00,59.50,", ",70.01,59.50,"), "summary"},
		{"summary count off", edit(t, clean, summary, ",合计,1,1,", ",合计,1,2,"), "summary"},
		{"summary fee off", edit(t, clean, summary, ",-0.36,", ",-0.35,"), "summary"},
		{"summary amount unreadable", edit(t, clean, summary, ",70.00,", ",七十,"), "summary row"},
		{"no summary", clean[:1], "no 业务明细(汇总).csv"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := statement.ReadBill(writeBillZip(t, c.entries), func(payment.BillLine) error { return nil })
			if !errors.Is(err, statement.ErrMalformedBill) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want a malformed bill (%q)", err, c.want)
			}
		})
	}
}

// repeatReader yields s n times.
func repeatReader(s string, n int) io.Reader {
	rs := make([]io.Reader, n)
	for i := range rs {
		rs[i] = strings.NewReader(s)
	}
	return io.MultiReader(rs...)
}

// inflatingDetail is a detail file that opens like a real one and then repeats its first
// line until it is about size bytes: valid lines all the way, so only a bound stops it.
// It returns the entry's bytes (GBK) and how many lines it holds.
func inflatingDetail(tb testing.TB, size int) ([]byte, int) {
	tb.Helper()
	text := simBillEntries(tb, discountedRows()...)[0].text
	lines := strings.SplitAfter(text, "\n")
	var head, first string
	for i, l := range lines {
		if strings.HasPrefix(l, "支付宝交易号") {
			head, first = strings.Join(lines[:i+1], ""), lines[i+1]
			break
		}
	}
	gbk := func(s string) string {
		out, err := simplifiedchinese.GBK.NewEncoder().String(s)
		if err != nil {
			tb.Fatal(err)
		}
		return out
	}
	head, first = gbk(head), gbk(first)
	n := size / len(first)
	body, err := io.ReadAll(io.MultiReader(strings.NewReader(head), repeatReader(first, n)))
	if err != nil {
		tb.Fatal(err)
	}
	return body, n
}

// lyingZip is a bill zip whose detail entry declares declared bytes and inflates to body,
// and whose summary is summary.
func lyingZip(tb testing.TB, body []byte, declared uint64, summary zipEntry) string {
	tb.Helper()
	var deflated bytes.Buffer
	fw, _ := flate.NewWriter(&deflated, flate.BestCompression)
	_, _ = fw.Write(body)
	_ = fw.Close()
	path := filepath.Join(tb.TempDir(), "lying.zip")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	zw := zip.NewWriter(f)
	name, _ := simplifiedchinese.GBK.NewEncoder().String("2088_20261201_业务明细.csv")
	w, err := zw.CreateRaw(&zip.FileHeader{Name: name, NonUTF8: true, Method: zip.Deflate, CRC32: crc32.ChecksumIEEE(body),
		CompressedSize64: uint64(deflated.Len()), UncompressedSize64: declared})
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = w.Write(deflated.Bytes())
	name, _ = simplifiedchinese.GBK.NewEncoder().String(summary.name)
	text, _ := simplifiedchinese.GBK.NewEncoder().String(summary.text)
	if w, err = zw.CreateHeader(&zip.FileHeader{Name: name, NonUTF8: true, Method: zip.Deflate}); err != nil {
		tb.Fatal(err)
	}
	_, _ = io.WriteString(w, text)
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	_ = f.Close()
	return path
}

// TestReadBillRefusesHostileBills: a zip with two detail or two summary files, a file
// that inflates past the bound (declared or not), and a record that would swallow the
// rest of the file are refused as malformed bills, without reading them to their end.
func TestReadBillRefusesHostileBills(t *testing.T) {
	clean := simBillEntries(t, discountedRows()...)
	const maxEntry = 1 << 20
	big, bigLines := inflatingDetail(t, 4*maxEntry)

	var (
		firstLine string
		detailIdx int
	)
	for i, e := range clean {
		if strings.HasSuffix(e.name, "_业务明细.csv") {
			detailIdx = i
			for _, l := range strings.SplitAfter(e.text, "\n") {
				if strings.Contains(l, "交易,会员") {
					firstLine = l
				}
			}
		}
	}
	if firstLine == "" {
		t.Fatalf("no payment line in %q", clean[detailIdx].text)
	}
	// A stray quote opens the first line's subject, and thousands of lines follow.
	unterminated := edit(t, clean, "_业务明细.csv", firstLine, strings.Replace(firstLine, ",会员,", `,"会员,`, 1)+strings.Repeat(firstLine, 2000))
	// A line of 512 KiB without a newline.
	endless := edit(t, clean, "_业务明细.csv", firstLine, strings.Repeat("9", 512<<10))

	for _, c := range []struct {
		name     string
		path     string
		want     string
		maxLines int // lines the reader may hand over before it refuses
	}{
		{"two detail files", writeBillZip(t, append(clean, zipEntry{name: "copy/2088_20261201_业务明细.csv", text: clean[detailIdx].text})), "two detail", 0},
		{"two summary files", writeBillZip(t, append(clean, zipEntry{name: "2088_20261202_业务明细(汇总).csv", text: "x"})), "two summary", 0},
		{"an entry larger than the bound", writeBillZip(t, []zipEntry{{name: "2088_20261201_业务明细.csv", body: bytes.NewReader(big)}, clean[1]}), "inflates", 0},
		{"an entry inflating past the size it declares", lyingZip(t, big, maxEntry/2, clean[1]), "not a valid zip", bigLines / 4}, // archive/zip stops at the declared size
		{"an unterminated quote", writeBillZip(t, unterminated), "longer than", 0},
		{"a line without end", writeBillZip(t, endless), "longer than", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			lines := 0
			_, err := statement.ReadBillWithin(c.path, maxEntry, statement.MaxRecordBytes, func(payment.BillLine) error {
				lines++
				return nil
			})
			if !errors.Is(err, statement.ErrMalformedBill) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want a malformed bill (%q)", err, c.want)
			}
			if lines > c.maxLines {
				t.Fatalf("%d lines read before the refusal, want at most %d", lines, c.maxLines)
			}
		})
	}

	// Within the bounds, the same reader takes a bill of many lines.
	lines := 0
	if _, err := statement.ReadBillWithin(writeBillZip(t, clean), maxEntry, statement.MaxRecordBytes, func(payment.BillLine) error {
		lines++
		return nil
	}); err != nil || lines != 2 {
		t.Fatalf("clean bill: %d lines, %v", lines, err)
	}
}
