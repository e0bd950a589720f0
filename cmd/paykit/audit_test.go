package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/paykit/paykit/audit"
	"github.com/paykit/paykit/internal/config"
)

func TestRunAudit_ExitsTwoWhenItCannotAudit(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	cfg, err := config.Load(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.MySQLDSN = "root@tcp(127.0.0.1:1)/paykit"
	tests := []struct {
		name string
		args []string
		// parses is true for the one case that gets past the flags and fails to connect.
		parses bool
	}{
		{name: "bad duration", args: []string{"-since", "yesterday"}},
		{name: "window backwards", args: []string{"-since", "1h", "-until", "2h"}},
		{name: "rfc3339 backwards", args: []string{"-since", "2026-01-02T00:00:00Z", "-until", "2026-01-01T00:00:00Z"}},
		{name: "window too long", args: []string{"-since", "1000h"}},
		{name: "negative duration", args: []string{"-until", "-1h"}},
		{name: "zero sla", args: []string{"-grant-sla", "0s"}},
		{name: "zero grace", args: []string{"-pending-grace", "0"}},
		{name: "unknown flag", args: []string{"-limit", "5"}},
		{name: "extra arguments", args: []string{"now"}},
		{name: "mysql unreachable", parses: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := parseAuditFlags(tc.args, time.Now(), io.Discard); (err == nil) != tc.parses {
				t.Fatalf("parse: %v", err)
			}
			if code := runAudit(context.Background(), cfg, tc.args, io.Discard, io.Discard, logger); code != audit.ExitFailed {
				t.Fatalf("exit %d, want %d", code, audit.ExitFailed)
			}
		})
	}
}

func TestParseAuditFlags(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p, asJSON, err := parseAuditFlags(nil, now, io.Discard)
	if err != nil || asJSON || !p.Since.Equal(now.Add(-24*time.Hour)) || !p.Until.Equal(now) ||
		p.GrantSLA != 10*time.Minute || p.WebhookSLA != time.Hour || p.PendingGrace != 5*time.Minute {
		t.Fatalf("defaults: %+v json=%v err=%v", p, asJSON, err)
	}
	p, asJSON, err = parseAuditFlags([]string{"-since", "2026-02-01T00:00:00Z", "-until", "2h", "-json",
		"-grant-sla", "1m", "-webhook-sla", "2m", "-pending-grace", "3m"}, now, io.Discard)
	if err != nil || !asJSON || !p.Since.Equal(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)) || !p.Until.Equal(now.Add(-2*time.Hour)) ||
		p.GrantSLA != time.Minute || p.WebhookSLA != 2*time.Minute || p.PendingGrace != 3*time.Minute {
		t.Fatalf("flags: %+v json=%v err=%v", p, asJSON, err)
	}
}
