package wechatpaysim

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// platformCert is the platform certificate (平台证书) listed by GET /v3/certificates.
type platformCert struct {
	serial    string
	pem       string
	notBefore time.Time
	notAfter  time.Time
}

func parsePlatformCert(certPEM string, key *rsa.PrivateKey) (platformCert, error) {
	block, _ := pem.Decode([]byte(strings.TrimSpace(certPEM)))
	if block == nil || block.Type != "CERTIFICATE" {
		return platformCert{}, errors.New("platform certificate: not a PEM certificate")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return platformCert{}, fmt.Errorf("platform certificate: %w", err)
	}
	pub, ok := c.PublicKey.(*rsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return platformCert{}, errors.New("platform certificate: does not match the platform private key")
	}
	return platformCert{
		serial: strings.ToUpper(c.SerialNumber.Text(16)), pem: string(pem.EncodeToMemory(block)),
		notBefore: c.NotBefore, notAfter: c.NotAfter,
	}, nil
}

// encryptedCertificate is one entry of GET /v3/certificates.
type encryptedCertificate struct {
	SerialNo           string       `json:"serial_no"`
	EffectiveTime      string       `json:"effective_time"`
	ExpireTime         string       `json:"expire_time"`
	EncryptCertificate encryptedRes `json:"encrypt_certificate"`
}

// encryptedRes is an AEAD_AES_256_GCM resource: a certificate or a notification's resource.
type encryptedRes struct {
	Algorithm      string `json:"algorithm"`
	AssociatedData string `json:"associated_data"`
	Ciphertext     string `json:"ciphertext"`
	Nonce          string `json:"nonce"`
	OriginalType   string `json:"original_type,omitempty"`
}

// handleCertificates is GET /v3/certificates: the platform certificate encrypted under
// the merchant's APIv3 key, its times RFC 3339 in China time. A public-key-only merchant
// has none.
func (s *Simulator) handleCertificates(c *call) (answer, *apiError) {
	switch c.r.URL.Query().Get("algorithm_type") {
	case "", "RSA", "ALL":
	case "SM2":
		return jsonAnswer(map[string]any{"data": []any{}}), nil
	default:
		return answer{}, paramError("algorithm_type", c.r.URL.Query().Get("algorithm_type"), "取值应为 RSA、SM2 或 ALL", "query")
	}
	if c.m.keyMode == KeyModePublicKey {
		return answer{}, refuse(http.StatusNotFound, "RESOURCE_NOT_EXISTS",
			"无可用的平台证书,请在商户平台-API安全申请使用微信支付公钥。可参考FAQ：https://pay.weixin.qq.com/doc/v3/merchant/4012154180")
	}
	nonce := aeadNonce()
	ct, err := EncryptAEAD(c.m.apiV3Key, nonce, "certificate", []byte(s.platform.pem))
	if err != nil {
		s.log.Error("encrypt platform certificate", "err", err)
		return answer{}, systemError()
	}
	return jsonAnswer(map[string]any{"data": []encryptedCertificate{{
		SerialNo:      s.platform.serial,
		EffectiveTime: s.platform.notBefore.In(s.loc).Format(time.RFC3339),
		ExpireTime:    s.platform.notAfter.In(s.loc).Format(time.RFC3339),
		EncryptCertificate: encryptedRes{
			Algorithm: AlgorithmAEAD, AssociatedData: "certificate", Ciphertext: ct, Nonce: nonce,
		},
	}}}), nil
}
