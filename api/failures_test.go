package api

import (
	"strconv"
	"testing"
	"time"
)

// TestSourceOf: an IPv4 source is its address, mapped or not; an IPv6 one its /64.
func TestSourceOf(t *testing.T) {
	tests := []struct{ name, ip, want string }{
		{"IPv4", "203.0.113.7", "203.0.113.7"},
		{"IPv4 mapped into IPv6", "::ffff:203.0.113.7", "203.0.113.7"},
		{"IPv6", "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"IPv6 with a zone", "fe80::1%eth0", "fe80::/64"},
		{"not an address", "unknown", "unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sourceOf(tc.ip); got != tc.want {
				t.Fatalf("sourceOf(%q) = %q, want %q", tc.ip, got, tc.want)
			}
		})
	}
}

// TestFailureLimiterWhenFull: once maxFailureSources sources are tracked and every one is
// short, a new source is refused rather than every source forgotten (which would give
// each a new budget); once their buckets are full again, they make room.
func TestFailureLimiterWhenFull(t *testing.T) {
	fl := newFailureLimiter(1)
	now := time.Now()
	for i := range maxFailureSources {
		if ok, _ := fl.take("s"+strconv.Itoa(i), now); !ok {
			t.Fatalf("source %d refused its first key", i)
		}
	}
	if ok, _ := fl.take("new", now.Add(2*time.Second)); ok {
		t.Fatal("a new source was let in while every tracked one is short")
	}
	if ok, _ := fl.take("s0", now.Add(2*time.Second)); ok {
		t.Fatal("a tracked source short of its budget was forgotten")
	}
	if ok, _ := fl.take("new", now.Add(2*time.Minute)); !ok {
		t.Fatal("a new source refused once the tracked ones' buckets are full again")
	}
}
