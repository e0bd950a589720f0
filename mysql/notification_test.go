package mysql_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/paykit/paykit/payment"
)

// TestRecordNotification_RawBody: anyone can post to the callback URL, so an unverified
// notification keeps only a prefix of its body, with the hash and length of all of it;
// a verified one (Alipay's, bounded) keeps its whole body for audit.
func TestRecordNotification_RawBody(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	const limit = 2048
	// 60 KiB whose byte 2048 falls inside a 3-byte character.
	big := "notify_id=N&xy=" + strings.Repeat("\u4e2d", 60*1024/3)
	invalid := "notify_id=N&x=" + strings.Repeat("\xff", 4000)
	tests := []struct {
		name     string
		raw      string
		verified bool
		wantRaw  func(stored string) bool
	}{
		{"unverified 60 KiB", big, false, func(s string) bool {
			return len(s) <= limit && len(s) > limit-4 && utf8.ValidString(s) && strings.HasPrefix(big, s)
		}},
		{"unverified, small", "notify_id=N&sign=forged", false, func(s string) bool { return s == "notify_id=N&sign=forged" }},
		{"unverified, not UTF-8", invalid, false, func(s string) bool {
			return len(s) <= limit && utf8.ValidString(s) && strings.HasPrefix(s, "notify_id=N&x=")
		}},
		{"verified 60 KiB", big, true, func(s string) bool { return s == big }},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := notificationFor(tc.raw, tc.verified)
			n.NotifyID = "N" + string(rune('a'+i))
			rec, _, err := st.RecordNotification(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			var raw, sum string
			var length int
			if err := db.QueryRowContext(ctx, `SELECT raw_payload, raw_sha256, raw_len FROM channel_notifications WHERE id = ?`,
				rec.ID).Scan(&raw, &sum, &length); err != nil {
				t.Fatal(err)
			}
			want := sha256.Sum256([]byte(tc.raw))
			t.Logf("%d-byte body, verified=%v: stored %d bytes, raw_len %d", len(tc.raw), tc.verified, len(raw), length)
			if !tc.wantRaw(raw) {
				t.Errorf("raw_payload is %d bytes: %.40q…", len(raw), raw)
			}
			if sum != hex.EncodeToString(want[:]) || length != len(tc.raw) {
				t.Errorf("raw_sha256 %s raw_len %d, want the whole body's %x and %d", sum, length, want, len(tc.raw))
			}
		})
	}
}

func notificationFor(raw string, verified bool) payment.ChannelNotification {
	return payment.ChannelNotification{Channel: "alipay", PaymentNo: "p1", TradeNo: "T1", Raw: raw, Verified: verified}
}
