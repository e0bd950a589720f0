package gateways

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// maxCached bounds the entries a cache keeps; past it the least recently used goes.
const maxCached = 10000

// ttlCache reuses a read younger than its ttl, kept in an expirable LRU; a ttl of zero
// reads at every call. It is safe for concurrent use; two callers that miss at once both
// read, and the later read is kept.
type ttlCache[V any] struct {
	mu  sync.Mutex
	lru *expirable.LRU[string, V] // nil: nothing is kept
}

func newTTLCache[V any](ttl time.Duration) *ttlCache[V] {
	c := &ttlCache[V]{}
	c.setTTL(ttl)
	return c
}

func (c *ttlCache[V]) current() *expirable.LRU[string, V] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru
}

// get returns the value under key if it was read less than the ttl ago, or else reads
// it and keeps it. A failed read is not kept.
func (c *ttlCache[V]) get(key string, read func() (V, error)) (V, error) {
	lru := c.current()
	if lru != nil {
		if v, ok := lru.Get(key); ok {
			return v, nil
		}
	}
	v, err := read()
	if err != nil {
		return v, err
	}
	if lru != nil {
		lru.Add(key, v)
	}
	return v, nil
}

// setTTL starts a new cache whose reads are kept for d (none for d <= 0). It is meant for
// the wiring: the cache it replaces keeps its expiry goroutine.
func (c *ttlCache[V]) setTTL(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru = nil
	if d > 0 {
		c.lru = expirable.NewLRU[string, V](maxCached, nil, d)
	}
}
