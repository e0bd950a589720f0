package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/paykit/paykit/payment"
)

// Defaults for a reservation that leaves LockedUntil or ExpiresAt zero.
const (
	DefaultIdempotencyLock   = 30 * time.Second
	DefaultIdempotencyExpiry = 24 * time.Hour
)

const (
	maxIdempotencyKey     = 255
	maxFingerprint        = 128
	maxReserveAttempts    = 5
	purgeBatch            = 1000
	idempotencyKeyColumns = `id, lock_version, tenant_id, idem_key, fingerprint, state, response_status, response_body, locked_until, expires_at`
)

const (
	qInsertIdem = `INSERT INTO idempotency_keys
	(tenant_id, idem_key, fingerprint, state, locked_until, expires_at, created_at, updated_at)
VALUES (?, ?, ?, 0, ?, ?, ?, ?)`
	qIdemByKey = `SELECT ` + idempotencyKeyColumns + ` FROM idempotency_keys WHERE tenant_id = ? AND idem_key = ?`
	// qReplaceIdem reuses the row of an expired record for a new request. The
	// lock_version compare-and-set lets exactly one of several concurrent takers win.
	qReplaceIdem = `UPDATE idempotency_keys SET fingerprint = ?, state = 0, response_status = 0, response_body = NULL,
	locked_until = ?, expires_at = ?, created_at = ?, updated_at = ?, lock_version = lock_version + 1
WHERE id = ? AND lock_version = ?`
	// qTakeOverIdem takes over an in-flight record whose lock expired (its holder died).
	qTakeOverIdem = `UPDATE idempotency_keys SET locked_until = ?, expires_at = GREATEST(expires_at, ?),
	updated_at = ?, lock_version = lock_version + 1
WHERE id = ? AND lock_version = ? AND state = 0`
	qCompleteIdem = `UPDATE idempotency_keys SET state = 1, response_status = ?, response_body = ?, updated_at = ?
WHERE tenant_id = ? AND idem_key = ? AND state = 0 AND lock_version = ?`
	// qRenewIdem extends the lock of the holder named by lock_version, never shortening it.
	qRenewIdem = `UPDATE idempotency_keys SET locked_until = GREATEST(locked_until, ?), updated_at = ?
WHERE tenant_id = ? AND idem_key = ? AND state = 0 AND lock_version = ?`
	qReleaseIdem = `DELETE FROM idempotency_keys WHERE tenant_id = ? AND idem_key = ? AND state = 0 AND lock_version = ?`
	qPurgeIdem   = `DELETE FROM idempotency_keys WHERE expires_at < ? LIMIT 1000` // LIMIT = purgeBatch
)

// idemRow is an idempotency record with the columns the compare-and-sets need.
type idemRow struct {
	id          int64
	lockVersion int64
	rec         payment.IdempotencyRecord
}

// ReserveIdempotencyKey claims rec.Key for a request with rec.Fingerprint, holding it
// until rec.LockedUntil (default now+30s) and remembering it until rec.ExpiresAt
// (default now+24h). It inserts an in-flight record, and on a duplicate decides from the
// stored one:
//
//   - expired (ExpiresAt passed): treated as absent and replaced → ReserveAcquired
//   - another fingerprint → ReserveMismatch
//   - completed → ReserveReplay, with the stored response
//   - in flight, lock held → ReserveInFlight
//   - in flight, lock expired → taken over → ReserveAcquired
//
// Replacement and takeover are compare-and-sets, so of many concurrent callers exactly
// one acquires the key. The returned record is the one now stored.
func (st *Store) ReserveIdempotencyKey(ctx context.Context, rec payment.IdempotencyRecord) (payment.ReserveOutcome, payment.IdempotencyRecord, error) {
	if rec.TenantID == "" || rec.Key == "" || len(rec.Key) > maxIdempotencyKey ||
		rec.Fingerprint == "" || len(rec.Fingerprint) > maxFingerprint {
		return 0, payment.IdempotencyRecord{}, payment.Errorf(payment.EINVALID,
			"an idempotency key needs a tenant, a key of 1-%d bytes and a fingerprint", maxIdempotencyKey)
	}
	now := st.clock()
	rec = inFlight(rec, now)
	wait := txBackOff()
	for attempt := range maxReserveAttempts {
		if attempt > 0 {
			if err := sleep(ctx, wait.NextBackOff()); err != nil {
				return 0, payment.IdempotencyRecord{}, reserveError(err)
			}
		}
		out, got, done, err := st.reserveOnce(ctx, rec, now)
		if err != nil {
			return 0, payment.IdempotencyRecord{}, reserveError(err)
		}
		if done {
			return out, got, nil
		}
	}
	return 0, payment.IdempotencyRecord{}, &payment.Error{
		Code:    payment.ETOOMANYRETRIES,
		Message: "the idempotency key is contended; retry later",
		Err:     reserveError(fmt.Errorf("gave up after %d attempts", maxReserveAttempts)),
	}
}

func reserveError(err error) error { return fmt.Errorf("mysql: reserve idempotency key: %w", err) }

// inFlight is rec as a new in-flight record, its lock and expiry defaulted from now.
func inFlight(rec payment.IdempotencyRecord, now time.Time) payment.IdempotencyRecord {
	rec.State, rec.ResponseStatus, rec.ResponseBody = payment.IdempotencyInFlight, 0, nil
	rec.LockedUntil, rec.ExpiresAt = dbTime(rec.LockedUntil), dbTime(rec.ExpiresAt)
	if rec.LockedUntil.IsZero() {
		rec.LockedUntil = now.Add(DefaultIdempotencyLock)
	}
	if rec.ExpiresAt.IsZero() {
		rec.ExpiresAt = now.Add(DefaultIdempotencyExpiry)
	}
	return rec
}

// reserveOnce is one attempt of ReserveIdempotencyKey: insert rec, or decide from the
// record stored under its key. Not done means a race was lost: look again.
func (st *Store) reserveOnce(ctx context.Context, rec payment.IdempotencyRecord, now time.Time) (payment.ReserveOutcome, payment.IdempotencyRecord, bool, error) {
	_, err := st.exec(ctx, nil, qInsertIdem, rec.TenantID, rec.Key, rec.Fingerprint,
		rec.LockedUntil, rec.ExpiresAt, now, now)
	switch {
	case err == nil:
		rec.LockVersion = 0
		return payment.ReserveAcquired, rec, true, nil
	case IsRetryable(err):
		return 0, payment.IdempotencyRecord{}, false, nil
	case !IsDuplicate(err):
		return 0, payment.IdempotencyRecord{}, false, err
	}
	cur, err := st.getIdem(ctx, rec.TenantID, rec.Key)
	if errors.Is(err, payment.ErrNotFound) {
		return 0, payment.IdempotencyRecord{}, false, nil // released or purged since our insert: insert again
	}
	if err != nil {
		return 0, payment.IdempotencyRecord{}, false, err
	}
	return st.decide(ctx, rec, cur, now)
}

// decide answers a reservation from the record stored under its key: replaced if
// expired, a mismatch, a replay, in flight, or taken over if its lock expired.
func (st *Store) decide(ctx context.Context, rec payment.IdempotencyRecord, cur idemRow, now time.Time) (payment.ReserveOutcome, payment.IdempotencyRecord, bool, error) {
	switch {
	case !cur.rec.ExpiresAt.After(now):
		res, err := st.exec(ctx, nil, qReplaceIdem, rec.Fingerprint, rec.LockedUntil, rec.ExpiresAt,
			now, now, cur.id, cur.lockVersion)
		won, err := casWon(res, err)
		if err != nil || !won {
			return 0, payment.IdempotencyRecord{}, false, err
		}
		rec.LockVersion = cur.lockVersion + 1
		return payment.ReserveAcquired, rec, true, nil
	case cur.rec.Fingerprint != rec.Fingerprint:
		return payment.ReserveMismatch, cur.rec, true, nil
	case cur.rec.State == payment.IdempotencyCompleted:
		return payment.ReserveReplay, cur.rec, true, nil
	case cur.rec.LockedUntil.After(now):
		return payment.ReserveInFlight, cur.rec, true, nil
	}
	res, err := st.exec(ctx, nil, qTakeOverIdem, rec.LockedUntil, rec.ExpiresAt, now, cur.id, cur.lockVersion)
	won, err := casWon(res, err)
	if err != nil || !won {
		return 0, payment.IdempotencyRecord{}, false, err
	}
	taken := cur.rec
	taken.LockVersion = cur.lockVersion + 1
	taken.LockedUntil = rec.LockedUntil
	if rec.ExpiresAt.After(taken.ExpiresAt) {
		taken.ExpiresAt = rec.ExpiresAt
	}
	return payment.ReserveAcquired, taken, true, nil
}

// casWon reports whether a compare-and-set update changed its row; a retryable lock
// conflict counts as a lost race.
func casWon(res sql.Result, err error) (bool, error) {
	if err != nil {
		if IsRetryable(err) {
			return false, nil
		}
		return false, err
	}
	return affected(res)
}

// CompleteIdempotencyKey stores the response of the request holding the key. Completing
// a completed key again changes nothing (the first response stays); a key that does not
// exist (released, purged) is an error wrapping payment.ErrNotFound; a key another
// request took over (its lock_version moved on) is an ECONFLICT error.
func (st *Store) CompleteIdempotencyKey(ctx context.Context, held payment.IdempotencyRecord, status int, body []byte) error {
	if body == nil {
		body = []byte{}
	}
	tenantID, key := held.TenantID, held.Key
	res, err := st.exec(ctx, nil, qCompleteIdem, status, body, st.clock(), tenantID, key, held.LockVersion)
	if err != nil {
		return fmt.Errorf("mysql: complete idempotency key: %w", err)
	}
	changed, err := affected(res)
	if err != nil {
		return fmt.Errorf("mysql: complete idempotency key: %w", err)
	}
	if changed {
		return nil
	}
	cur, err := st.getIdem(ctx, tenantID, key)
	if err != nil {
		return fmt.Errorf("mysql: complete idempotency key: %w", err)
	}
	if cur.rec.State == payment.IdempotencyInFlight && cur.lockVersion != held.LockVersion {
		return payment.Errorf(payment.ECONFLICT, "idempotency key %q was taken over by another request", key)
	}
	return nil
}

// RenewIdempotencyKey extends the lock of the in-flight key held by held to
// held.LockedUntil (a lock is never shortened), so that a request running longer than
// its lock keeps its key while a crashed one loses it soon. A key another request took
// over is an ECONFLICT error, a missing one wraps payment.ErrNotFound, and a completed
// one is left as it is.
func (st *Store) RenewIdempotencyKey(ctx context.Context, held payment.IdempotencyRecord) error {
	res, err := st.exec(ctx, nil, qRenewIdem, dbTime(held.LockedUntil), st.clock(), held.TenantID, held.Key, held.LockVersion)
	if err != nil {
		return fmt.Errorf("mysql: renew idempotency key: %w", err)
	}
	changed, err := affected(res)
	if err != nil {
		return fmt.Errorf("mysql: renew idempotency key: %w", err)
	}
	if changed {
		return nil
	}
	cur, err := st.getIdem(ctx, held.TenantID, held.Key)
	if err != nil {
		return fmt.Errorf("mysql: renew idempotency key: %w", err)
	}
	if cur.lockVersion != held.LockVersion {
		return payment.Errorf(payment.ECONFLICT, "idempotency key %q was taken over by another request", held.Key)
	}
	return nil
}

// ReleaseIdempotencyKey deletes an in-flight key so that the client may retry. A
// completed key is kept (its response must still be replayed), a missing key is fine,
// and a key another request took over is left to that request.
func (st *Store) ReleaseIdempotencyKey(ctx context.Context, held payment.IdempotencyRecord) error {
	if _, err := st.exec(ctx, nil, qReleaseIdem, held.TenantID, held.Key, held.LockVersion); err != nil {
		return fmt.Errorf("mysql: release idempotency key: %w", err)
	}
	return nil
}

// PurgeExpiredIdempotencyKeys deletes keys that expired before now, in batches so that no
// single statement holds many locks, and returns how many it deleted.
func (st *Store) PurgeExpiredIdempotencyKeys(ctx context.Context, now time.Time) (int64, error) {
	var total int64
	for {
		res, err := st.exec(ctx, nil, qPurgeIdem, dbTime(now))
		if err != nil {
			return total, fmt.Errorf("mysql: purge idempotency keys: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("mysql: purge idempotency keys: %w", err)
		}
		total += n
		if n < purgeBatch {
			return total, nil
		}
	}
}

func (st *Store) getIdem(ctx context.Context, tenantID, key string) (idemRow, error) {
	var r idemRow
	err := st.queryRow(ctx, nil, qIdemByKey, []any{tenantID, key}, func(row *sql.Row) error {
		return row.Scan(&r.id, &r.lockVersion, &r.rec.TenantID, &r.rec.Key, &r.rec.Fingerprint, &r.rec.State,
			&r.rec.ResponseStatus, &r.rec.ResponseBody, &r.rec.LockedUntil, &r.rec.ExpiresAt)
	})
	r.rec.LockVersion = r.lockVersion
	return r, err
}
