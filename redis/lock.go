package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/paykit/paykit/payment"
)

// ErrLockBusy is returned by AcquireOrWait when another owner still holds the lock after
// the wait. The caller should re-read the state in MySQL and answer from it ("already
// paid" or "in progress"), not report a failure.
var ErrLockBusy = &payment.Error{Code: payment.EINFLIGHT, Message: "the order is being processed; retry shortly"}

// releaseScript deletes the lock only if it still holds the caller's owner token, so an
// owner whose lock expired can never free the next owner's lock.
const releaseScript = `if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0`

// extendScript resets the TTL only if the caller still owns the lock.
const extendScript = `if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`

// Polling interval bounds for AcquireOrWait.
const (
	minPoll = 10 * time.Millisecond
	maxPoll = 50 * time.Millisecond
)

// Lock is a held lock. It expires by itself after its TTL, so a crashed owner never
// blocks others for longer than that; correctness must not depend on it (see package doc).
type Lock struct {
	c     *Client
	key   string
	owner string
}

// Key returns the lock's key without the client prefix.
func (l *Lock) Key() string { return l.key }

// TryLock takes the lock named key (e.g. "payment:tenant:order") for ttl with SET NX PX
// and a random owner token. It returns ok=false without waiting if someone else holds it.
func (c *Client) TryLock(ctx context.Context, key string, ttl time.Duration) (*Lock, bool, error) {
	if key == "" || ttl <= 0 {
		return nil, false, fmt.Errorf("redis: lock: a key and a positive ttl are required")
	}
	owner := randomToken()
	ok, err := c.rdb.SetNX(ctx, c.key("lock", key), owner, ttl).Result()
	if err != nil {
		return nil, false, fmt.Errorf("redis: lock %s: %w", key, err)
	}
	if !ok {
		return nil, false, nil
	}
	return &Lock{c: c, key: key, owner: owner}, true, nil
}

// AcquireOrWait takes the lock, polling for up to wait while someone else holds it. If
// it is still held after wait it returns ErrLockBusy: the caller then re-reads the state
// instead of failing, as the design asks ("short wait, then re-read"). Redis errors are
// returned as they are; the caller treats them as "no lock" and relies on MySQL.
func (c *Client) AcquireOrWait(ctx context.Context, key string, ttl, wait time.Duration) (*Lock, error) {
	deadline := time.Now().Add(wait)
	for {
		l, ok, err := c.TryLock(ctx, key, ttl)
		if err != nil {
			return nil, err
		}
		if ok {
			return l, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, ErrLockBusy
		}
		d := min(minPoll+rand.N(maxPoll-minPoll), left)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("redis: lock %s: %w", key, ctx.Err())
		case <-t.C:
		}
	}
}

// Release frees the lock if this owner still holds it and reports whether it did. It
// returns false when the lock expired and perhaps went to another owner, which it never
// frees.
func (l *Lock) Release(ctx context.Context) (bool, error) {
	n, err := l.c.release.Run(ctx, l.c.rdb, []string{l.c.key("lock", l.key)}, l.owner).Int64()
	if err != nil {
		return false, fmt.Errorf("redis: unlock %s: %w", l.key, err)
	}
	return n == 1, nil
}

// Extend resets the lock's TTL if this owner still holds it and reports whether it did.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := l.c.extend.Run(ctx, l.c.rdb, []string{l.c.key("lock", l.key)}, l.owner, ttl.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("redis: extend lock %s: %w", l.key, err)
	}
	return n == 1, nil
}

// OrderLocker is the seed's per-order lock for the success path, in the shape the
// activities expect: on contention it waits up to Wait, then reports acquired=false so
// that the caller re-reads the payment's status instead of failing.
type OrderLocker struct {
	Client *Client
	TTL    time.Duration // how long a crashed holder can block others
	Wait   time.Duration // the "short wait" before handing back control
}

// LockOrder takes the lock of (tenantID, orderID). A Redis error is returned as it is; the
// caller carries on without the lock, because MySQL's row lock and compare-and-set hold
// on their own.
func (l OrderLocker) LockOrder(ctx context.Context, tenantID, orderID string) (release func(context.Context), acquired bool, err error) {
	lock, err := l.Client.AcquireOrWait(ctx, OrderLockKey(tenantID, orderID), l.TTL, l.Wait)
	if errors.Is(err, ErrLockBusy) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return func(ctx context.Context) { _, _ = lock.Release(ctx) }, true, nil
}

// OrderLockKey is the lock key (without the client prefix) of one order's success path.
func OrderLockKey(tenantID, orderID string) string {
	return "payment:" + tenantID + ":" + orderID
}
