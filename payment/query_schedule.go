package payment

import (
	"hash/fnv"
	"strconv"
	"time"
)

// The schedule of the queries at Alipay that back up its notification for a pending
// payment: interval, then twice, four and eight times it (capped there), each within
// ±20% of its step by a jitter that is a function of the payment and the step, so that
// payments created together do not query together and every process (and a workflow's
// replay) computes the same times. A query that would fall within one interval of
// expiry, or less than half its step before it, is left to the close path, which asks
// Alipay itself at expiry: an abandoned 15-minute checkout on a one-minute interval is
// queried three times, then closed.
const (
	queryMaxShift = 3
	queryJitter   = 0.2
)

// QueryDelay is the delay before the n-th query (0-based) of a payment.
func QueryDelay(interval time.Duration, paymentNo string, n int) time.Duration {
	shift := min(max(n, 0), queryMaxShift)
	d := interval << shift
	h := fnv.New32a()
	_, _ = h.Write([]byte(paymentNo))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(strconv.Itoa(n)))
	f := float64(h.Sum32()%10000) / 10000 // [0, 1)
	return time.Duration(float64(d) * (1 - queryJitter + 2*queryJitter*f))
}

// NextQueryAt is when the n-th query (0-based) of a pending payment that expires at
// expireAt is due, counted from now (the payment's creation for the first, the previous
// query for the others), or the zero time when the close path at expiry asks instead.
func NextQueryAt(now, expireAt time.Time, interval time.Duration, paymentNo string, n int) time.Time {
	if interval <= 0 {
		return time.Time{}
	}
	d := QueryDelay(interval, paymentNo, n)
	next := now.Add(d)
	if !next.Before(expireAt.Add(-interval)) || expireAt.Sub(next) < d/2 {
		return time.Time{}
	}
	return next
}
