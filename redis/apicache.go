package redis

import (
	"context"
	"time"

	"github.com/paykit/paykit/payment"
)

// APICache is the API's fast path (api.Cache) on Redis: checkout tokens, the cached
// responses of completed Idempotency-Keys, and the per-tenant rate limits (api.Limiter).
type APICache struct{ Client *Client }

// IssueToken issues a one-time checkout token of an order, unless the tenant holds
// maxOpen unspent ones (IssueBoundedToken).
func (r APICache) IssueToken(ctx context.Context, tenantID, orderID string, ttl time.Duration, maxOpen int) (string, time.Duration, error) {
	return r.Client.IssueBoundedToken(ctx, tenantID, orderID, ttl, maxOpen)
}

// Allow takes one request of a tenant on a route from their shared limit.
func (r APICache) Allow(ctx context.Context, tenantID, route string, rate float64, burst int) (bool, time.Duration, error) {
	return r.Client.Allow(ctx, rate, burst, tenantID, route)
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
