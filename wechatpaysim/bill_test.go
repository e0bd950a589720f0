package wechatpaysim_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/paykit/paykit/wechatpaysim"
	"github.com/paykit/paykit/wechatpaysim/simtest"
)

var beijing = time.FixedZone("CST", 8*3600)

// billDay is the day the bill tests trade on.
var billDay = time.Date(2026, 3, 10, 0, 0, 0, 0, beijing)

func (c *clock) set(t time.Time) { c.Advance(t.Sub(c.Now())) }

// billHarness trades on billDay: at 09:00 order BILL000001 (10.00, a 1.00 coupon,
// attach "a1") and BILL000002 (0.03) are paid; at 09:30 4.00 of the first is refunded.
func billHarness(tb testing.TB, mod func(*wechatpaysim.Config)) *harness {
	tb.Helper()
	h := newHarness(tb, func(c *wechatpaysim.Config) {
		manual(c)
		if mod != nil {
			mod(c)
		}
	})
	h.clock.set(billDay.Add(9 * time.Hour))
	body := orderBody("native", "BILL000001", 1000, "https://e.com/n", map[string]any{"attach": "a1"})
	if r := h.do(tb, req{method: "POST", target: "/v3/pay/transactions/native", body: body}); r.status != 200 {
		tb.Fatalf("%d %s", r.status, r.body)
	}
	if _, err := h.sim.Pay(mchID, "BILL000001", wechatpaysim.PayOptions{DiscountFen: 100, OpenID: "o-bill"}); err != nil {
		tb.Fatal(err)
	}
	h.paid(tb, "BILL000002", 3, wechatpaysim.PayOptions{})
	if r := h.refund(tb, refundBody("BILL000001", "BILL-R1", 400, 1000, nil)); r.status != 200 {
		tb.Fatalf("%d %s", r.status, r.body)
	}
	h.clock.Advance(30 * time.Minute)
	if _, err := h.sim.SettleRefund(mchID, "BILL-R1", wechatpaysim.RefundSuccess); err != nil {
		tb.Fatal(err)
	}
	return h
}

func (h *harness) tradeBill(tb testing.TB, query string) resp {
	tb.Helper()
	return h.do(tb, req{method: "GET", target: "/v3/bill/tradebill?" + query})
}

// download fetches a download_url through the simulator, as clients do with their base URL.
func (h *harness) download(tb testing.TB, downloadURL string, q req) resp {
	tb.Helper()
	if !strings.HasPrefix(downloadURL, wechatpaysim.APIHost+"/v3/billdownload/file?token=") {
		tb.Fatalf("download_url %q", downloadURL)
	}
	q.method, q.target = "GET", strings.TrimPrefix(downloadURL, wechatpaysim.APIHost)
	return h.do(tb, q)
}

func sha1Hex(b []byte) string {
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

// The ALL bill, byte for byte in WeChat Pay's format: BOM, CRLF, a plain header, data
// fields after backticks, the refund's row, the float-style summary; hash_value its
// SHA1; the download unsigned.
func TestTradeBill(t *testing.T) {
	t.Parallel()
	h := billHarness(t, nil)
	h.clock.set(billDay.AddDate(0, 0, 1).Add(10 * time.Hour))
	r := h.tradeBill(t, "bill_date=2026-03-10")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	h.verify(t, r)
	ans := r.json(t)
	file := h.download(t, ans["download_url"].(string), req{})
	if file.status != 200 || file.header.Get("Wechatpay-Signature") != "" || ans["hash_type"] != "SHA1" || ans["hash_value"] != sha1Hex(file.body) {
		t.Fatalf("%d %v %s", file.status, ans, file.header)
	}
	body := string(file.body)
	if !strings.HasPrefix(body, "\ufeff") || !strings.HasSuffix(body, "\r\n") || strings.Count(body, "\n") != strings.Count(body, "\r\n") {
		t.Fatalf("BOM or line ends: %q", body)
	}
	lines := strings.Split(strings.TrimSuffix(strings.TrimPrefix(body, "\ufeff"), "\r\n"), "\r\n")
	if len(lines) != 6 || len(strings.Split(lines[0], ",")) != 27 || strings.Contains(lines[0], "`") || !strings.HasPrefix(lines[0], "交易时间,公众账号ID,商户号") {
		t.Fatalf("%q", lines)
	}
	rows := make([][]string, 3)
	for i := range rows {
		if !strings.HasPrefix(lines[i+1], "`") {
			t.Fatalf("row %q", lines[i+1])
		}
		rows[i] = strings.Split(lines[i+1][1:], ",`")
		if len(rows[i]) != 27 {
			t.Fatalf("row of %d fields: %q", len(rows[i]), lines[i+1])
		}
	}
	o, _ := h.sim.Order(mchID, "BILL000001")
	ref, _ := h.sim.Refund(mchID, "BILL-R1")
	want := [][]string{
		{"2026-03-10 09:00:00", appID, mchID, "0", "", o.TransactionID, "BILL000001", "o-bill", "NATIVE", "SUCCESS", "OTHERS", "CNY",
			"10.00", "1.00", "0", "0", "0.00", "0.00", "", "", "Image形象店-深圳腾大-QQ公仔", "a1", "0.06000", "0.60%", "10.00", "0.00", ""},
		{"2026-03-10 09:00:00", "BILL000002", "SUCCESS", "0.03", "0.00", "0.00000", "0.03"},
		{"2026-03-10 09:30:00", appID, mchID, "0", "", o.TransactionID, "BILL000001", "o-bill", "NATIVE", "REFUND", "OTHERS", "CNY",
			"0.00", "0.00", ref.RefundID, "BILL-R1", "4.00", "0.40", "ORIGINAL", "SUCCESS", "Image形象店-深圳腾大-QQ公仔", "a1", "-0.02000", "0.60%", "0.00", "4.00", ""},
	}
	if strings.Join(rows[0], "|") != strings.Join(want[0], "|") || strings.Join(rows[2], "|") != strings.Join(want[2], "|") {
		t.Fatalf("rows\n%q\n%q\nwant\n%q\n%q", rows[0], rows[2], want[0], want[2])
	}
	if got := []string{rows[1][0], rows[1][6], rows[1][9], rows[1][12], rows[1][13], rows[1][22], rows[1][24]}; strings.Join(got, "|") != strings.Join(want[1], "|") {
		t.Fatalf("row %q", rows[1])
	}
	if lines[4] != "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额" ||
		lines[5] != "`3.0,`10.03,`4.0,`0.4,`0.04,`10.03,`4.0" {
		t.Fatalf("summary %q %q", lines[4], lines[5])
	}
	for _, tc := range []struct{ billType, rows string }{{"SUCCESS", "BILL000001 BILL000002"}, {"REFUND", "BILL-R1"}} {
		r := h.tradeBill(t, "bill_date=2026-03-10&bill_type="+tc.billType)
		f := string(h.download(t, r.json(t)["download_url"].(string), req{}).body)
		n := strings.Count(f, "\r\n") - 3
		if r.status != 200 || n != len(strings.Fields(tc.rows)) {
			t.Fatalf("%s: %d rows in %q", tc.billType, n, f)
		}
		for _, no := range strings.Fields(tc.rows) {
			if !strings.Contains(f, "`"+no+",") {
				t.Errorf("%s bill without %s", tc.billType, no)
			}
		}
	}
	if csv, err := h.sim.TradeBill("", "2026-03-10", ""); err != nil || !bytes.Equal(csv, file.body) {
		t.Fatalf("TradeBill: %v", err)
	}
	if status, csv := h.get(t, "/_sim/bills/2026-03-10?mchid="+mchID); status != 200 || csv != string(file.body) {
		t.Fatalf("GET /_sim/bills: %d %q", status, csv)
	}
}

// tar_type=GZIP: the download is gzip; hash_value is the plain bill's SHA1 unless
// BillHashCompressed.
func TestTradeBillGzip(t *testing.T) {
	t.Parallel()
	for _, compressed := range []bool{false, true} {
		h := billHarness(t, func(c *wechatpaysim.Config) { c.BillHashCompressed = compressed })
		h.clock.set(billDay.AddDate(0, 0, 2))
		ans := h.tradeBill(t, "bill_date=2026-03-10&tar_type=GZIP").json(t)
		u := ans["download_url"].(string)
		if !strings.HasSuffix(u, "&tartype=gzip") {
			t.Fatalf("%s", u)
		}
		gz := h.download(t, u, req{}).body
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := io.ReadAll(zr)
		want := sha1Hex(plain)
		if compressed {
			want = sha1Hex(gz)
		}
		if !bytes.HasPrefix(plain, []byte("\ufeff交易时间")) || ans["hash_value"] != want {
			t.Fatalf("compressed %v: %v", compressed, ans)
		}
	}
}

// The refusals of the bill API and of the download.
func TestTradeBillRefusals(t *testing.T) {
	t.Parallel()
	h := billHarness(t, nil)
	h.clock.set(billDay.AddDate(0, 0, 1).Add(9*time.Hour + 59*time.Minute))
	tests := []struct {
		name, query string
		status      int
		code        string
	}{
		{"before 10:00 the next day", "bill_date=2026-03-10", 400, "STATEMENT_CREATING"},
		{"today", "bill_date=2026-03-11", 400, "STATEMENT_CREATING"},
		{"a day without trades", "bill_date=2026-03-09", 400, "NO_STATEMENT_EXIST"},
		{"three months back", "bill_date=2025-12-11", 400, "NO_STATEMENT_EXIST"},
		{"more than three months back", "bill_date=2025-12-10", 400, "INVALID_REQUEST"},
		{"tomorrow", "bill_date=2026-03-12", 400, "INVALID_REQUEST"},
		{"not a date", "bill_date=2026/03/09", 400, "INVALID_REQUEST"},
		{"no date", "bill_type=ALL", 400, "PARAM_ERROR"},
		{"unknown bill_type", "bill_date=2026-03-09&bill_type=FOO", 400, "PARAM_ERROR"},
		{"unknown tar_type", "bill_date=2026-03-09&tar_type=ZIP", 400, "PARAM_ERROR"},
	}
	for _, tc := range tests {
		if r := h.tradeBill(t, tc.query); r.status != tc.status || r.code() != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	h.clock.Advance(time.Minute)
	if r := h.tradeBill(t, "bill_date=2026-03-10&bill_type=REFUND"); r.status != 200 {
		t.Fatalf("at 10:00: %d %s", r.status, r.body)
	}
	// A late bill stays STATEMENT_CREATING until released; a release makes even today's ready.
	if code := h.control(t, "POST", "/_sim/bills/2026-03-10/late", "", nil); code != 200 {
		t.Fatal(code)
	}
	if r := h.tradeBill(t, "bill_date=2026-03-10"); r.code() != "STATEMENT_CREATING" {
		t.Fatalf("late: %d %s", r.status, r.body)
	}
	if f := h.sim.Faults(); !f.LateBills["2026-03-10"] {
		t.Fatalf("%+v", f)
	}
	if code := h.control(t, "POST", "/_sim/bills/2026-03-10/release", "", nil); code != 200 {
		t.Fatal(code)
	}
	ans := h.tradeBill(t, "bill_date=2026-03-10")
	if ans.status != 200 {
		t.Fatalf("released: %d %s", ans.status, ans.body)
	}
	if code := h.control(t, "POST", "/_sim/bills/2026-03-11/release", "", nil); code != 200 {
		t.Fatal(code)
	}
	if r := h.tradeBill(t, "bill_date=2026-03-11"); r.code() != "NO_STATEMENT_EXIST" {
		t.Fatalf("today released: %d %s", r.status, r.body)
	}
	if code := h.control(t, "POST", "/_sim/bills/2026-3-1/late", "", nil); code != 400 {
		t.Fatalf("a bad date: %d", code)
	}
	u := ans.json(t)["download_url"].(string)
	other := h.secondMerchant(t)
	if r := h.download(t, u, req{mchid: other.MchID, serial: other.MerchantSerialNo, key: other.MerchantPrivateKeyPEM}); r.status != 403 || r.code() != "NO_AUTH" {
		t.Fatalf("another merchant: %d %s", r.status, r.body)
	}
	if r := h.download(t, wechatpaysim.APIHost+"/v3/billdownload/file?token=nosuch", req{}); r.status != 400 || r.code() != "INVALID_REQUEST" {
		t.Fatalf("unknown token: %d %s", r.status, r.body)
	}
	h.clock.Advance(wechatpaysim.DefaultBillURLLifetime)
	if r := h.download(t, u, req{}); r.status != 400 || r.code() != "INVALID_REQUEST" {
		t.Fatalf("expired: %d %s", r.status, r.body)
	}
}

// BillReadyHour moves the hour a bill becomes ready; a negative one makes it ready at once.
func TestBillReadyHour(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		hour  int
		at    time.Duration // after billDay's midnight
		ready bool
	}{
		{"default, 09:59", 0, 33*time.Hour + 59*time.Minute, false},
		{"default, 10:00", 0, 34 * time.Hour, true},
		{"9, 08:59", 9, 32*time.Hour + 59*time.Minute, false},
		{"9, 09:00", 9, 33 * time.Hour, true},
		{"at once, the same day", -1, 10 * time.Hour, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := billHarness(t, func(c *wechatpaysim.Config) { c.BillReadyHour = tc.hour })
			h.clock.set(billDay.Add(tc.at))
			if r := h.tradeBill(t, "bill_date=2026-03-10"); (r.status == 200) != tc.ready {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
	cfg := simtest.Keys(t).Config()
	cfg.BillReadyHour = 24
	if _, err := wechatpaysim.New(cfg); err == nil {
		t.Fatal("BillReadyHour 24 accepted")
	}
}
