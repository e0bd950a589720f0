package config

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/paykit/paykit/wechatpay"
)

// WechatPay is the deployment's WeChat Pay merchant (WECHATPAY_*). Without MchID WeChat
// Pay is not configured: the wechat_* methods are refused and nothing else changes. Its
// keys print, log and marshal as "[redacted]" with the struct (String, LogValue).
type WechatPay struct {
	MchID string
	AppID string
	// MerchantSerial (or MerchantSerialFile) is the serial of the merchant's API
	// certificate; PrivateKey (PEM), or PrivateKeyFile, its key, which signs every request.
	MerchantSerial     string
	MerchantSerialFile string
	PrivateKey         string
	PrivateKeyFile     string
	// APIv3Key (32 bytes), or APIv3KeyFile, decrypts notifications and the platform
	// certificates.
	APIv3Key     string
	APIv3KeyFile string
	// PublicKey (PEM) or PublicKeyFile, with PublicKeyID (PUB_KEY_ID_…, or its file), is the WeChat
	// Pay public key answers and notifications are verified with; without it the
	// platform certificates are fetched. PlatformCertificates fetches them as well, while
	// the merchant switches from the certificates to the public key.
	PublicKey            string
	PublicKeyFile        string
	PublicKeyID          string
	PublicKeyIDFile      string
	PlatformCertificates bool
	// BaseURL is WeChat Pay's API host (a simulator's in tests).
	BaseURL string
	// CashierBaseURL, if set, replaces the scheme and host of an H5 payment's h5_url,
	// for a simulator that the buyer's browser reaches under another name.
	CashierBaseURL string
}

// Configured reports whether the deployment has a WeChat Pay merchant.
func (w WechatPay) Configured() bool { return w.MchID != "" }

// String implements fmt.Stringer without the keys.
func (w WechatPay) String() string {
	return fmt.Sprintf("WechatPay{MchID:%s AppID:%s MerchantSerial:%s PublicKeyID:%s BaseURL:%s keys:[redacted]}",
		w.MchID, w.AppID, w.MerchantSerial, w.PublicKeyID, w.BaseURL)
}

// GoString keeps %#v from printing the keys.
func (w WechatPay) GoString() string { return w.String() }

// LogValue implements slog.LogValuer without the keys.
func (w WechatPay) LogValue() slog.Value { return slog.StringValue(w.String()) }

func loadWechatPay(e *env) WechatPay {
	return WechatPay{
		MchID:                e.str("WECHATPAY_MCHID"),
		AppID:                e.str("WECHATPAY_APPID"),
		MerchantSerial:       e.str("WECHATPAY_MERCHANT_SERIAL"),
		MerchantSerialFile:   e.str("WECHATPAY_MERCHANT_SERIAL_FILE"),
		PrivateKey:           e.str("WECHATPAY_PRIVATE_KEY"),
		PrivateKeyFile:       e.str("WECHATPAY_PRIVATE_KEY_FILE"),
		APIv3Key:             e.str("WECHATPAY_APIV3_KEY"),
		APIv3KeyFile:         e.str("WECHATPAY_APIV3_KEY_FILE"),
		PublicKey:            e.str("WECHATPAY_PUBLIC_KEY"),
		PublicKeyFile:        e.str("WECHATPAY_PUBLIC_KEY_FILE"),
		PublicKeyID:          e.str("WECHATPAY_PUBLIC_KEY_ID"),
		PublicKeyIDFile:      e.str("WECHATPAY_PUBLIC_KEY_ID_FILE"),
		PlatformCertificates: e.bool("WECHATPAY_PLATFORM_CERTIFICATES"),
		BaseURL:              strings.TrimRight(e.str("WECHATPAY_BASE_URL"), "/"),
		CashierBaseURL:       e.str("WECHATPAY_CASHIER_BASE_URL"),
	}
}

// check returns what is missing or contradictory in a configured merchant; nothing for
// one not configured, whatever else is set.
func (w WechatPay) check() []string {
	if !w.Configured() {
		return nil
	}
	var errs []string
	if w.AppID == "" || (w.MerchantSerial == "" && w.MerchantSerialFile == "") {
		errs = append(errs, "WECHATPAY_MCHID needs WECHATPAY_APPID and WECHATPAY_MERCHANT_SERIAL (or WECHATPAY_MERCHANT_SERIAL_FILE)")
	}
	if w.PrivateKey == "" && w.PrivateKeyFile == "" {
		errs = append(errs, "WECHATPAY_MCHID needs the merchant's private key: WECHATPAY_PRIVATE_KEY or WECHATPAY_PRIVATE_KEY_FILE")
	}
	if w.APIv3Key == "" && w.APIv3KeyFile == "" {
		errs = append(errs, "WECHATPAY_MCHID needs the APIv3 key: WECHATPAY_APIV3_KEY or WECHATPAY_APIV3_KEY_FILE")
	}
	hasKey := w.PublicKey != "" || w.PublicKeyFile != ""
	if hasKey != (w.PublicKeyID != "" || w.PublicKeyIDFile != "") {
		errs = append(errs, "WECHATPAY_PUBLIC_KEY (or _FILE) and WECHATPAY_PUBLIC_KEY_ID (or _FILE) go together")
	}
	if w.PlatformCertificates && !hasKey {
		errs = append(errs, "WECHATPAY_PLATFORM_CERTIFICATES is for a merchant on the public key too (WECHATPAY_PUBLIC_KEY_ID); without it the platform certificates are fetched anyway")
	}
	return errs
}

// Adapter returns the adapter's configuration of the merchant, its keys read from the
// inline variables or else from their files, its notifications at notifyURL. An error
// names the variable, never a key.
func (w WechatPay) Adapter(notifyURL string) (wechatpay.Config, error) {
	priv, err := inlineOrFile(w.PrivateKey, w.PrivateKeyFile, "WECHATPAY_PRIVATE_KEY_FILE")
	if err != nil {
		return wechatpay.Config{}, err
	}
	v3, err := inlineOrFile(w.APIv3Key, w.APIv3KeyFile, "WECHATPAY_APIV3_KEY_FILE")
	if err != nil {
		return wechatpay.Config{}, err
	}
	pub, err := inlineOrFile(w.PublicKey, w.PublicKeyFile, "WECHATPAY_PUBLIC_KEY_FILE")
	if err != nil {
		return wechatpay.Config{}, err
	}
	serial, err := inlineOrFile(w.MerchantSerial, w.MerchantSerialFile, "WECHATPAY_MERCHANT_SERIAL_FILE")
	if err != nil {
		return wechatpay.Config{}, err
	}
	pubID, err := inlineOrFile(w.PublicKeyID, w.PublicKeyIDFile, "WECHATPAY_PUBLIC_KEY_ID_FILE")
	if err != nil {
		return wechatpay.Config{}, err
	}
	return wechatpay.Config{
		MchID: w.MchID, AppID: w.AppID, MerchantSerialNo: strings.TrimSpace(serial), MerchantPrivateKeyPEM: priv,
		APIv3Key: strings.TrimSpace(v3), PublicKeyPEM: pub, PublicKeyID: strings.TrimSpace(pubID),
		PlatformCertificatesToo: w.PlatformCertificates, BaseURL: w.BaseURL, NotifyURL: notifyURL,
	}, nil
}

// inlineOrFile is v, or else the content of file (named by the variable name in errors);
// "" when neither is set.
func inlineOrFile(v, file, name string) (string, error) {
	if v != "" || file == "" {
		return v, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return string(b), nil
}
