package secrets_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/paykit/paykit/secrets"
)

func ring(tb testing.TB, ids ...string) (*secrets.Keyring, []string) {
	tb.Helper()
	var keys []string
	for _, id := range ids {
		k, err := secrets.NewKey(id)
		if err != nil {
			tb.Fatal(err)
		}
		keys = append(keys, k)
	}
	kr, err := secrets.ParseKeyring(strings.Join(keys, ","))
	if err != nil {
		tb.Fatal(err)
	}
	return kr, keys
}

func TestSealOpen(t *testing.T) {
	kr, _ := ring(t, "k1")
	ct, err := kr.Seal([]byte("private key"), "tenant/t1/field")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ct, "private key") || !strings.HasPrefix(ct, "pks1:k1:") {
		t.Fatalf("ciphertext %q", ct)
	}
	pt, err := kr.Open(ct, "tenant/t1/field")
	if err != nil || string(pt) != "private key" {
		t.Fatalf("open = %q, %v", pt, err)
	}
	again, _ := kr.Seal([]byte("private key"), "tenant/t1/field")
	if again == ct {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
}

func TestOpenRefuses(t *testing.T) {
	kr, _ := ring(t, "k1")
	other, _ := ring(t, "k1")
	ct, _ := kr.Seal([]byte("secret"), "tenant/a/f")
	raw := ct[len("pks1:k1:"):]
	flipped := []byte(raw)
	flipped[len(flipped)/2] ^= 'A' ^ 'B'
	cases := map[string]struct {
		kr  *secrets.Keyring
		ct  string
		aad string
	}{
		"another tenant":        {kr, ct, "tenant/b/f"},
		"another field":         {kr, ct, "tenant/a/g"},
		"another key, same id":  {other, ct, "tenant/a/f"},
		"relabelled key id":     {kr, "pks1:k2:" + raw, "tenant/a/f"},
		"tampered":              {kr, "pks1:k1:" + string(flipped), "tenant/a/f"},
		"truncated":             {kr, ct[:20], "tenant/a/f"},
		"plaintext, not sealed": {kr, "-----BEGIN RSA PRIVATE KEY-----", "tenant/a/f"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if pt, err := c.kr.Open(c.ct, c.aad); err == nil {
				t.Fatalf("opened to %q", pt)
			}
		})
	}
}

func TestRotation(t *testing.T) {
	old, oldKeys := ring(t, "old")
	ct, _ := old.Seal([]byte("v"), "aad")
	newKey, _ := secrets.NewKey("new")
	kr, err := secrets.ParseKeyring(newKey + "," + oldKeys[0])
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := kr.Open(ct, "aad"); err != nil || string(pt) != "v" {
		t.Fatalf("old ciphertext under the rotated ring: %q, %v", pt, err)
	}
	re, changed, err := kr.Reseal(ct, "aad")
	if err != nil || !changed {
		t.Fatalf("reseal = %v, %v", changed, err)
	}
	if id, _ := secrets.KeyID(re); id != "new" {
		t.Fatalf("resealed under %q", id)
	}
	same, changed, err := kr.Reseal(re, "aad")
	if err != nil || changed || same != re {
		t.Fatalf("second reseal changed=%v err=%v", changed, err)
	}
	newOnly, _ := secrets.ParseKeyring(newKey)
	if pt, err := newOnly.Open(re, "aad"); err != nil || string(pt) != "v" {
		t.Fatalf("resealed value after the old key is dropped: %q, %v", pt, err)
	}
	if _, err := newOnly.Open(ct, "aad"); !errors.Is(err, secrets.ErrNoKey) {
		t.Fatalf("old ciphertext without the old key: %v", err)
	}
}

func TestParseKeyringRefuses(t *testing.T) {
	good, _ := secrets.NewKey("a")
	for name, spec := range map[string]string{
		"empty":      "",
		"no id":      good[2:],
		"short key":  "a:c2hvcnQ=",
		"not base64": "a:!!!",
		"dup id":     good + "," + good,
		"bad id":     "a b" + good[1:],
	} {
		if _, err := secrets.ParseKeyring(spec); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
