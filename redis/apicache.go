package redis

import (
	"context"
	"time"

	"github.com/paykit/paykit/payment"
)

// APICache is the API's fast path (api.Cache) on Redis: checkout tokens and the
// cached responses of completed Idempotency-Keys.
type APICache struct{ Client *Client }

// IssueToken issues a one-time checkout token of an order.
func (r APICache) IssueToken(ctx context.Context, tenantID, orderID string, ttl time.Duration) (string, error) {
	return r.Client.IssueToken(ctx, tenantID, orderID, ttl)
}

// ClaimToken binds a token to its first request.
func (r APICache) ClaimToken(ctx context.Context, tenantID, token, orderID, binder string) (string, bool, error) {
	return r.Client.ClaimToken(ctx, tenantID, token, orderID, binder)
}

// ReleaseToken gives a claimed token back.
func (r APICache) ReleaseToken(ctx context.Context, tenantID, token, binder string) error {
	_, err := r.Client.ReleaseToken(ctx, tenantID, token, binder)
	return err
}

// CachedResponse returns the cached response of an Idempotency-Key.
func (r APICache) CachedResponse(ctx context.Context, tenantID, key string) (payment.IdempotencyRecord, bool, error) {
	return r.Client.CachedIdempotentResponse(ctx, tenantID, key)
}

// CacheResponse caches the response of a completed Idempotency-Key.
func (r APICache) CacheResponse(ctx context.Context, rec payment.IdempotencyRecord, ttl time.Duration) error {
	return r.Client.CacheIdempotentResponse(ctx, rec.TenantID, rec.Key, rec.Fingerprint, rec.ResponseStatus, rec.ResponseBody, ttl)
}

// Ping checks that Redis answers.
func (r APICache) Ping(ctx context.Context) error { return r.Client.Ping(ctx) }
