package redis

import (
	"context"
	"fmt"
	"math"
	"time"
)

// gcraScript is a generic cell rate algorithm limit on one key, whose value is the
// theoretical arrival time (TAT) of the next request in microseconds of the server's
// clock (TIME, so that every API process counts on one clock). ARGV[1] is the interval
// between requests at the sustained rate and ARGV[2] the burst, both in microseconds of
// interval (burst = interval * requests). It returns {1, 0} for a request let through
// and {0, µs to wait} for one refused, which is not counted.
const gcraScript = `local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = tonumber(redis.call("GET", KEYS[1]) or "0")
if tat < now then tat = now end
local next = tat + interval
if next - now > burst then return {0, next - now - burst} end
redis.call("SET", KEYS[1], string.format("%.0f", next), "PX", math.ceil((next - now) / 1000) + 1)
return {1, 0}`

// Allow takes one request from the limit named by parts (a tenant and a route, say):
// rate requests a second sustained, and bursts of up to burst at once. It returns
// ok=false and how long to wait when the request is over the limit. The limit is shared
// by every process on this Redis. An error means Redis did not answer: the caller
// decides whether to let the request through.
func (c *Client) Allow(ctx context.Context, rate float64, burst int, parts ...string) (ok bool, retryAfter time.Duration, err error) {
	if rate <= 0 || burst <= 0 {
		return false, 0, fmt.Errorf("redis: allow: a positive rate and burst are required")
	}
	interval := math.Max(1, math.Round(1e6/rate))
	res, err := c.gcra.Run(ctx, c.rdb, []string{c.key(append([]string{"limit"}, parts...)...)}, interval, interval*float64(burst)).Slice()
	if err != nil {
		return false, 0, fmt.Errorf("redis: allow: %w", err)
	}
	if len(res) != 2 {
		return false, 0, fmt.Errorf("redis: allow: unexpected reply %v", res)
	}
	granted, _ := res[0].(int64)
	wait, _ := res[1].(int64)
	return granted == 1, time.Duration(wait) * time.Microsecond, nil
}

// issueTokenScript records a new token (ARGV[2]) in a tenant's set of open checkout
// tokens (KEYS[1], scored by expiry in ms of the server's clock), unless the tenant holds
// ARGV[3] open ones; ARGV[1] is the token's lifetime in ms. Expired ones are dropped
// first. It returns {1, 0} when recorded and {0, ms until the oldest open token expires}
// when refused.
const issueTokenScript = `local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl, max = tonumber(ARGV[1]), tonumber(ARGV[3])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
if redis.call("ZCARD", KEYS[1]) >= max then
	local oldest = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
	return {0, math.max(1, tonumber(oldest[2]) - now)}
end
redis.call("ZADD", KEYS[1], now + ttl, ARGV[2])
redis.call("PEXPIRE", KEYS[1], ttl)
return {1, 0}`

// IssueBoundedToken is IssueToken for a tenant that may hold at most maxOpen unspent
// checkout tokens: past that it issues none and returns how long until the oldest open
// one expires. A token leaves the count when it is claimed (ClaimToken) or expires; one
// released again (ReleaseToken) is not counted again, which errs on the side of issuing.
// maxOpen <= 0 is no bound.
func (c *Client) IssueBoundedToken(ctx context.Context, tenantID, orderID string, ttl time.Duration, maxOpen int) (token string, retryAfter time.Duration, err error) {
	if maxOpen <= 0 {
		token, err = c.IssueToken(ctx, tenantID, orderID, ttl)
		return token, 0, err
	}
	if tenantID == "" || ttl <= 0 {
		return "", 0, fmt.Errorf("redis: issue token: tenant and a positive ttl are required")
	}
	token = randomToken()
	res, err := c.issueToken.Run(ctx, c.rdb, []string{c.key("tokens", tenantID)}, ttl.Milliseconds(), token, maxOpen).Slice()
	if err != nil {
		return "", 0, fmt.Errorf("redis: issue token: %w", err)
	}
	if len(res) != 2 {
		return "", 0, fmt.Errorf("redis: issue token: unexpected reply %v", res)
	}
	if granted, _ := res[0].(int64); granted != 1 {
		wait, _ := res[1].(int64)
		return "", time.Duration(wait) * time.Millisecond, nil
	}
	if err := c.rdb.Set(ctx, c.key("token", tenantID, token), orderID, ttl).Err(); err != nil {
		return "", 0, fmt.Errorf("redis: issue token: %w", err)
	}
	return token, 0, nil
}
