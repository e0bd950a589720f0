package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks headers (https://www.standardwebhooks.com), sent beside
// Paykit-Signature. webhook-id is the event id, webhook-timestamp the unix seconds of
// the attempt, and webhook-signature one "v1,<base64>" per valid secret, space
// separated, each the HMAC-SHA256 of "<id>.<timestamp>.<exact body bytes>".
const (
	StandardIDHeader        = "webhook-id"
	StandardTimestampHeader = "webhook-timestamp"
	StandardSignatureHeader = "webhook-signature"
)

// StandardSecretPrefix marks a secret in the Standard Webhooks form: the base64 of the
// key bytes follows it.
const StandardSecretPrefix = "whsec_"

// StandardKey is the HMAC key a tenant's secret signs Standard Webhooks with. A secret
// in the Standard Webhooks form ("whsec_" and standard, padded base64, as the official
// libraries decode it) is the key it encodes; any other secret, such as one set before
// paykit sent Standard Webhooks, is the key byte for byte, as Paykit-Signature uses it.
// StandardSecret shows either as the string a merchant gives the libraries.
func StandardKey(secret string) []byte {
	if rest, ok := strings.CutPrefix(secret, StandardSecretPrefix); ok {
		if key, err := base64.StdEncoding.DecodeString(rest); err == nil && len(key) > 0 {
			return key
		}
	}
	return []byte(secret)
}

// StandardSecret is secret in the Standard Webhooks form, "whsec_" and the base64 of
// StandardKey(secret): the string a merchant gives a standardwebhooks library. A secret
// already in that form is returned unchanged (re-encoded if its base64 was not
// canonical); "" stays "".
func StandardSecret(secret string) string {
	if secret == "" {
		return ""
	}
	return StandardSecretPrefix + base64.StdEncoding.EncodeToString(StandardKey(secret))
}

// IsStandardSecret reports whether secret is in the Standard Webhooks form, so that
// StandardSecret(secret) == secret.
func IsStandardSecret(secret string) bool { return StandardSecret(secret) == secret }

// StandardSignature returns the webhook-signature header of the message id sent at t
// with body: one "v1,<base64>" per secret (the current one first), space separated; or
// ErrNoSecret if no secret is given or one is empty.
func StandardSignature(id string, t time.Time, body []byte, secrets ...string) (string, error) {
	if len(secrets) == 0 {
		return "", ErrNoSecret
	}
	ts := strconv.FormatInt(t.Unix(), 10)
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		if s == "" {
			return "", ErrNoSecret
		}
		m := hmac.New(sha256.New, StandardKey(s))
		m.Write([]byte(id))
		m.Write([]byte{'.'})
		m.Write([]byte(ts))
		m.Write([]byte{'.'})
		m.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return strings.Join(sigs, " "), nil
}
