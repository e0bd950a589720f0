// Package webhook signs paykit's merchant webhooks and verifies them, the way a merchant
// does. It imports nothing of paykit, so a merchant can copy it.
//
// The signature header is "t=<unix seconds>,v1=<hex>", where v1 is the hex
// HMAC-SHA256, under the tenant's webhook secret, of "<t>.<exact body bytes>". While a
// secret is being rotated the header carries one v1 per valid secret. Because the
// timestamp is signed, a verifier that refuses old timestamps refuses a captured
// webhook replayed later.
//
// Dedupe on the event id of the signed body (VerifyEvent returns it), not on the
// Paykit-Event-Id header, which the signature does not cover: a captured webhook
// replayed within the tolerance under a new header value would pass a dedupe on the
// header. VerifyEvent refuses a header that differs from the body's id.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far a webhook's timestamp may be from the verifier's clock.
const DefaultTolerance = 5 * time.Minute

// Errors of Verify.
var (
	ErrMalformed = errors.New("webhook: malformed signature header")
	ErrTooOld    = errors.New("webhook: timestamp outside the tolerance window")
	ErrSignature = errors.New("webhook: no signature matches")
	ErrEventID   = errors.New("webhook: the event id is not the signed body's")
	// ErrNoSecret refuses to sign or verify without a secret: a header without a
	// signature, or one made with the empty key, proves nothing.
	ErrNoSecret = errors.New("webhook: no secret to sign or verify with")
)

// VerifyEvent is Verify, then returns the event id of the signed body (its top-level
// "event_id"), the one to dedupe on. eventIDHeader is the request's Paykit-Event-Id:
// if it is not empty it must equal the body's id (ErrEventID otherwise), so a replay
// under a new header value is refused rather than taken for a new event.
func VerifyEvent(header, eventIDHeader string, body []byte, secret string, tolerance time.Duration) (string, error) {
	return VerifyEventAt(header, eventIDHeader, body, secret, tolerance, time.Now())
}

// VerifyEventAt is VerifyEvent with the verifier's clock given.
func VerifyEventAt(header, eventIDHeader string, body []byte, secret string, tolerance time.Duration, now time.Time) (string, error) {
	if err := VerifyAt(header, body, secret, tolerance, now); err != nil {
		return "", err
	}
	var ev struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.EventID == "" {
		return "", ErrEventID
	}
	if eventIDHeader != "" && eventIDHeader != ev.EventID {
		return "", ErrEventID
	}
	return ev.EventID, nil
}

// Signature returns the signature header for body sent at t, with one v1 per secret
// (the current secret first), or ErrNoSecret if no secret is given or one is empty. A
// sender uses it rather than Sign, so that a webhook without a secret is not sent.
func Signature(body []byte, t time.Time, secrets ...string) (string, error) {
	if len(secrets) == 0 {
		return "", ErrNoSecret
	}
	for _, s := range secrets {
		if s == "" {
			return "", ErrNoSecret
		}
	}
	return Sign(body, t, secrets...), nil
}

// Sign returns the signature header for body sent at t, with one v1 per secret (the
// current secret first). Empty secrets are skipped; with none left the header carries
// no signature and every verifier refuses it (Signature refuses to make it).
func Sign(body []byte, t time.Time, secrets ...string) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=" + ts)
	for _, s := range secrets {
		if s == "" {
			continue
		}
		b.WriteString(",v1=" + mac(s, ts, body))
	}
	return b.String()
}

func mac(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Verify checks header against body and secret at the current time: the timestamp must
// be within tolerance of now, and one of the v1 signatures must match in constant time.
func Verify(header string, body []byte, secret string, tolerance time.Duration) error {
	return VerifyAt(header, body, secret, tolerance, time.Now())
}

// VerifyAt is Verify with the verifier's clock given. An empty secret is ErrNoSecret.
func VerifyAt(header string, body []byte, secret string, tolerance time.Duration, now time.Time) error {
	if secret == "" {
		return ErrNoSecret
	}
	var (
		ts   string
		sigs []string
	)
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrMalformed
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrMalformed
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrTooOld
	}
	want := []byte(mac(secret, ts, body))
	for _, s := range sigs {
		if hmac.Equal(want, []byte(s)) {
			return nil
		}
	}
	return ErrSignature
}
