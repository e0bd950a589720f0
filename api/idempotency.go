package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/payment"
)

// ReplayedHeader marks a response replayed from the Idempotency-Key store.
const ReplayedHeader = "Idempotent-Replayed"

// idempotency runs a request at most once per (tenant, Idempotency-Key) and replays its
// answer to the retries (run).
type idempotency struct {
	store   payment.IdempotencyKeys
	cache   Cache // nil: no Redis
	cfg     Config
	log     *slog.Logger
	metrics *Metrics
}

func validIdempotencyKey(k string) bool {
	if len(k) < 8 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

func fingerprint(method, path string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func (ik *idempotency) replay(c echo.Context, rec payment.IdempotencyRecord) error {
	ik.metrics.idem.WithLabelValues("replay").Inc()
	c.Response().Header().Set(ReplayedHeader, "true")
	ct := echo.MIMEApplicationJSON
	if rec.ResponseStatus >= 400 {
		ct = "application/problem+json"
	}
	return c.Blob(rec.ResponseStatus, ct, rec.ResponseBody)
}

// run runs handle at most once per (tenant, Idempotency-Key): the first request
// runs; a concurrent one gets 409; a later one gets the first response replayed; one with
// another payload gets 422. MySQL is the source of truth; Redis only short-cuts replays.
func (ik *idempotency) run(c echo.Context, key string, body []byte, handle func() (int, []byte, error)) error {
	ctx := c.Request().Context()
	tenantID := tenantIDOf(c)
	if !validIdempotencyKey(key) {
		return payment.Errorf(payment.EINVALID, "Idempotency-Key must be 8-255 visible ASCII characters")
	}
	fp := fingerprint(c.Request().Method, c.Request().URL.Path, body)
	if ik.cache != nil {
		if rec, ok, err := ik.cache.CachedResponse(ctx, tenantID, key); err == nil && ok {
			if rec.Fingerprint != fp {
				ik.metrics.idem.WithLabelValues("mismatch").Inc()
				return payment.Errorf(payment.EMISMATCH, "Idempotency-Key was used with a different request")
			}
			return ik.replay(c, rec)
		}
	}
	now := time.Now().UTC()
	outcome, rec, err := ik.store.ReserveIdempotencyKey(ctx, payment.IdempotencyRecord{
		TenantID: tenantID, Key: key, Fingerprint: fp, State: payment.IdempotencyInFlight,
		LockedUntil: now.Add(ik.cfg.IdempotencyLock), ExpiresAt: now.Add(ik.cfg.IdempotencyTTL),
	})
	if err != nil {
		return &payment.Error{Code: payment.EUNAVAILABLE, Message: "cannot record the Idempotency-Key right now, retry", Err: err}
	}
	switch outcome {
	case payment.ReserveMismatch:
		ik.metrics.idem.WithLabelValues("mismatch").Inc()
		return payment.Errorf(payment.EMISMATCH, "Idempotency-Key was used with a different request")
	case payment.ReserveInFlight:
		ik.metrics.idem.WithLabelValues("in_flight").Inc()
		c.Response().Header().Set("Retry-After", "1")
		return payment.Errorf(payment.EINFLIGHT, "a request with this Idempotency-Key is still in progress")
	case payment.ReserveReplay:
		ik.cacheResponse(c, rec)
		return ik.replay(c, rec)
	}
	ik.metrics.idem.WithLabelValues("acquired").Inc()

	stopRenewing := ik.renewWhileRunning(c, rec)
	status, resp, herr := handle()
	stopRenewing()
	if herr != nil {
		ik.failed(c, rec, fp, herr)
		return herr
	}
	if status == http.StatusAccepted {
		// Still under way (a cancel that Alipay has not confirmed yet): not an answer to
		// keep, so a retry asks again and gets the outcome.
		if err := ik.store.ReleaseIdempotencyKey(detached(c), rec); err != nil {
			ik.log.ErrorContext(ctx, "release idempotency key", "tenant_id", tenantID, "err", err)
		}
		return c.JSONBlob(status, resp)
	}
	ik.complete(c, rec, fp, status, resp)
	return c.JSONBlob(status, resp)
}

// failed keeps the problem a request failed with as its answer, or frees the key when
// the failure was not the client's fault, so that a retry runs again.
func (ik *idempotency) failed(c echo.Context, rec payment.IdempotencyRecord, fp string, herr error) {
	status, p := problemFor(c, herr)
	// payment_not_paid may change (a refund asked for while the payment's notification
	// is still on its way), so it is answered afresh on every retry, never stored.
	if code := payment.ErrorCode(herr); status >= 500 || code == payment.EINFLIGHT || code == payment.EFINISHING || code == payment.ENOTPAID {
		if err := ik.store.ReleaseIdempotencyKey(detached(c), rec); err != nil {
			ik.log.ErrorContext(c.Request().Context(), "release idempotency key", "tenant_id", tenantIDOf(c), "err", err)
		}
		return
	}
	p.RequestID = ""
	resp, _ := json.Marshal(p)
	ik.complete(c, rec, fp, status, resp)
}

// renewWhileRunning keeps the in-flight lock on held alive, renewing it every third of
// IdempotencyLock, until the returned stop is called (it waits for the renewer to end).
// The lock is short so that the key of a request whose process died frees within
// seconds; the renewals keep a slow request from being taken over by its own retry.
func (ik *idempotency) renewWhileRunning(c echo.Context, held payment.IdempotencyRecord) (stop func()) {
	ctx, cancel := context.WithCancel(detached(c))
	done := make(chan struct{})
	every := max(ik.cfg.IdempotencyLock/3, time.Millisecond)
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			held.LockedUntil = time.Now().Add(ik.cfg.IdempotencyLock)
			rctx, rcancel := context.WithTimeout(ctx, every)
			err := ik.store.RenewIdempotencyKey(rctx, held)
			rcancel()
			switch {
			case err == nil:
			case ctx.Err() != nil:
				return
			case payment.ErrorCode(err) == payment.ECONFLICT:
				// Its lock ran out (a renewal was lost or late) and a retry took over; this
				// request's answer will not be stored, the retry's will.
				ik.log.WarnContext(ctx, "idempotency key taken over while its request ran", "tenant_id", held.TenantID,
					"request_id", requestID(c), "err", err)
				return
			default:
				ik.log.WarnContext(ctx, "renew idempotency key", "tenant_id", held.TenantID, "request_id", requestID(c), "err", err)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func (ik *idempotency) complete(c echo.Context, held payment.IdempotencyRecord, fp string, status int, resp []byte) {
	ctx := detached(c)
	tenantID, key := held.TenantID, held.Key
	if err := ik.store.CompleteIdempotencyKey(ctx, held, status, resp); err != nil {
		// The answer is still correct; a retry will find the key in flight until the
		// lock expires and then run again, landing on the same workflow update.
		ik.log.ErrorContext(ctx, "complete idempotency key", "tenant_id", tenantID, "err", err)
		return
	}
	ik.cacheResponse(c, payment.IdempotencyRecord{TenantID: tenantID, Key: key, Fingerprint: fp,
		State: payment.IdempotencyCompleted, ResponseStatus: status, ResponseBody: resp, ExpiresAt: held.ExpiresAt})
}

// cacheResponse caches a completed response in Redis for what is left of its MySQL
// record's life (rec.ExpiresAt), so that a replay from the cache never outlives the
// record: a key MySQL has forgotten must be free again everywhere.
func (ik *idempotency) cacheResponse(c echo.Context, rec payment.IdempotencyRecord) {
	if ik.cache == nil {
		return
	}
	ttl := min(time.Until(rec.ExpiresAt), ik.cfg.IdempotencyTTL)
	if rec.ExpiresAt.IsZero() || ttl <= 0 {
		return
	}
	if err := ik.cache.CacheResponse(detached(c), rec, ttl); err != nil {
		ik.log.DebugContext(c.Request().Context(), "idempotency cache write skipped", "err", err)
	}
}
