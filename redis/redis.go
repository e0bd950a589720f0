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
	"net/url"
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
	// On a cluster the client's own loop of redirects and retries (at most one more try)
	// replaces the per-node retry (-1: none), so that a hung master costs two timeouts,
	// not eight.
	clusterRedirects   = 1
	clusterNodeRetries = -1
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
	short(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout, &opt.PoolSize, &opt.MaxRetries, &opt.DialerRetries)
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return opt, nil
}

// Deployment says which Redis to use: one server, a Redis Cluster or a Sentinel-managed
// failover pair. Every command paykit sends and every script it runs touches one key, so
// any of them works; none of them is ever the source of truth.
type Deployment struct {
	// Addr is one address (host:port, or a redis:// or rediss:// URL), or several
	// host:port, comma-separated: the seed nodes of a Redis Cluster, or with MasterName
	// the Sentinels.
	Addr string
	// Cluster makes a single address a Redis Cluster's (a configuration endpoint).
	Cluster bool
	// MasterName is the Sentinel master's name; Addr then lists the Sentinels.
	MasterName string
}

// Addrs splits Addr on commas, trimming spaces and dropping empty entries.
func (d Deployment) Addrs() []string {
	var out []string
	for _, a := range strings.Split(d.Addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Kind is "single", "cluster" or "sentinel".
func (d Deployment) Kind() string {
	switch {
	case d.MasterName != "":
		return "sentinel"
	case d.Cluster || len(d.Addrs()) > 1:
		return "cluster"
	}
	return "single"
}

func isURL(a string) bool {
	return strings.HasPrefix(a, "redis://") || strings.HasPrefix(a, "rediss://")
}

// Check says what is wrong with d, if anything: no address, or a URL in a list (a URL is
// only taken alone: one server, or a cluster's configuration endpoint). Its errors never
// carry a URL's password.
func (d Deployment) Check() error {
	addrs := d.Addrs()
	if len(addrs) == 0 {
		return fmt.Errorf("redis: no address in %q", Redact(d.Addr))
	}
	if len(addrs) > 1 || d.MasterName != "" {
		for _, a := range addrs {
			if isURL(a) {
				return fmt.Errorf("redis: %q: a list of %s addresses takes host:port entries, not URLs", Redact(d.Addr), d.Kind())
			}
		}
	}
	return nil
}

// Redact hides the passwords of the URLs in addr (one address or a comma-separated list)
// for logs and errors.
func Redact(addr string) string {
	parts := strings.Split(addr, ",")
	for i, a := range parts {
		if u, err := url.Parse(strings.TrimSpace(a)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// Dial returns a client for d with Options' short timeouts and single retry, without
// checking that it answers (see Check for what it refuses). On a cluster a command is
// tried at most twice in all (one redirect or retry, no retry per node), so a master that
// hangs costs a caller about as long as one server that hangs.
func Dial(d Deployment) (goredis.UniversalClient, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	addrs := d.Addrs()
	switch d.Kind() {
	case "single":
		opt, err := Options(addrs[0])
		if err != nil {
			return nil, err
		}
		return goredis.NewClient(opt), nil
	case "cluster":
		if len(addrs) == 1 && isURL(addrs[0]) {
			opt, err := goredis.ParseClusterURL(addrs[0])
			if err != nil {
				return nil, fmt.Errorf("redis: parse cluster url: %w", err)
			}
			short(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout, &opt.PoolSize, &opt.MaxRetries, &opt.DialerRetries)
			opt.MaxRetries, opt.MaxRedirects = clusterNodeRetries, clusterRedirects
			opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
			return goredis.NewClusterClient(opt), nil
		}
	}
	opt := &goredis.UniversalOptions{Addrs: addrs, MasterName: d.MasterName, IsClusterMode: d.Kind() == "cluster"}
	short(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout, &opt.PoolSize, &opt.MaxRetries, &opt.DialerRetries)
	if d.Kind() == "cluster" {
		opt.MaxRetries, opt.MaxRedirects = clusterNodeRetries, clusterRedirects
		opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	}
	return goredis.NewUniversalClient(opt), nil
}

// short sets the timeouts, pool and retries every client of this package has.
func short(dial, read, write, pool *time.Duration, size, retries, dialRetries *int) {
	*dial, *read, *write, *pool = dialTimeout, ioTimeout, ioTimeout, poolTimeout
	*size, *retries, *dialRetries = poolSize, maxRetries, dialAttempts
}

// Open returns a client for addr (as Deployment.Addr: several comma-separated addresses
// are a cluster's), after checking it with PING.
func Open(ctx context.Context, addr string) (goredis.UniversalClient, error) {
	rdb, err := Dial(Deployment{Addr: addr})
	if err != nil {
		return nil, err
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis: ping %s: %w", Redact(addr), err)
	}
	return rdb, nil
}

// Client is the paykit view of a Redis deployment: every key it touches starts with its
// prefix, so tests and deployments sharing a server do not see each other's keys.
type Client struct {
	rdb          goredis.UniversalClient
	prefix       string
	release      *goredis.Script
	extend       *goredis.Script
	claimToken   *goredis.Script
	releaseToken *goredis.Script
	gcra         *goredis.Script
	hold         *goredis.Script
	issueToken   *goredis.Script
}

// New returns a Client on rdb whose keys all start with prefix (for example "paykit:").
// The prefix is used as given.
func New(client goredis.UniversalClient, prefix string) *Client {
	return &Client{
		rdb:          client,
		prefix:       prefix,
		release:      goredis.NewScript(releaseScript),
		extend:       goredis.NewScript(extendScript),
		claimToken:   goredis.NewScript(claimTokenScript),
		releaseToken: goredis.NewScript(releaseTokenScript),
		gcra:         goredis.NewScript(gcraScript),
		hold:         goredis.NewScript(holdScript),
		issueToken:   goredis.NewScript(issueTokenScript),
	}
}

// Redis returns the underlying go-redis client.
func (c *Client) Redis() goredis.UniversalClient { return c.rdb }

// Prefix returns the key prefix.
func (c *Client) Prefix() string { return c.prefix }

// Ping checks the connection. On a cluster it pings every master, so that readiness does not depend on which node a
// single PING happens to reach.
func (c *Client) Ping(ctx context.Context) error {
	if cc, ok := c.rdb.(*goredis.ClusterClient); ok {
		if err := cc.ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error {
			return node.Ping(ctx).Err()
		}); err != nil {
			return fmt.Errorf("redis: ping every master: %w", err)
		}
		return nil
	}
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
