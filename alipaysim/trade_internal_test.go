package alipaysim

import (
	"net/url"
	"testing"
	"time"
)

func TestParseYuan(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"9.90", 990, true}, {"9.9", 990, true}, {"10", 1000, true}, {"0.01", 1, true},
		{"100000000.00", 10_000_000_000, true}, {"", 0, false}, {"1.001", 0, false}, {"-1", 0, false},
		{"+1", 0, false}, {"1e2", 0, false}, {"1.", 0, false}, {".5", 0, false}, {"1,00", 0, false},
	}
	for _, tc := range tests {
		got, err := parseYuan(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseYuan(%q) = %d, %v", tc.in, got, err)
		}
	}
	if _, err := parseTradeAmount("0.00"); err == nil {
		t.Error("0.00 accepted as a trade amount")
	}
	if _, err := parseTradeAmount("100000000.01"); err == nil {
		t.Error("amount above the maximum accepted")
	}
	for fen, want := range map[int64]string{0: "0.00", 1: "0.01", 990: "9.90", 123456: "1234.56", -5: "-0.05"} {
		if got := formatYuan(fen); got != want {
			t.Errorf("formatYuan(%d) = %q", fen, got)
		}
	}
}

func TestParseExpiry(t *testing.T) {
	loc := time.FixedZone("CST", 8*3600)
	created := time.Date(2024, 1, 2, 10, 0, 0, 0, loc)
	tests := []struct {
		biz  bizContent
		want time.Time
		ok   bool
	}{
		{bizContent{"time_expire": "2024-01-02 10:30:00"}, time.Date(2024, 1, 2, 10, 30, 0, 0, loc), true},
		{bizContent{"time_expire": "2024-01-02 10:30:00", "timeout_express": "1m"}, time.Date(2024, 1, 2, 10, 30, 0, 0, loc), true},
		{bizContent{"timeout_express": "90m"}, created.Add(90 * time.Minute), true},
		{bizContent{"timeout_express": "2h"}, created.Add(2 * time.Hour), true},
		{bizContent{"timeout_express": "1d"}, created.Add(24 * time.Hour), true},
		{bizContent{"timeout_express": "1c"}, time.Date(2024, 1, 3, 0, 0, 0, 0, loc), true},
		{bizContent{}, created.Add(15 * 24 * time.Hour), true},
		{bizContent{"time_expire": "2024/01/02"}, time.Time{}, false},
		{bizContent{"timeout_express": "1.5h"}, time.Time{}, false},
	}
	for _, tc := range tests {
		got, err := parseExpiry(tc.biz, created, loc)
		if (err == nil) != tc.ok || !got.Equal(tc.want) {
			t.Errorf("parseExpiry(%v) = %v, %v", tc.biz, got, err)
		}
	}
}

func TestSigningString(t *testing.T) {
	v := url.Values{"b": {"2"}, "a": {"1"}, "sign": {"x"}, "sign_type": {"RSA2"}, "empty": {""}, "c": {"a&b=c 中"}}
	if got, want := signingString(v, false, "sign"), "a=1&b=2&c=a&b=c 中&empty=&sign_type=RSA2"; got != want {
		t.Errorf("request string = %q; want %q", got, want)
	}
	if got, want := signingString(v, true, "sign", "sign_type"), "a=1&b=2&c=a&b=c 中"; got != want {
		t.Errorf("skip-empty string = %q; want %q", got, want)
	}
	if got, want := string(fields{{"code", "10000"}, {"msg", "<Success> & \"中\""}}.marshal()), `{"code":"10000","msg":"<Success> & \"中\""}`; got != want {
		t.Errorf("marshal = %s; want %s", got, want)
	}
}
