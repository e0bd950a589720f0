package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzStrictBody feeds checkout and refund bodies to decodeStrict. Whatever it accepts
// must be a document with no key given twice at any depth, every key exactly a field's
// name, and every value the one the decoded request re-encodes: the body means one thing,
// and it is what the handler sees. Nothing may panic.
func FuzzStrictBody(f *testing.F) {
	for _, seed := range []string{
		`{"order_id":"o1","amount_fen":990,"subject":"Coffee"}`,
		`{"order_id":"o1","amount_fen":990,"subject":"Coffee","method":"wap","return_url":"https://a/r","quit_url":"https://a/q","checkout_token":"t","repurchase":true,"currency":"CNY"}`,
		`{"order_id":"o1","amount_fen":1,"subject":"s","AMOUNT_FEN":100000}`,
		`{"order_id":"o1","amount_fen":1,"subject":"s","amount_fen":100000}`,
		`{"order_id":"o1","amount_fen":1,"subject":"s"}]]}}garbage`,
		`{"amount_fen":100,"reason":"damaged","refund_no":"r1"}`,
		`{"amount_fen":100,"reason":"a","Reason":"b"}`,
		` {"amount_fen":1} ` + "\n",
		`{"subject":"\u00e9\ud83d\ude00","order_id":"o","amount_fen":-0}`,
		`{}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var pay CreatePaymentRequest
		if decodeStrict(body, &pay) == nil {
			checkAccepted(t, body, pay)
		}
		var ref CreateRefundRequest
		if decodeStrict(body, &ref) == nil {
			checkAccepted(t, body, ref)
		}
	})
}

// checkAccepted checks an accepted body against the request decoded from it.
func checkAccepted(t *testing.T, body []byte, req any) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("accepted %q, which is not a JSON object: %v", body, err)
	}
	if n := countKeys(t, body); n != keysIn(doc) {
		t.Fatalf("accepted %q, which has %d keys but %d distinct ones", body, n, keysIn(doc))
	}
	out, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var again map[string]any
	if err := json.Unmarshal(out, &again); err != nil {
		t.Fatal(err)
	}
	fields := jsonFields(reflect.TypeOf(req))
	for k, v := range doc {
		if _, ok := fields[k]; !ok {
			t.Fatalf("accepted %q, whose key %q is no field's name", body, k)
		}
		w, ok := again[k]
		if !ok && (v == nil || reflect.ValueOf(v).IsZero()) {
			continue // omitempty, or null: the zero value either way
		}
		if !reflect.DeepEqual(v, w) {
			t.Fatalf("accepted %q: %s is %#v in the body but %#v in the request (%s)", body, k, v, w, out)
		}
	}
}

// countKeys counts the keys of every object in body, repeats included.
func countKeys(t *testing.T, body []byte) int {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	n := 0
	var inObject []bool // per open container: whether it is an object
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		switch tok {
		case json.Delim('{'):
			inObject = append(inObject, true)
			expectKey = true
			continue
		case json.Delim('['):
			inObject = append(inObject, false)
			expectKey = false
			continue
		case json.Delim('}'), json.Delim(']'):
			inObject = inObject[:len(inObject)-1]
		default:
			if expectKey {
				n++
				expectKey = false
				continue
			}
		}
		expectKey = len(inObject) > 0 && inObject[len(inObject)-1]
	}
}

// keysIn counts the keys of every object in a decoded document.
func keysIn(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := len(v)
		for _, e := range v {
			n += keysIn(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range v {
			n += keysIn(e)
		}
		return n
	}
	return 0
}
