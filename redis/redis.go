// Package redis holds the Redis-backed fast paths in front of MySQL: one-time checkout
// tokens, per-order locks and response caches.
//
// Redis is never the source of truth. Every guarantee that matters (one pending payment
// per order, one transition per payment, one grant per benefit, one response per
// Idempotency-Key) is enforced by MySQL, and the layers here only absorb duplicates
// early. Callers must therefore treat any error from this package as "cache miss" or
// "lock not available" and carry on to MySQL; they must never fail a request, or skip
// the MySQL check, because Redis said so or was down.
package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Timeouts of clients made by Options. They are short on purpose: a slow Redis must
// degrade to a cache miss quickly rather than hold up a request.
const (
	dialTimeout  = 500 * time.Millisecond
	ioTimeout    = 500 * time.Millisecond
	poolTimeout  = time.Second
	poolSize     = 32
	maxRetries   = 1
	dialAttempts = 1
)

// Options returns client options for addr (host:port, or a redis:// or rediss:// URL)
// with short dial, read, write and pool timeouts and at most one retry, so that an
// unreachable Redis fails fast.
func Options(addr string) (*goredis.Options, error) {
	opt := &goredis.Options{Addr: addr}
	if strings.HasPrefix(addr, "redis://") || strings.HasPrefix(addr, "rediss://") {
		var err error
		if opt, err = goredis.ParseURL(addr); err != nil {
			return nil, fmt.Errorf("redis: parse url: %w", err)
		}
	}
	opt.DialTimeout = dialTimeout
	opt.ReadTimeout = ioTimeout
	opt.WriteTimeout = ioTimeout
	opt.PoolTimeout = poolTimeout
	opt.PoolSize = poolSize
	opt.MaxRetries = maxRetries
	opt.DialerRetries = dialAttempts
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return opt, nil
}

// Open returns a client for addr built from Options, after checking it with PING.
func Open(ctx context.Context, addr string) (*goredis.Client, error) {
	opt, err := Options(addr)
	if err != nil {
		return nil, err
	}
	rdb := goredis.NewClient(opt)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis: ping %s: %w", opt.Addr, err)
	}
	return rdb, nil
}

// Client is the paykit view of a Redis server: every key it touches starts with its
// prefix, so tests and deployments sharing a server do not see each other's keys.
type Client struct {
	rdb          *goredis.Client
	prefix       string
	release      *goredis.Script
	extend       *goredis.Script
	claimToken   *goredis.Script
	releaseToken *goredis.Script
}

// New returns a Client on rdb whose keys all start with prefix (for example "paykit:").
// The prefix is used as given.
func New(client *goredis.Client, prefix string) *Client {
	return &Client{
		rdb:          client,
		prefix:       prefix,
		release:      goredis.NewScript(releaseScript),
		extend:       goredis.NewScript(extendScript),
		claimToken:   goredis.NewScript(claimTokenScript),
		releaseToken: goredis.NewScript(releaseTokenScript),
	}
}

// Redis returns the underlying go-redis client.
func (c *Client) Redis() *goredis.Client { return c.rdb }

// Prefix returns the key prefix.
func (c *Client) Prefix() string { return c.prefix }

// Ping checks the connection.
func (c *Client) Ping(ctx context.Context) error {
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: ping: %w", err)
	}
	return nil
}

// key joins the prefix and parts with ':'. Only the last part may contain ':' (tenant
// ids and channels cannot), so distinct inputs never map to the same key.
func (c *Client) key(parts ...string) string {
	return c.prefix + strings.Join(parts, ":")
}

// randomToken returns 128 random bits, hex-encoded.
func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// SlogLogger adapts a *slog.Logger to go-redis's internal logger, so that the client's
// own messages (pool dial failures while Redis is down, for example) are structured
// like every other log line instead of going to stderr as plain text. Install it once
// at start with goredis.SetLogger(redis.SlogLogger(logger)).
type SlogLogger struct{ Logger *slog.Logger }

// Printf logs one go-redis message at debug level: a Redis outage produces one per failed
// dial, and the callers already report it once, at the level it deserves (readiness
// shows Redis as degraded, the success path warns that it runs without the lock).
func (l SlogLogger) Printf(ctx context.Context, format string, v ...any) {
	l.Logger.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}
