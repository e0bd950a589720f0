package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/paykit/paykit/payment"
)

// cachedResponse is the JSON stored for a completed Idempotency-Key.
type cachedResponse struct {
	Fingerprint string    `json:"f"`
	Status      int       `json:"s"`
	Body        []byte    `json:"b"`
	ExpiresAt   time.Time `json:"e"`
}

// CacheIdempotentResponse caches the completed response of an Idempotency-Key for ttl,
// after it was stored in MySQL (CompleteIdempotencyKey), so that replays can skip MySQL.
func (c *Client) CacheIdempotentResponse(ctx context.Context, tenantID, key, fingerprint string, status int, body []byte, ttl time.Duration) error {
	if ttl <= 0 {
		return nil
	}
	v, err := json.Marshal(cachedResponse{
		Fingerprint: fingerprint, Status: status, Body: body, ExpiresAt: time.Now().Add(ttl).UTC(),
	})
	if err != nil {
		return fmt.Errorf("redis: cache response: %w", err)
	}
	if err := c.rdb.Set(ctx, c.key("idem", tenantID, key), v, ttl).Err(); err != nil {
		return fmt.Errorf("redis: cache response: %w", err)
	}
	return nil
}

// CachedIdempotentResponse returns the cached completed response of an Idempotency-Key
// as a completed record. found=false means a miss; so does any error. The caller must
// still compare the fingerprint, and on a miss go to ReserveIdempotencyKey in MySQL.
func (c *Client) CachedIdempotentResponse(ctx context.Context, tenantID, key string) (payment.IdempotencyRecord, bool, error) {
	v, err := c.rdb.Get(ctx, c.key("idem", tenantID, key)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return payment.IdempotencyRecord{}, false, nil
	}
	if err != nil {
		return payment.IdempotencyRecord{}, false, fmt.Errorf("redis: cached response: %w", err)
	}
	var cr cachedResponse
	if err := json.Unmarshal(v, &cr); err != nil {
		return payment.IdempotencyRecord{}, false, fmt.Errorf("redis: cached response: %w", err)
	}
	return payment.IdempotencyRecord{
		TenantID:       tenantID,
		Key:            key,
		Fingerprint:    cr.Fingerprint,
		State:          payment.IdempotencyCompleted,
		ResponseStatus: cr.Status,
		ResponseBody:   cr.Body,
		ExpiresAt:      cr.ExpiresAt,
	}, true, nil
}
