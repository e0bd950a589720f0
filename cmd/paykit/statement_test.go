package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseStatementFlags(t *testing.T) {
	// 2026-12-01 17:00 UTC is already 2026-12-02 in China.
	now := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{name: "default is yesterday in China", want: "2026-12-01"},
		{name: "today in China", args: []string{"-date", "today"}, want: "2026-12-02"},
		{name: "a date", args: []string{"-date", "2026-11-30", "-run"}, want: "2026-11-30"},
		{name: "not a date", args: []string{"-date", "30/11/2026"}, wantErr: "yyyy-MM-dd"},
		{name: "direct without run", args: []string{"-direct"}, wantErr: "-direct needs -run"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseStatementFlags(tc.args, now, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || f.date != tc.want {
				t.Fatalf("date %q err %v, want %q", f.date, err, tc.want)
			}
		})
	}
}
