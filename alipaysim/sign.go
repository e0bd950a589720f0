package alipaysim

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// signingString builds Alipay's string to sign: the fields sorted by key, each written as
// k=v with its raw (URL-decoded) value, joined with &. Keys in exclude are left out, and so
// are empty values when skipEmpty is set.
func signingString(values url.Values, skipEmpty bool, exclude ...string) string {
	keys := make([]string, 0, len(values))
	for k := range values {
		if !slices.Contains(exclude, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		for _, v := range values[k] {
			if skipEmpty && v == "" {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(v)
		}
	}
	return b.String()
}

// signRSA2 signs data with RSA PKCS#1 v1.5 over SHA-256 and returns base64.
func signRSA2(key *rsa.PrivateKey, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// verifyRSA2 checks a base64 RSA2 signature over data.
func verifyRSA2(pub *rsa.PublicKey, data []byte, sigB64 string) error {
	sig, err := base64.StdEncoding.DecodeString(sigB64)
	if err != nil {
		return fmt.Errorf("decode signature: %w", err)
	}
	sum := sha256.Sum256(data)
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("verify signature: %w", err)
	}
	return nil
}

// verifyRequest checks the signature of a merchant request. Alipay signs every field but
// sign (sign_type included); it documents that empty values are left out, and some
// clients sign them anyway, so both forms are accepted. It returns the string it checked
// so that a failure can show it, as Alipay's error message does.
func verifyRequest(pub *rsa.PublicKey, form url.Values) (string, error) {
	full := signingString(form, false, "sign")
	sig := form.Get("sign")
	err := verifyRSA2(pub, []byte(full), sig)
	if err == nil {
		return full, nil
	}
	if nonEmpty := signingString(form, true, "sign"); nonEmpty != full {
		if verifyRSA2(pub, []byte(nonEmpty), sig) == nil {
			return nonEmpty, nil
		}
	}
	return full, err
}

// signNotification signs a notification or return-URL parameter set the way Alipay does:
// every field except sign and sign_type, empty values included. It sets sign and sign_type.
func signNotification(key *rsa.PrivateKey, values url.Values) error {
	values.Del("sign")
	values.Set("sign_type", "RSA2")
	sig, err := signRSA2(key, []byte(signingString(values, false, "sign", "sign_type")))
	if err != nil {
		return err
	}
	values.Set("sign", sig)
	return nil
}

// kv is one field of a response object; responses keep their fields in a fixed order so
// the signed bytes are exactly the emitted bytes.
type kv struct{ k, v string }

// fields is an ordered JSON object whose values are all strings, as Alipay's are.
type fields []kv

func (f fields) add(k, v string) fields { return append(f, kv{k, v}) }

// addIf adds the field only when v is not empty.
func (f fields) addIf(k, v string) fields {
	if v == "" {
		return f
	}
	return append(f, kv{k, v})
}

func (f fields) get(k string) string {
	for _, p := range f {
		if p.k == k {
			return p.v
		}
	}
	return ""
}

// marshal writes the object without whitespace and without HTML escaping.
func (f fields) marshal() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range f {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonString(p.k))
		b.WriteByte(':')
		b.Write(jsonString(p.v))
	}
	b.WriteByte('}')
	return b.Bytes()
}

func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // encoding a string cannot fail
	return bytes.TrimRight(b.Bytes(), "\n")
}

// signedBody builds {"<name>":<object>,"sign":"<sig>"} where sig covers exactly the
// object's bytes. In certificate mode (certSN not empty) alipay_cert_sn comes between
// the object and sign, where Alipay puts it and where clients that cut the signed bytes
// out of the raw answer look for it.
func signedBody(key *rsa.PrivateKey, name string, obj fields, certSN string) ([]byte, error) {
	raw := obj.marshal()
	sig, err := signRSA2(key, raw)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	b.Write(jsonString(name))
	b.WriteByte(':')
	b.Write(raw)
	if certSN != "" {
		b.WriteString(`,"alipay_cert_sn":`)
		b.Write(jsonString(certSN))
	}
	b.WriteString(`,"sign":`)
	b.Write(jsonString(sig))
	b.WriteByte('}')
	return b.Bytes(), nil
}

// SignNotification signs an asynchronous notification form in place as Alipay does (RSA2
// over every field but sign and sign_type), with the Alipay private key in PEM: for tests
// that need a genuine notification without a trade behind it.
func SignNotification(alipayPrivateKeyPEM string, form url.Values) error {
	key, err := parsePrivateKey(alipayPrivateKeyPEM)
	if err != nil {
		return err
	}
	return signNotification(key, form)
}
