package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/paykit/paykit/api"
	"github.com/paykit/paykit/payment"
)

// A Stores with a noun left nil is a wiring mistake: New says which one at once, instead
// of a handler panicking on its first call.
func TestNewRefusesStoresWithANounLeftNil(t *testing.T) {
	st := (&fakeStore{}).stores()
	st.Inbox = nil
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Stores.Inbox is not set") {
			t.Fatalf("New with no Inbox: recovered %v, want a panic naming Stores.Inbox", r)
		}
	}()
	api.New(api.Config{}, st, payment.SingleGateway{Gateway: fakeGateway{}}, &fakeOrch{}, nil, nil, nil)
}
