package redis_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/mysql"
	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/redis"
)

// TestRedisDown_MySQLStillExactlyOnce runs the request paths the way the API uses these
// layers — token, lock and cache in Redis first, MySQL after — with Redis unreachable.
// Every Redis call fails (and is treated as a miss), and MySQL alone still gives
// exactly-once results.
func TestRedisDown_MySQLStillExactlyOnce(t *testing.T) {
	db, _ := testenv.MySQL(t)
	st := mysql.NewStore(db)
	defer st.Close()
	opt, err := redis.Options("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	defer rdb.Close()
	rc := redis.New(rdb, "paykit_t_down:")
	ctx := context.Background()
	const n = 50
	var redisErrors atomic.Int32
	miss := func(err error) {
		if err != nil {
			redisErrors.Add(1)
		}
	}

	// Create: claim the checkout token, lock the order, insert the pending payment.
	var created, existed atomic.Int32
	testenv.Parallel(n, func(i int) {
		_, _, err := rc.ClaimToken(ctx, "t1", "0123456789abcdef0123456789abcdef", "o1", fmt.Sprint("request-", i))
		miss(err)
		lock, err := rc.AcquireOrWait(ctx, "payment:t1:o1", 10*time.Second, 100*time.Millisecond)
		miss(err)
		np := payment.NewPayment{
			PaymentNo: fmt.Sprintf("pay_%02d", i), TenantID: "t1", OrderID: "o1", Amount: 990,
			Currency: "CNY", Subject: "s", ExpireAt: time.Now().Add(time.Hour),
		}
		_, ex, err := st.CreatePendingPayment(ctx, np)
		if err != nil {
			t.Errorf("create %d: %v", i, err)
			return
		}
		if ex {
			existed.Add(1)
		} else {
			created.Add(1)
		}
		if lock != nil {
			_, _ = lock.Release(ctx)
		}
	})
	var rows int
	if err := db.QueryRow("SELECT COUNT(*) FROM payments WHERE order_id = 'o1'").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("redis down, %d concurrent creates: created=%d existed=%d rows=%d", n, created.Load(), existed.Load(), rows)
	if created.Load() != 1 || existed.Load() != n-1 || rows != 1 {
		t.Fatal("want exactly one pending payment")
	}
	var paymentNo string
	if err := db.QueryRow("SELECT payment_no FROM payments WHERE order_id = 'o1'").Scan(&paymentNo); err != nil {
		t.Fatal(err)
	}

	// Notification: lock, mark paid.
	var changed atomic.Int32
	testenv.Parallel(n, func(i int) {
		lock, err := rc.AcquireOrWait(ctx, "payment:t1:o1", 10*time.Second, 100*time.Millisecond)
		miss(err)
		tr, err := st.MarkPaid(ctx, paymentNo, "T1", time.Time{})
		if err != nil {
			t.Errorf("mark paid %d: %v", i, err)
			return
		}
		if tr.Changed {
			changed.Add(1)
		}
		if lock != nil {
			_, _ = lock.Release(ctx)
		}
	})
	var events int
	if err := db.QueryRow("SELECT COUNT(*) FROM payment_events WHERE payment_no = ?", paymentNo).Scan(&events); err != nil {
		t.Fatal(err)
	}
	t.Logf("redis down, %d concurrent MarkPaid: changed=%d events=%d", n, changed.Load(), events)
	if changed.Load() != 1 || events != 1 {
		t.Fatal("want exactly one transition and one event")
	}

	// Idempotency-Key: cache lookup in Redis, reservation in MySQL.
	var acquired, inFlight atomic.Int32
	testenv.Parallel(n, func(i int) {
		_, found, err := rc.CachedIdempotentResponse(ctx, "t1", "idem-1")
		miss(err)
		if found {
			t.Error("a down Redis returned a cached response")
		}
		out, _, err := st.ReserveIdempotencyKey(ctx, payment.IdempotencyRecord{
			TenantID: "t1", Key: "idem-1", Fingerprint: "fp",
			LockedUntil: time.Now().Add(time.Minute), ExpiresAt: time.Now().Add(time.Hour),
		})
		switch {
		case err != nil:
			t.Errorf("reserve %d: %v", i, err)
		case out == payment.ReserveAcquired:
			acquired.Add(1)
		case out == payment.ReserveInFlight:
			inFlight.Add(1)
		}
	})
	t.Logf("redis down, %d concurrent reserves: acquired=%d in_flight=%d; redis errors treated as misses=%d",
		n, acquired.Load(), inFlight.Load(), redisErrors.Load())
	if acquired.Load() != 1 || inFlight.Load() != n-1 {
		t.Fatal("want exactly one acquirer")
	}
	if want := int32(n * 4); redisErrors.Load() != want {
		t.Fatalf("redis errors = %d, want every one of the %d calls to fail", redisErrors.Load(), want)
	}
	if _, err := rc.AcquireOrWait(ctx, "k", time.Second, time.Second); err == nil || errors.Is(err, redis.ErrLockBusy) {
		t.Fatalf("AcquireOrWait on a down Redis: %v, want a connection error", err)
	}
}
