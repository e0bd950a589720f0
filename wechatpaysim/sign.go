package wechatpaysim

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Protocol names of WeChat Pay API v3's signatures.
const (
	// AuthScheme is the scheme of the Authorization header and the value of
	// Wechatpay-Signature-Type.
	AuthScheme = "WECHATPAY2-SHA256-RSA2048"
	// AlgorithmAEAD is the resource and certificate encryption algorithm.
	AlgorithmAEAD = "AEAD_AES_256_GCM"
	// ProbePrefix starts the Wechatpay-Signature of a signature probe (签名探测流量).
	ProbePrefix = "WECHATPAY/SIGNTEST/"
)

// Refusal messages of 401 SIGN_ERROR, as WeChat Pay's FAQ gives them.
const (
	msgSignMismatch   = "错误的签名，验签失败"
	msgTimestampSkew  = "Http头Authorization中的timestamp与发起请求的时间不得超过5分钟"
	msgAuthMalformed  = "Http头Authorization值格式错误"
	msgAuthScheme     = "Http头Authorization认证类型不正确"
	msgSerialMismatch = "商户证书序列号有误。"
	msgNonceReplayed  = "Http头Authorization中的nonce_str已被使用"
)

// authParams are the five parameters of an Authorization header.
type authParams struct {
	MchID, NonceStr, Signature, Timestamp, SerialNo string
}

// parseAuthorization reads `WECHATPAY2-SHA256-RSA2048 k="v",…` with its parameters in any
// order. The message says what is wrong, in WeChat Pay's words.
func parseAuthorization(h string) (authParams, string) {
	var p authParams
	h = strings.TrimSpace(h)
	if h == "" {
		return p, msgAuthMalformed
	}
	scheme, rest, ok := strings.Cut(h, " ")
	if !ok || scheme != AuthScheme {
		return p, msgAuthScheme
	}
	fields := map[string]*string{
		"mchid": &p.MchID, "nonce_str": &p.NonceStr, "signature": &p.Signature,
		"timestamp": &p.Timestamp, "serial_no": &p.SerialNo,
	}
	seen := map[string]bool{}
	for part := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			return p, msgAuthMalformed
		}
		dst, known := fields[k]
		if !known || seen[k] {
			return p, msgAuthMalformed
		}
		seen[k] = true
		*dst = v[1 : len(v)-1]
	}
	if len(seen) != len(fields) {
		return p, msgAuthMalformed
	}
	return p, ""
}

// requestMessage is the string a request's signature covers.
func requestMessage(method, target, ts, nonce string, body []byte) string {
	return method + "\n" + target + "\n" + ts + "\n" + nonce + "\n" + string(body) + "\n"
}

// signedTargets lists the request-targets a client may have signed for the one it sent:
// the target as sent, without a trailing "?" (gopay signs without it while net/http
// still sends it), and with %7C and %2A in the path decoded (gopay signs path ids raw
// and net/http escapes '|' and '*' on the wire).
func signedTargets(sent string) []string {
	out := []string{sent}
	add := func(t string) {
		for _, o := range out {
			if o == t {
				return
			}
		}
		out = append(out, t)
	}
	for _, t := range out {
		if trimmed, ok := strings.CutSuffix(t, "?"); ok {
			add(trimmed)
		}
	}
	for _, t := range out {
		path, query, hasQuery := strings.Cut(t, "?")
		raw := strings.NewReplacer("%7C", "|", "%7c", "|", "%2A", "*", "%2a", "*").Replace(path)
		if hasQuery {
			raw += "?" + query
		}
		add(raw)
	}
	return out
}

// verifyRequest checks a request signature against every target the client may have
// signed. It returns the message built from the target as sent, for the refusal's detail.
func verifyRequest(pub *rsa.PublicKey, method, target string, p authParams, body []byte) (string, bool) {
	sig, err := base64.StdEncoding.DecodeString(p.Signature)
	first := requestMessage(method, target, p.Timestamp, p.NonceStr, body)
	if err != nil {
		return first, false
	}
	for _, t := range signedTargets(target) {
		if verifyRSA(pub, []byte(requestMessage(method, t, p.Timestamp, p.NonceStr, body)), sig) == nil {
			return first, true
		}
	}
	return first, false
}

// checkTimestamp reports whether ts (unix seconds) is within skew of now.
func checkTimestamp(ts string, now time.Time, skew time.Duration) bool {
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	d := now.Sub(time.Unix(n, 0))
	return d <= skew && d >= -skew
}

// signRSA signs msg with SHA256withRSA and returns base64.
func signRSA(key *rsa.PrivateKey, msg []byte) (string, error) {
	sum := sha256.Sum256(msg)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

func verifyRSA(pub *rsa.PublicKey, msg, sig []byte) error {
	sum := sha256.Sum256(msg)
	return rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig)
}

// responseMessage is the string an answer's or a notification's signature covers.
func responseMessage(ts, nonce string, body []byte) []byte {
	return []byte(ts + "\n" + nonce + "\n" + string(body) + "\n")
}

// VerifyResponse checks the Wechatpay-Signature of an answer or a notification over its
// timestamp, nonce and raw body with the platform certificate's or the WeChat Pay public
// key (PEM); it does not judge the timestamp's age. It is what any v3 client does,
// offered for tests.
func VerifyResponse(publicKeyPEM, timestamp, nonce, signature string, body []byte) error {
	pub, _, err := parsePublicKey(publicKeyPEM)
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(signature)
	if err != nil {
		return fmt.Errorf("decode signature: %w", err)
	}
	return verifyRSA(pub, responseMessage(timestamp, nonce, body), sig)
}

// SignRequest returns the Authorization header value for a request, as a merchant's
// client computes it: target is the path with its "?query", body the exact bytes sent.
// It is offered for tests that talk to the simulator without a WeChat Pay client.
func SignRequest(privateKeyPEM, mchid, serialNo, method, target string, body []byte, ts time.Time, nonce string) (string, error) {
	key, err := parsePrivateKey(privateKeyPEM)
	if err != nil {
		return "", err
	}
	t := strconv.FormatInt(ts.Unix(), 10)
	sig, err := signRSA(key, []byte(requestMessage(method, target, t, nonce, body)))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`%s mchid="%s",nonce_str="%s",timestamp="%s",serial_no="%s",signature="%s"`,
		AuthScheme, mchid, nonce, t, serialNo, sig), nil
}

// SignPayment signs a client-side payment call (JSAPI's paySign or App's sign): the
// lines appid, timestamp, nonce and pkg ("prepay_id=…" for JSAPI, the bare prepay_id
// for App), each ended by "\n", with the merchant's private key.
func SignPayment(privateKeyPEM, appid, timestamp, nonce, pkg string) (string, error) {
	key, err := parsePrivateKey(privateKeyPEM)
	if err != nil {
		return "", err
	}
	return signRSA(key, paymentMessage(appid, timestamp, nonce, pkg))
}

func paymentMessage(appid, timestamp, nonce, pkg string) []byte {
	return []byte(appid + "\n" + timestamp + "\n" + nonce + "\n" + pkg + "\n")
}

// EncryptAEAD encrypts plaintext with AEAD_AES_256_GCM under the 32-byte APIv3 key, the
// 12-byte nonce and associated data, and returns base64(ciphertext ‖ tag).
func EncryptAEAD(apiV3Key []byte, nonce, associatedData string, plaintext []byte) (string, error) {
	gcm, err := newGCM(apiV3Key, nonce)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), plaintext, []byte(associatedData))), nil
}

// DecryptAEAD reverses EncryptAEAD, as merchants decrypt resources and certificates.
func DecryptAEAD(apiV3Key []byte, nonce, associatedData, ciphertext string) ([]byte, error) {
	gcm, err := newGCM(apiV3Key, nonce)
	if err != nil {
		return nil, err
	}
	ct, err := base64.StdEncoding.DecodeString(ciphertext)
	if err != nil {
		return nil, fmt.Errorf("decode ciphertext: %w", err)
	}
	pt, err := gcm.Open(nil, []byte(nonce), ct, []byte(associatedData))
	if err != nil {
		return nil, fmt.Errorf("decrypt: %w", err)
	}
	return pt, nil
}

func newGCM(key []byte, nonce string) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("the APIv3 key must be 32 bytes, not %d", len(key))
	}
	if len(nonce) != 12 {
		return nil, errors.New("the nonce must be 12 bytes")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// aeadNonce is a fresh 12-character nonce, alphanumeric as WeChat Pay's are.
func aeadNonce() string { return randomString(12, apiV3KeyAlphabet) }
