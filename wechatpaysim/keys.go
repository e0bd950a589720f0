package wechatpaysim

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names written by KeySet.WriteDir and read by LoadKeyDir. The merchant's files
// carry the names WeChat Pay's merchant console gives them (apiclient_key.pem,
// apiclient_cert.pem, pub_key.pem); the *_private files are the simulator's side and
// never leave WeChat Pay in real life.
const (
	MchIDFile                 = "mchid.txt"
	AppIDFile                 = "appid.txt"
	MerchantSerialFile        = "merchant_serial_no.txt"
	MerchantPrivateKeyFile    = "apiclient_key.pem"
	MerchantCertFile          = "apiclient_cert.pem"
	MerchantPublicKeyFile     = "apiclient_public_key.pem"
	APIv3KeyFile              = "apiv3_key.txt"
	PlatformSerialFile        = "platform_serial_no.txt"
	PlatformCertFile          = "platform_cert.pem"
	PlatformPrivateKeyFile    = "platform_private_key.pem"
	PublicKeyIDFile           = "pub_key_id.txt"
	PublicKeyFile             = "pub_key.pem"
	PublicKeyPrivateKeyFile   = "pub_key_private.pem"
	publicKeyIDPrefix         = "PUB_KEY_ID_"
	apiV3KeyAlphabet          = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	platformCertValidityYears = 5
)

// KeySet is one merchant's development credentials and the "WeChat Pay" keys that go
// with them: everything a v3 client is configured with (mchid, appid, the merchant's API
// certificate serial and private key, the APIv3 key, the platform certificate and the
// WeChat Pay public key with its ID) and what the simulator signs with. Private keys are
// PKCS#8 PEM, public keys PKIX PEM, certificates X.509 PEM.
type KeySet struct {
	MchID                  string `json:"mchid"`
	AppID                  string `json:"appid"`
	MerchantSerialNo       string `json:"merchant_serial_no"`
	MerchantPrivateKeyPEM  string `json:"merchant_private_key_pem"`
	MerchantCertPEM        string `json:"merchant_cert_pem"`
	MerchantPublicKeyPEM   string `json:"merchant_public_key_pem"`
	APIv3Key               string `json:"apiv3_key"`
	PlatformSerialNo       string `json:"platform_serial_no"`
	PlatformCertPEM        string `json:"platform_cert_pem"`
	PlatformPrivateKeyPEM  string `json:"platform_private_key_pem"`
	PublicKeyID            string `json:"pub_key_id"`
	PublicKeyPEM           string `json:"pub_key_pem"`
	PublicKeyPrivateKeyPEM string `json:"pub_key_private_pem"`
}

// GenerateKeys returns fresh development credentials for merchant mchid and its appid
// (DefaultMchID and DefaultAppID when empty), with RSA keys of the given size (WeChat Pay
// uses 2048). For tests and local development only.
func GenerateKeys(mchid, appid string, bits int) (KeySet, error) {
	if mchid == "" {
		mchid = DefaultMchID
	}
	if appid == "" {
		appid = DefaultAppID
	}
	ks := KeySet{MchID: mchid, AppID: appid}
	now := time.Now()
	merchantKey, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return KeySet{}, fmt.Errorf("generate merchant key: %w", err)
	}
	if ks.MerchantSerialNo, ks.MerchantCertPEM, err = selfSigned(merchantKey, "WeChat Pay merchant "+mchid+" (simulator)", now); err != nil {
		return KeySet{}, fmt.Errorf("merchant certificate: %w", err)
	}
	if ks.MerchantPrivateKeyPEM, ks.MerchantPublicKeyPEM, err = encodePair(merchantKey); err != nil {
		return KeySet{}, err
	}
	platformKey, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return KeySet{}, fmt.Errorf("generate platform key: %w", err)
	}
	if ks.PlatformSerialNo, ks.PlatformCertPEM, err = selfSigned(platformKey, "Tenpay.com Root CA simulator platform", now); err != nil {
		return KeySet{}, fmt.Errorf("platform certificate: %w", err)
	}
	if ks.PlatformPrivateKeyPEM, _, err = encodePair(platformKey); err != nil {
		return KeySet{}, err
	}
	pubKey, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return KeySet{}, fmt.Errorf("generate public key pair: %w", err)
	}
	if ks.PublicKeyPrivateKeyPEM, ks.PublicKeyPEM, err = encodePair(pubKey); err != nil {
		return KeySet{}, err
	}
	ks.PublicKeyID = publicKeyIDPrefix + randomDigits(34)
	ks.APIv3Key = randomString(32, apiV3KeyAlphabet)
	return ks, nil
}

// selfSigned issues a certificate for key with a random 20-byte serial, as WeChat Pay's
// serials are 40 upper-case hex digits, and returns that serial and the PEM.
func selfSigned(key *rsa.PrivateKey, cn string, now time.Time) (serial, certPEM string, err error) {
	raw := make([]byte, 20)
	if _, err := rand.Read(raw); err != nil {
		return "", "", err
	}
	raw[0] = 0x10 | raw[0]&0x6f // positive, and 40 hex digits with no leading zero
	sn := new(big.Int).SetBytes(raw)
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{Country: []string{"CN"}, Organization: []string{"paykit wechatpaysim"}, CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(platformCertValidityYears, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	return strings.ToUpper(hex.EncodeToString(raw)), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), nil
}

func encodePair(key *rsa.PrivateKey) (privPEM, pubPEM string, err error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})), nil
}

type keyFile struct {
	name string
	ptr  func(*KeySet) *string
	mode os.FileMode
}

func keyFiles() []keyFile {
	return []keyFile{
		{MchIDFile, func(k *KeySet) *string { return &k.MchID }, 0o644},
		{AppIDFile, func(k *KeySet) *string { return &k.AppID }, 0o644},
		{MerchantSerialFile, func(k *KeySet) *string { return &k.MerchantSerialNo }, 0o644},
		{MerchantPrivateKeyFile, func(k *KeySet) *string { return &k.MerchantPrivateKeyPEM }, 0o600},
		{MerchantCertFile, func(k *KeySet) *string { return &k.MerchantCertPEM }, 0o644},
		{MerchantPublicKeyFile, func(k *KeySet) *string { return &k.MerchantPublicKeyPEM }, 0o644},
		{APIv3KeyFile, func(k *KeySet) *string { return &k.APIv3Key }, 0o600},
		{PlatformSerialFile, func(k *KeySet) *string { return &k.PlatformSerialNo }, 0o644},
		{PlatformCertFile, func(k *KeySet) *string { return &k.PlatformCertPEM }, 0o644},
		{PlatformPrivateKeyFile, func(k *KeySet) *string { return &k.PlatformPrivateKeyPEM }, 0o600},
		{PublicKeyIDFile, func(k *KeySet) *string { return &k.PublicKeyID }, 0o644},
		{PublicKeyFile, func(k *KeySet) *string { return &k.PublicKeyPEM }, 0o644},
		{PublicKeyPrivateKeyFile, func(k *KeySet) *string { return &k.PublicKeyPrivateKeyPEM }, 0o600},
	}
}

// WriteDir writes every credential into its own file in dir, creating dir if needed.
// Secrets get mode 0600. Existing files are not overwritten. The .txt files hold the
// value alone, without a newline, so that `$(cat …)` and readFile both give it exactly.
func (k KeySet) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create key dir: %w", err)
	}
	for _, f := range keyFiles() {
		p := filepath.Join(dir, f.name)
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			return fmt.Errorf("write key file: %w", err)
		}
		_, err = fh.WriteString(*f.ptr(&k))
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write key file %s: %w", p, err)
		}
	}
	return nil
}

// LoadKeyDir reads the files written by WriteDir. Missing files are left empty, so a
// directory holding only what the simulator needs loads too; a directory with none of
// them is an error. Values of the .txt files are trimmed.
func LoadKeyDir(dir string) (KeySet, error) {
	ks, err := LoadKeyFS(os.DirFS(dir))
	if err != nil {
		return KeySet{}, fmt.Errorf("load key dir %s: %w", dir, err)
	}
	return ks, nil
}

// LoadKeyFS is LoadKeyDir for a file system, such as an embedded one.
func LoadKeyFS(fsys fs.FS) (KeySet, error) {
	var ks KeySet
	found := 0
	for _, f := range keyFiles() {
		b, err := fs.ReadFile(fsys, f.name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return KeySet{}, err
		}
		v := string(b)
		if strings.HasSuffix(f.name, ".txt") {
			v = strings.TrimSpace(v)
		}
		*f.ptr(&ks) = v
		found++
	}
	if found == 0 {
		return KeySet{}, errors.New("no credential files found")
	}
	return ks, nil
}

// Merchant returns the Merchant configuration the simulator needs for this key set.
func (k KeySet) Merchant() Merchant {
	pub := k.MerchantCertPEM
	if pub == "" {
		pub = k.MerchantPublicKeyPEM
	}
	return Merchant{MchID: k.MchID, AppIDs: []string{k.AppID}, SerialNo: k.MerchantSerialNo, PublicKeyPEM: pub, APIv3Key: k.APIv3Key}
}

// parsePrivateKey accepts PKCS#1 or PKCS#8 PEM, or the bare base64 body.
func parsePrivateKey(s string) (*rsa.PrivateKey, error) {
	der, err := pemOrBase64(s)
	if err != nil {
		return nil, err
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("parse private key: not an RSA key")
	}
	return rk, nil
}

// parsePublicKey accepts an X.509 certificate, a PKIX or a PKCS#1 public key, as PEM or
// bare base64. For a certificate it also returns its serial (upper-case hex).
func parsePublicKey(s string) (*rsa.PublicKey, string, error) {
	der, err := pemOrBase64(s)
	if err != nil {
		return nil, "", err
	}
	if c, err := x509.ParseCertificate(der); err == nil {
		rk, ok := c.PublicKey.(*rsa.PublicKey)
		if !ok {
			return nil, "", errors.New("parse certificate: not an RSA key")
		}
		return rk, strings.ToUpper(c.SerialNumber.Text(16)), nil
	}
	if k, err := x509.ParsePKIXPublicKey(der); err == nil {
		rk, ok := k.(*rsa.PublicKey)
		if !ok {
			return nil, "", errors.New("parse public key: not an RSA key")
		}
		return rk, "", nil
	}
	k, err := x509.ParsePKCS1PublicKey(der)
	if err != nil {
		return nil, "", fmt.Errorf("parse public key: %w", err)
	}
	return k, "", nil
}

func pemOrBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty key")
	}
	if strings.HasPrefix(s, "-----") {
		block, _ := pem.Decode([]byte(s))
		if block == nil {
			return nil, errors.New("invalid PEM key")
		}
		return block.Bytes, nil
	}
	der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		return nil, fmt.Errorf("decode base64 key: %w", err)
	}
	return der, nil
}

// randomString returns n characters drawn uniformly from alphabet.
func randomString(n int, alphabet string) string {
	b := make([]byte, n)
	for i := range b {
		v, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			panic(err) // crypto/rand never fails on supported platforms
		}
		b[i] = alphabet[v.Int64()]
	}
	return string(b)
}

func randomDigits(n int) string { return randomString(n, "0123456789") }

// randomHex returns 2n upper-case hex digits.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))
}
