package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/payment"
)

const tenantKey = "paykit.tenant"

// HashAPIKey returns the stored form of an API key: hex SHA-256. API keys are random
// 128-bit+ secrets, so a fast hash is enough and keeps authentication cheap.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

type cachedTenant struct {
	tenant  payment.Tenant
	expires time.Time
}

// tenantCache remembers authenticated API keys briefly to save a MySQL round trip per
// request. Keys are the hashes, never the keys themselves.
type tenantCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]cachedTenant
}

func newTenantCache(ttl time.Duration) *tenantCache {
	return &tenantCache{ttl: ttl, m: make(map[string]cachedTenant)}
}

func (tc *tenantCache) get(hash string) (payment.Tenant, bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	ct, ok := tc.m[hash]
	if !ok || time.Now().After(ct.expires) {
		delete(tc.m, hash)
		return payment.Tenant{}, false
	}
	return ct.tenant, true
}

func (tc *tenantCache) put(hash string, t payment.Tenant) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if len(tc.m) > 10000 {
		clear(tc.m)
	}
	tc.m[hash] = cachedTenant{tenant: t, expires: time.Now().Add(tc.ttl)}
}

// authenticate resolves "Authorization: Bearer <api key>" to a tenant. Every /v1 query is
// scoped to that tenant, so one tenant can never see or touch another's payments.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header.Get(echo.HeaderAuthorization)
		key, ok := strings.CutPrefix(h, "Bearer ")
		key = strings.TrimSpace(key)
		if !ok || key == "" || len(key) > 256 {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="paykit"`)
			return payment.Errorf(payment.EUNAUTHORIZED, "missing or malformed Authorization: Bearer <api key>")
		}
		hash := HashAPIKey(key)
		t, ok := s.tenants.get(hash)
		if !ok {
			var err error
			t, err = s.store.TenantByAPIKeyHash(c.Request().Context(), hash)
			if errors.Is(err, payment.ErrNotFound) {
				return payment.Errorf(payment.EUNAUTHORIZED, "unknown API key")
			}
			if err != nil {
				return &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot authenticate right now, retry later", Err: err}
			}
			s.tenants.put(hash, t)
		}
		c.Set(tenantKey, t)
		return next(c)
	}
}

func tenantOf(c echo.Context) payment.Tenant {
	t, _ := c.Get(tenantKey).(payment.Tenant)
	return t
}

func tenantIDOf(c echo.Context) string {
	return tenantOf(c).ID
}
