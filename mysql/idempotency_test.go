package mysql_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paykit/paykit/internal/testenv"
	"github.com/paykit/paykit/payment"
)

func idemRec(key, fingerprint string, lock, expiry time.Duration) payment.IdempotencyRecord {
	now := time.Now()
	return payment.IdempotencyRecord{
		TenantID:    "t1",
		Key:         key,
		Fingerprint: fingerprint,
		LockedUntil: now.Add(lock),
		ExpiresAt:   now.Add(expiry),
	}
}

// held is the reservation of a key that was acquired once (lock_version 0).
func held(key string) payment.IdempotencyRecord {
	return payment.IdempotencyRecord{TenantID: "t1", Key: key}
}

func TestIdempotencyKey_StaleHolderCannotCompleteOrRelease(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	_, stale, err := st.ReserveIdempotencyKey(ctx, idemRec("k", "fp", 50*time.Millisecond, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the first holder stalls past its lock
	got, current, err := st.ReserveIdempotencyKey(ctx, idemRec("k", "fp", time.Minute, time.Hour))
	if err != nil || got != payment.ReserveAcquired || current.LockVersion == stale.LockVersion {
		t.Fatalf("takeover: %v %+v %v", got, current, err)
	}
	if err := st.ReleaseIdempotencyKey(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := st.ReserveIdempotencyKey(ctx, idemRec("k", "fp", time.Minute, time.Hour)); got != payment.ReserveInFlight {
		t.Fatalf("the stale holder's release freed the key: %v", got)
	}
	if err := st.CompleteIdempotencyKey(ctx, stale, 500, []byte("stale")); payment.ErrorCode(err) != payment.ECONFLICT {
		t.Fatalf("stale completion: %v, want conflict", err)
	}
	if err := st.CompleteIdempotencyKey(ctx, current, 201, []byte("current")); err != nil {
		t.Fatal(err)
	}
	got, rec, err := st.ReserveIdempotencyKey(ctx, idemRec("k", "fp", time.Minute, time.Hour))
	if err != nil || got != payment.ReserveReplay || string(rec.ResponseBody) != "current" {
		t.Fatalf("replay: %v %q %v", got, rec.ResponseBody, err)
	}
}

func TestIdempotencyKey_Lifecycle(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	reserve := func(key, fp string) func() (payment.ReserveOutcome, payment.IdempotencyRecord, error) {
		return func() (payment.ReserveOutcome, payment.IdempotencyRecord, error) {
			return st.ReserveIdempotencyKey(ctx, idemRec(key, fp, time.Minute, time.Hour))
		}
	}
	steps := []struct {
		name       string
		before     func() error
		reserve    func() (payment.ReserveOutcome, payment.IdempotencyRecord, error)
		want       payment.ReserveOutcome
		wantStatus int
		wantBody   string
	}{
		{name: "first request acquires", reserve: reserve("k1", "fpA"), want: payment.ReserveAcquired},
		{name: "second request while running is in flight", reserve: reserve("k1", "fpA"), want: payment.ReserveInFlight},
		{name: "other payload is a mismatch", reserve: reserve("k1", "fpB"), want: payment.ReserveMismatch},
		{
			name:    "after completion the response is replayed",
			before:  func() error { return st.CompleteIdempotencyKey(ctx, held("k1"), 201, []byte(`{"payment_no":"p1"}`)) },
			reserve: reserve("k1", "fpA"), want: payment.ReserveReplay, wantStatus: 201, wantBody: `{"payment_no":"p1"}`,
		},
		{
			name:    "completing again keeps the first response",
			before:  func() error { return st.CompleteIdempotencyKey(ctx, held("k1"), 500, []byte("other")) },
			reserve: reserve("k1", "fpA"), want: payment.ReserveReplay, wantStatus: 201, wantBody: `{"payment_no":"p1"}`,
		},
		{name: "completed key with other payload is a mismatch", reserve: reserve("k1", "fpB"), want: payment.ReserveMismatch},
		{
			name:    "releasing a completed key keeps it",
			before:  func() error { return st.ReleaseIdempotencyKey(ctx, held("k1")) },
			reserve: reserve("k1", "fpA"), want: payment.ReserveReplay, wantStatus: 201, wantBody: `{"payment_no":"p1"}`,
		},
		{name: "another key is independent", reserve: reserve("k2", "fpA"), want: payment.ReserveAcquired},
		{
			name:    "a released in-flight key can be retried",
			before:  func() error { return st.ReleaseIdempotencyKey(ctx, held("k2")) },
			reserve: reserve("k2", "fpC"), want: payment.ReserveAcquired,
		},
		{
			name: "keys are per tenant",
			reserve: func() (payment.ReserveOutcome, payment.IdempotencyRecord, error) {
				r := idemRec("k1", "fpZ", time.Minute, time.Hour)
				r.TenantID = "t2"
				return st.ReserveIdempotencyKey(ctx, r)
			},
			want: payment.ReserveAcquired,
		},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.before != nil {
				if err := s.before(); err != nil {
					t.Fatal(err)
				}
			}
			got, rec, err := s.reserve()
			if err != nil {
				t.Fatal(err)
			}
			if got != s.want {
				t.Fatalf("outcome = %v, want %v (record %+v)", got, s.want, rec)
			}
			if s.want == payment.ReserveReplay &&
				(rec.ResponseStatus != s.wantStatus || string(rec.ResponseBody) != s.wantBody || rec.State != payment.IdempotencyCompleted) {
				t.Fatalf("replayed %d %q state %v", rec.ResponseStatus, rec.ResponseBody, rec.State)
			}
		})
	}

	if err := st.CompleteIdempotencyKey(ctx, held("missing"), 200, nil); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("completing a missing key: %v, want not found", err)
	}
	if err := st.ReleaseIdempotencyKey(ctx, held("missing")); err != nil {
		t.Fatalf("releasing a missing key: %v", err)
	}
	if _, _, err := st.ReserveIdempotencyKey(ctx, payment.IdempotencyRecord{TenantID: "t1", Key: "k"}); payment.ErrorCode(err) != payment.EINVALID {
		t.Fatalf("reserve without fingerprint: %v", err)
	}
}

func TestIdempotencyKey_ConcurrentReserve(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	const n = 50
	var acquired, inFlight, other atomic.Int32
	testenv.Parallel(n, func(i int) {
		got, _, err := st.ReserveIdempotencyKey(ctx, idemRec("same", "fp", time.Minute, time.Hour))
		switch {
		case err != nil:
			t.Errorf("caller %d: %v", i, err)
		case got == payment.ReserveAcquired:
			acquired.Add(1)
		case got == payment.ReserveInFlight:
			inFlight.Add(1)
		default:
			other.Add(1)
		}
	})
	rows := count(t, db, "SELECT COUNT(*) FROM idempotency_keys WHERE idem_key = 'same'")
	t.Logf("%d concurrent reserves of a new key: acquired=%d in_flight=%d other=%d rows=%d",
		n, acquired.Load(), inFlight.Load(), other.Load(), rows)
	if acquired.Load() != 1 || inFlight.Load() != n-1 || rows != 1 {
		t.Fatal("want exactly one acquirer and everyone else in flight")
	}
}

func TestIdempotencyKey_ExpiredLockTakeover(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	if got, _, err := st.ReserveIdempotencyKey(ctx, idemRec("k", "fp", 150*time.Millisecond, time.Hour)); err != nil || got != payment.ReserveAcquired {
		t.Fatalf("first reserve: %v %v", got, err)
	}
	if got, _, _ := st.ReserveIdempotencyKey(ctx, idemRec("k", "fp", time.Minute, time.Hour)); got != payment.ReserveInFlight {
		t.Fatalf("while locked: %v, want in flight", got)
	}
	time.Sleep(250 * time.Millisecond) // the first holder "died"

	const n = 40
	var acquired, inFlight, other atomic.Int32
	testenv.Parallel(n, func(i int) {
		got, rec, err := st.ReserveIdempotencyKey(ctx, idemRec("k", "fp", time.Minute, time.Hour))
		switch {
		case err != nil:
			t.Errorf("caller %d: %v", i, err)
		case got == payment.ReserveAcquired:
			acquired.Add(1)
			if time.Until(rec.LockedUntil) < 30*time.Second {
				t.Errorf("taken-over lock ends at %v", rec.LockedUntil)
			}
		case got == payment.ReserveInFlight:
			inFlight.Add(1)
		default:
			other.Add(1)
		}
	})
	var version int64
	if err := db.QueryRow("SELECT lock_version FROM idempotency_keys WHERE idem_key = 'k'").Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d concurrent takeovers of an expired lock: acquired=%d in_flight=%d other=%d lock_version=%d",
		n, acquired.Load(), inFlight.Load(), other.Load(), version)
	if acquired.Load() != 1 || inFlight.Load() != n-1 || version != 1 {
		t.Fatal("want exactly one taker")
	}
}

func TestIdempotencyKey_ExpiredRecordsAreAbsentAndPurged(t *testing.T) {
	st, db := newStore(t)
	ctx := context.Background()
	for _, key := range []string{"old1", "old2", "old3"} {
		if _, _, err := st.ReserveIdempotencyKey(ctx, idemRec(key, "fp", time.Minute, 100*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CompleteIdempotencyKey(ctx, held("old3"), 200, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.ReserveIdempotencyKey(ctx, idemRec("fresh", "fp", time.Minute, time.Hour)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)

	// An expired record is absent: a new request acquires it whatever its fingerprint,
	// and exactly one of many concurrent ones does.
	const n = 20
	var acquired, inFlight atomic.Int32
	testenv.Parallel(n, func(i int) {
		got, _, err := st.ReserveIdempotencyKey(ctx, idemRec("old1", "new-fp", time.Minute, time.Hour))
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
		switch got {
		case payment.ReserveAcquired:
			acquired.Add(1)
		case payment.ReserveInFlight:
			inFlight.Add(1)
		}
	})
	t.Logf("%d concurrent reserves of an expired key: acquired=%d in_flight=%d", n, acquired.Load(), inFlight.Load())
	if acquired.Load() != 1 || inFlight.Load() != n-1 {
		t.Fatal("want exactly one acquirer of the expired key")
	}

	purged, err := st.PurgeExpiredIdempotencyKeys(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	left := count(t, db, "SELECT COUNT(*) FROM idempotency_keys")
	t.Logf("purge: deleted=%d left=%d", purged, left)
	if purged != 2 || left != 2 {
		t.Fatalf("purged %d, left %d; want old2 and old3 purged, old1 (renewed) and fresh kept", purged, left)
	}
	if purged, _ := st.PurgeExpiredIdempotencyKeys(ctx, time.Now()); purged != 0 {
		t.Fatalf("second purge deleted %d", purged)
	}
}

// TestIdempotencyKey_ReplayCarriesExpiry: the API caches a replayed response for what is
// left of the record's life, so the record a replay returns must say when it expires.
func TestIdempotencyKey_ReplayCarriesExpiry(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	first := idemRec("k", "fp", time.Minute, 90*time.Minute)
	_, held, err := st.ReserveIdempotencyKey(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CompleteIdempotencyKey(ctx, held, 201, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	got, rec, err := st.ReserveIdempotencyKey(ctx, idemRec("k", "fp", time.Minute, 24*time.Hour))
	if err != nil || got != payment.ReserveReplay {
		t.Fatalf("replay: %v %v", got, err)
	}
	if d := rec.ExpiresAt.Sub(first.ExpiresAt); d < -time.Millisecond || d > time.Millisecond {
		t.Fatalf("replayed record expires at %v, want the first reservation's %v", rec.ExpiresAt, first.ExpiresAt)
	}
}

func TestIdempotencyKey_Renew(t *testing.T) {
	st, _ := newStore(t)
	ctx := context.Background()
	// A second: the renewals below come every third of it, so a lapse needs a stall of
	// two thirds of a second between two of them. With 150 ms, a stall of 100 ms (one
	// renewal's round trip on a loaded machine, -race) took the key over in a CI run.
	const lock = time.Second
	_, holder, err := st.ReserveIdempotencyKey(ctx, idemRec("k", "fp", lock, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	renew := func(h payment.IdempotencyRecord) error {
		h.LockedUntil = time.Now().Add(lock)
		return st.RenewIdempotencyKey(ctx, h)
	}

	// Renewed every third of its lock, the holder keeps the key well past the first lock.
	for range 6 {
		time.Sleep(lock / 3)
		if err := renew(holder); err != nil {
			t.Fatalf("renew: %v", err)
		}
	}
	if got, _, err := st.ReserveIdempotencyKey(ctx, idemRec("k", "fp", time.Minute, time.Hour)); err != nil || got != payment.ReserveInFlight {
		t.Fatalf("a renewed key: %v (%v), want in flight", got, err)
	}

	// Without renewals the lock runs out, and another request takes the key over; the old
	// holder can then no longer renew it.
	time.Sleep(2 * lock)
	got, taker, err := st.ReserveIdempotencyKey(ctx, idemRec("k", "fp", time.Minute, time.Hour))
	if err != nil || got != payment.ReserveAcquired {
		t.Fatalf("takeover: %v %v", got, err)
	}
	if err := renew(holder); payment.ErrorCode(err) != payment.ECONFLICT {
		t.Fatalf("renew by the taken-over holder: %v, want conflict", err)
	}
	if err := renew(taker); err != nil {
		t.Fatalf("renew by the new holder: %v", err)
	}

	// A renewal never shortens a lock, and is a no-op once the holder completed.
	short := taker
	short.LockedUntil = time.Now()
	if err := st.RenewIdempotencyKey(ctx, short); err != nil {
		t.Fatal(err)
	}
	if got, _, err := st.ReserveIdempotencyKey(ctx, idemRec("k", "fp", time.Minute, time.Hour)); err != nil || got != payment.ReserveInFlight {
		t.Fatalf("after a renewal to now: %v (%v), want still in flight", got, err)
	}
	if err := st.CompleteIdempotencyKey(ctx, taker, 201, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if err := renew(taker); err != nil {
		t.Fatalf("renew after completion: %v", err)
	}
	if got, rec, _ := st.ReserveIdempotencyKey(ctx, idemRec("k", "fp", time.Minute, time.Hour)); got != payment.ReserveReplay || string(rec.ResponseBody) != "ok" {
		t.Fatalf("after completion: %v %q", got, rec.ResponseBody)
	}
	if err := renew(held("missing")); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("renew of a missing key: %v, want not found", err)
	}
}
