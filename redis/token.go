package redis

import (
	"context"
	"fmt"
	"time"
)

// tokenLen is the length of a hex-encoded 128-bit token.
const tokenLen = 32

// A token's value is the order id it was issued for ("" for any order) while it is
// unspent, and "@" + order id + ":" + binder once a request claimed it. Order ids never
// contain "@" or ":", so the two forms cannot be confused and the first ":" ends the
// order id whatever the binder holds.

// claimTokenScript binds an unspent token to ARGV[2] (the binder) and returns
// {1, order}. A token already bound to the same binder gives {1, order} again; one bound
// to another binder, or missing, gives {0, ""}; one issued for another order than
// ARGV[1] gives {2, order} and stays as it was.
const claimTokenScript = `local v = redis.call("GET", KEYS[1])
if not v then return {0, ""} end
local order, binder = v, nil
if string.sub(v, 1, 1) == "@" then
	local sep = string.find(v, ":", 2, true)
	if not sep then return {0, ""} end
	order, binder = string.sub(v, 2, sep - 1), string.sub(v, sep + 1)
end
if order ~= "" and order ~= ARGV[1] then return {2, order} end
if binder == nil then
	redis.call("SET", KEYS[1], "@" .. order .. ":" .. ARGV[2], "KEEPTTL")
	return {1, order}
end
if binder == ARGV[2] then return {1, order} end
return {0, ""}`

// releaseTokenScript puts a token claimed by ARGV[1] back to unspent, keeping its TTL. A
// token claimed by another binder, unspent, or gone is left alone.
const releaseTokenScript = `local v = redis.call("GET", KEYS[1])
if not v or string.sub(v, 1, 1) ~= "@" then return 0 end
local sep = string.find(v, ":", 2, true)
if not sep or string.sub(v, sep + 1) ~= ARGV[1] then return 0 end
redis.call("SET", KEYS[1], string.sub(v, 2, sep - 1), "KEEPTTL")
return 1`

// Results of claimTokenScript.
const (
	claimRefused    = 0
	claimGranted    = 1
	claimOtherOrder = 2
)

// IssueToken creates a one-time checkout token for an order (orderID may be empty when
// the order is not known yet) that lives for ttl. It is the entry layer against double
// submission: the page gets a token, the submit claims it.
func (c *Client) IssueToken(ctx context.Context, tenantID, orderID string, ttl time.Duration) (string, error) {
	if tenantID == "" || ttl <= 0 {
		return "", fmt.Errorf("redis: issue token: tenant and a positive ttl are required")
	}
	token := randomToken()
	if err := c.rdb.Set(ctx, c.key("token", tenantID, token), orderID, ttl).Err(); err != nil {
		return "", fmt.Errorf("redis: issue token: %w", err)
	}
	return token, nil
}

// ClaimToken binds a token to one request, named by binder, atomically: of any number of
// concurrent claims with different binders exactly one gets ok=true. A later claim with
// the same binder also gets ok=true, because it is that request retried (the layers
// below make the retry exactly-once). The token keeps its TTL.
//
// issuedFor is the order id the token was issued for. A token issued for an order other
// than orderID gives ok=false with that order id, and is not claimed. A token that is
// unknown, expired, claimed by another binder, malformed or another tenant's gives
// ok=false, issuedFor "" and a nil error. When Redis is down the error is non-nil and
// the caller proceeds on MySQL's guarantees alone.
func (c *Client) ClaimToken(ctx context.Context, tenantID, token, orderID, binder string) (issuedFor string, ok bool, err error) {
	if tenantID == "" || !validToken(token) {
		return "", false, nil
	}
	if binder == "" {
		return "", false, fmt.Errorf("redis: claim token: a binder is required")
	}
	res, err := c.claimToken.Run(ctx, c.rdb, []string{c.key("token", tenantID, token)}, orderID, binder).Slice()
	if err != nil {
		return "", false, fmt.Errorf("redis: claim token: %w", err)
	}
	if len(res) != 2 {
		return "", false, fmt.Errorf("redis: claim token: unexpected reply %v", res)
	}
	code, _ := res[0].(int64)
	order, _ := res[1].(string)
	switch code {
	case claimGranted:
		// Spent: it no longer counts against the tenant's open tokens (IssueBoundedToken).
		// A failure here only leaves it counted until it expires.
		_ = c.rdb.ZRem(ctx, c.key("tokens", tenantID), token).Err()
		return order, true, nil
	case claimOtherOrder:
		return order, false, nil
	default:
		return "", false, nil
	}
}

// ReleaseToken undoes ClaimToken for a request that failed through no fault of the
// client's, so that its retry (with any binder) can claim the token again. It only
// releases a token still claimed by binder and reports whether it did.
func (c *Client) ReleaseToken(ctx context.Context, tenantID, token, binder string) (bool, error) {
	if tenantID == "" || !validToken(token) || binder == "" {
		return false, nil
	}
	n, err := c.releaseToken.Run(ctx, c.rdb, []string{c.key("token", tenantID, token)}, binder).Int64()
	if err != nil {
		return false, fmt.Errorf("redis: release token: %w", err)
	}
	return n == 1, nil
}

func validToken(token string) bool {
	if len(token) != tokenLen {
		return false
	}
	for i := range len(token) {
		ch := token[i]
		if (ch < '0' || ch > '9') && (ch < 'a' || ch > 'f') {
			return false
		}
	}
	return true
}
