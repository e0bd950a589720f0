package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/payment"
)

// decodeStrict decodes a body that must be exactly one JSON object of v's shape, and
// refuses every body that could be read two ways: bytes that are not UTF-8, a key given
// twice in one object (encoding/json keeps the last), a key that is not exactly the name
// of one of v's fields (encoding/json matches names case-insensitively, so "AMOUNT_FEN"
// would set amount_fen), an unknown field, and anything but whitespace after the object.
// A typo like "amount" for "amount_fen" is so an error, not a zero amount.
func decodeStrict(body []byte, v any) error {
	if !utf8.Valid(body) {
		return payment.Errorf(payment.EINVALID, "the body is not UTF-8")
	}
	if err := checkKeys(body, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return payment.Errorf(payment.EINVALID, "malformed JSON body: %v", err)
	}
	return nil
}

// decodeNone accepts an empty body or {} for an operation that takes no fields.
func decodeNone(body []byte) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	var none struct{}
	return decodeStrict(body, &none)
}

// checkKeys walks the tokens of body against t, the type it is decoded into: the body
// must be one object followed by nothing but whitespace, each object's keys distinct, and
// each key of an object decoded into a struct exactly the JSON name of one of its fields.
func checkKeys(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return payment.Errorf(payment.EINVALID, "malformed JSON body: %v", err)
	}
	if tok != json.Delim('{') {
		return payment.Errorf(payment.EINVALID, "the body must be a JSON object")
	}
	if err := walkObject(dec, t, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return payment.Errorf(payment.EINVALID, "the body has data after the JSON object")
	}
	return nil
}

// walkObject reads the rest of an object whose '{' was read, at path (for messages).
func walkObject(dec *json.Decoder, t reflect.Type, path string) error {
	t = deref(t)
	fields := jsonFields(t)
	seen := map[string]bool{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return payment.Errorf(payment.EINVALID, "malformed JSON body: %v", err)
		}
		if tok == json.Delim('}') {
			return nil
		}
		key, _ := tok.(string)
		at := quotable(path + key)
		if seen[key] {
			return payment.Errorf(payment.EINVALID, "the body has the key %q twice", at)
		}
		seen[key] = true
		var vt reflect.Type
		switch {
		case t != nil && t.Kind() == reflect.Struct:
			ft, ok := fields[key]
			if !ok {
				for name := range fields {
					if strings.EqualFold(name, key) {
						return payment.Errorf(payment.EINVALID, "unknown field %q: field names are case-sensitive, this one is %q", at, name)
					}
				}
				return payment.Errorf(payment.EINVALID, "unknown field %q", at)
			}
			vt = ft
		case t != nil && t.Kind() == reflect.Map:
			vt = t.Elem()
		}
		if err := walkValue(dec, vt, at+"."); err != nil {
			return err
		}
	}
}

// walkValue reads one value, descending into objects and arrays.
func walkValue(dec *json.Decoder, t reflect.Type, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return payment.Errorf(payment.EINVALID, "malformed JSON body: %v", err)
	}
	switch tok {
	case json.Delim('{'):
		return walkObject(dec, t, path)
	case json.Delim('['):
		var et reflect.Type
		if t = deref(t); t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		for dec.More() {
			if err := walkValue(dec, et, path); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return payment.Errorf(payment.EINVALID, "malformed JSON body: %v", err)
		}
	}
	return nil
}

// maxQuotedKey bounds how much of a key a problem's detail quotes: a body may be 64 KiB
// of one key, and a detail is echoed, logged and kept under an Idempotency-Key.
const maxQuotedKey = 64

// quotable is key cut to maxQuotedKey bytes (at a rune boundary), marked if cut.
func quotable(key string) string {
	if len(key) <= maxQuotedKey {
		return key
	}
	cut := maxQuotedKey
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	return key[:cut] + "…"
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// jsonFields maps the JSON names of a struct's fields to their types, as encoding/json
// names them (tag name, or the Go name; "-" skipped; embedded structs flattened).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && deref(f.Type).Kind() == reflect.Struct {
			for n, ft := range jsonFields(deref(f.Type)) {
				out[n] = ft
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func readBody(c echo.Context) ([]byte, error) {
	b, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return nil, he
		}
		return nil, payment.Errorf(payment.EINVALID, "cannot read body: %v", err)
	}
	return b, nil
}
