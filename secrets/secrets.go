// Package secrets seals values at rest with AES-256-GCM under a keyring from the
// environment. Every ciphertext names the key that sealed it, so keys can be rotated: a
// new key goes first in the ring and seals from then on, the old keys stay to open what
// they sealed until everything is sealed again (Reseal), and then they can be dropped.
// Additional authenticated data binds a ciphertext to where it is stored (a tenant and a
// field), so it cannot be copied to another row and still open.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// KeySize is the length of a key in bytes (AES-256).
const KeySize = 32

// prefix starts every ciphertext: "pks1:<key id>:<base64url(nonce || sealed)>".
const prefix = "pks1"

// ErrNoKey means a ciphertext was sealed with a key the ring does not hold.
var ErrNoKey = errors.New("secrets: no key with the ciphertext's key id")

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)

// Keyring holds the keys that open ciphertexts; the first seals new ones.
type Keyring struct {
	ids   []string
	aeads map[string]cipher.AEAD
}

// ParseKeyring parses "id:base64key,id:base64key,…" (standard or URL base64 of 32
// bytes). The first key seals; every key opens what it sealed.
func ParseKeyring(spec string) (*Keyring, error) {
	kr := &Keyring{aeads: map[string]cipher.AEAD{}}
	for i, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		id, b64, ok := strings.Cut(part, ":")
		if !ok || !keyIDPattern.MatchString(id) {
			return nil, fmt.Errorf("secrets: key %d must be id:base64key with an id of 1-32 of A-Z a-z 0-9 _ . -", i+1)
		}
		if _, dup := kr.aeads[id]; dup {
			return nil, fmt.Errorf("secrets: key id %q appears twice", id)
		}
		key, err := decodeKey(b64)
		if err != nil {
			return nil, fmt.Errorf("secrets: key %q: %w", id, err)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("secrets: key %q: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("secrets: key %q: %w", id, err)
		}
		kr.ids = append(kr.ids, id)
		kr.aeads[id] = aead
	}
	return kr, nil
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("is %d bytes, want %d", len(b), KeySize)
			}
			return b, nil
		}
	}
	return nil, errors.New("is not base64")
}

// NewKey returns a random key in the form ParseKeyring reads ("id:base64key").
func NewKey(id string) (string, error) {
	if !keyIDPattern.MatchString(id) {
		return "", fmt.Errorf("secrets: key id %q must be 1-32 of A-Z a-z 0-9 _ . -", id)
	}
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return id + ":" + base64.StdEncoding.EncodeToString(b), nil
}

// PrimaryID is the id of the key that seals.
func (kr *Keyring) PrimaryID() string { return kr.ids[0] }

// Seal encrypts plaintext under the primary key, bound to aad.
func (kr *Keyring) Seal(plaintext []byte, aad string) (string, error) {
	id := kr.ids[0]
	aead := kr.aeads[id]
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("secrets: nonce: %w", err)
	}
	out := aead.Seal(nonce, nonce, plaintext, kr.aad(id, aad))
	return prefix + ":" + id + ":" + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open decrypts a ciphertext sealed for aad by any key of the ring.
func (kr *Keyring) Open(ciphertext, aad string) ([]byte, error) {
	id, body, err := split(ciphertext)
	if err != nil {
		return nil, err
	}
	aead, ok := kr.aeads[id]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrNoKey, id)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return nil, errors.New("secrets: ciphertext is malformed")
	}
	n := aead.NonceSize()
	pt, err := aead.Open(nil, raw[:n], raw[n:], kr.aad(id, aad))
	if err != nil {
		return nil, errors.New("secrets: ciphertext does not open: wrong key, or sealed for another place")
	}
	return pt, nil
}

// Reseal opens a ciphertext and seals it again under the primary key. It reports
// changed=false, returning the ciphertext as it is, when the primary key sealed it.
func (kr *Keyring) Reseal(ciphertext, aad string) (string, bool, error) {
	if id, _, err := split(ciphertext); err == nil && id == kr.ids[0] {
		if _, err := kr.Open(ciphertext, aad); err != nil {
			return "", false, err
		}
		return ciphertext, false, nil
	}
	pt, err := kr.Open(ciphertext, aad)
	if err != nil {
		return "", false, err
	}
	out, err := kr.Seal(pt, aad)
	return out, err == nil, err
}

// KeyID returns the id of the key that sealed a ciphertext.
func KeyID(ciphertext string) (string, error) {
	id, _, err := split(ciphertext)
	return id, err
}

func split(ciphertext string) (id, body string, err error) {
	parts := strings.SplitN(ciphertext, ":", 3)
	if len(parts) != 3 || parts[0] != prefix {
		return "", "", errors.New("secrets: not a sealed value")
	}
	return parts[1], parts[2], nil
}

// aad binds the key id too, so a ciphertext's tag cannot be relabelled with another id.
func (kr *Keyring) aad(id, aad string) []byte { return []byte(prefix + "\x00" + id + "\x00" + aad) }
