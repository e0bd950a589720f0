package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// tokenLen is the length of a hex-encoded 128-bit token.
const tokenLen = 32

// IssueToken creates a one-time checkout token for an order (orderID may be empty when
// the order is not known yet) that lives for ttl. It is the entry layer against double
// submission: the page gets a token, the submit consumes it.
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

// ConsumeToken atomically reads and deletes a token with GETDEL, so of any number of
// concurrent submissions exactly one gets ok=true and the order id it was issued for. A
// token that is unknown, expired, consumed, malformed or another tenant's gives
// ok=false and a nil error. When Redis is down the error is non-nil and the caller
// proceeds on MySQL's guarantees alone.
func (c *Client) ConsumeToken(ctx context.Context, tenantID, token string) (string, bool, error) {
	if tenantID == "" || !validToken(token) {
		return "", false, nil
	}
	orderID, err := c.rdb.GetDel(ctx, c.key("token", tenantID, token)).Result()
	if errors.Is(err, goredis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("redis: consume token: %w", err)
	}
	return orderID, true, nil
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
