package gateways

import (
	"sync"
	"time"
)

// maxCached bounds the entries a cache keeps; past it they are all dropped.
const maxCached = 10000

// ttlCache reuses a read younger than its ttl. It is safe for concurrent use; two
// callers that miss at once both read, and the later read is kept.
type ttlCache[V any] struct {
	mu      sync.Mutex
	ttl     time.Duration
	now     func() time.Time // the clock; nil means time.Now
	entries map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v  V
	at time.Time
}

func newTTLCache[V any](ttl time.Duration) *ttlCache[V] {
	return &ttlCache[V]{ttl: ttl, entries: map[string]ttlEntry[V]{}}
}

func (c *ttlCache[V]) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// get returns the value under key if it was read less than the ttl ago, or else reads
// it and keeps it. A failed read is not kept.
func (c *ttlCache[V]) get(key string, read func() (V, error)) (V, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok && c.clock().Sub(e.at) < c.ttl {
		c.mu.Unlock()
		return e.v, nil
	}
	c.mu.Unlock()
	v, err := read()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if len(c.entries) >= maxCached {
		clear(c.entries)
	}
	c.entries[key] = ttlEntry[V]{v: v, at: c.clock()}
	c.mu.Unlock()
	return v, nil
}

func (c *ttlCache[V]) setTTL(d time.Duration) {
	c.mu.Lock()
	c.ttl = d
	c.mu.Unlock()
}
