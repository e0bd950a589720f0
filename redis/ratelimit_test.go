package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/redis"
)

// TestAllowSharesTheLimit: two clients on one Redis (two API processes) draw on one
// burst per tenant and route; the refused request learns how long to wait, another
// tenant keeps its own limit, and the limit refills at its rate.
func TestAllowSharesTheLimit(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	a, b := redis.New(rdb, prefix), redis.New(rdb, prefix)
	ctx := context.Background()
	const rate, burst = 10, 4 // one request every 100 ms
	for i := range burst {
		c := a
		if i%2 == 1 {
			c = b
		}
		if ok, _, err := c.Allow(ctx, rate, burst, "t1", "checkouts"); err != nil || !ok {
			t.Fatalf("request %d of the burst: %v, %v", i+1, ok, err)
		}
	}
	ok, wait, err := b.Allow(ctx, rate, burst, "t1", "checkouts")
	if err != nil || ok || wait <= 0 || wait > 100*time.Millisecond {
		t.Fatalf("over the burst: ok=%v wait=%v err=%v", ok, wait, err)
	}
	if ok, _, err := a.Allow(ctx, rate, burst, "t2", "checkouts"); err != nil || !ok {
		t.Fatalf("another tenant: %v, %v", ok, err)
	}
	if ok, _, err := a.Allow(ctx, rate, burst, "t1", "refunds"); err != nil || !ok {
		t.Fatalf("another route: %v, %v", ok, err)
	}
	time.Sleep(wait + 10*time.Millisecond)
	if ok, _, err := a.Allow(ctx, rate, burst, "t1", "checkouts"); err != nil || !ok {
		t.Fatalf("after the wait: %v, %v", ok, err)
	}
}

// TestOpenTokensAreBounded: a tenant holds at most maxOpen unspent tokens; a claimed one
// no longer counts; another tenant is not affected.
func TestOpenTokensAreBounded(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	var toks []string
	for range 3 {
		tok, wait, err := c.IssueBoundedToken(ctx, "t1", "", time.Minute, 3)
		if err != nil || tok == "" || wait != 0 {
			t.Fatalf("issue: %q %v %v", tok, wait, err)
		}
		toks = append(toks, tok)
	}
	tok, wait, err := c.IssueBoundedToken(ctx, "t1", "", time.Minute, 3)
	if err != nil || tok != "" || wait <= 0 || wait > time.Minute {
		t.Fatalf("over the bound: %q %v %v", tok, wait, err)
	}
	if tok, _, err := c.IssueBoundedToken(ctx, "t2", "", time.Minute, 3); err != nil || tok == "" {
		t.Fatalf("another tenant: %q %v", tok, err)
	}
	if _, ok, err := c.ClaimToken(ctx, "t1", toks[0], "o1", "A"); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if tok, _, err := c.IssueBoundedToken(ctx, "t1", "", time.Minute, 3); err != nil || tok == "" {
		t.Fatalf("after a claim: %q %v", tok, err)
	}
}
