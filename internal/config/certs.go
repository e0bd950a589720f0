package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// AlipayCerts are the three certificates of Alipay's certificate mode (公钥证书模式),
// each inline PEM or a file: ALIPAY_APP_CERT[_FILE] (the app's certificate,
// appCertPublicKey_<app_id>.crt), ALIPAY_PUBLIC_CERT[_FILE] (Alipay's certificate,
// alipayCertPublicKey_RSA2.crt) and ALIPAY_ROOT_CERT[_FILE] (alipayRootCert.crt).
type AlipayCerts struct {
	App, AppFile       string
	Public, PublicFile string
	Root, RootFile     string
}

type certSource struct{ name, inline, file string }

func (a AlipayCerts) sources() []certSource {
	return []certSource{
		{"ALIPAY_APP_CERT", a.App, a.AppFile},
		{"ALIPAY_PUBLIC_CERT", a.Public, a.PublicFile},
		{"ALIPAY_ROOT_CERT", a.Root, a.RootFile},
	}
}

// set counts the certificates given (inline or as a file).
func (a AlipayCerts) set() int {
	n := 0
	for _, s := range a.sources() {
		if s.inline != "" || s.file != "" {
			n++
		}
	}
	return n
}

// check refuses a partial certificate-mode setup: all three or none.
func (a AlipayCerts) check() error {
	if n := a.set(); n == 0 || n == 3 {
		return nil
	}
	var missing []string
	for _, s := range a.sources() {
		if s.inline == "" && s.file == "" {
			missing = append(missing, s.name+"[_FILE]")
		}
	}
	return fmt.Errorf("certificate mode needs ALIPAY_APP_CERT, ALIPAY_PUBLIC_CERT and ALIPAY_ROOT_CERT (or their _FILE forms); missing %s",
		strings.Join(missing, ", "))
}

// load returns the three PEM texts, all empty in public-key mode.
func (a AlipayCerts) load() (app, public, root string, err error) {
	if err := a.check(); err != nil {
		return "", "", "", err
	}
	if a.set() == 0 {
		return "", "", "", nil
	}
	out := make([]string, 0, 3)
	for _, s := range a.sources() {
		v := s.inline
		if v == "" {
			b, err := os.ReadFile(s.file)
			if err != nil {
				return "", "", "", fmt.Errorf("%s_FILE: %w", s.name, err)
			}
			v = string(b)
		}
		if strings.TrimSpace(v) == "" {
			return "", "", "", errors.New(s.name + " is empty")
		}
		out = append(out, v)
	}
	return out[0], out[1], out[2], nil
}
