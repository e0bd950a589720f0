package payment_test

import (
	"context"
	"strings"
	"testing"

	"github.com/paykit/paykit/payment"
)

type pinger struct{}

func (pinger) Ping(context.Context) error { return nil }

// A consumer's struct of nouns with one left nil is named, field and all; a full one is
// nil. Fields that are not interfaces are not nouns.
func TestUnsetNoun(t *testing.T) {
	type stores struct {
		payment.Pinger
		payment.Anomalies
		Name string
	}
	err := payment.UnsetNoun(stores{Pinger: pinger{}})
	if err == nil || !strings.Contains(err.Error(), "stores.Anomalies is not set") {
		t.Fatalf("UnsetNoun with no Anomalies: %v", err)
	}
	type one struct{ payment.Pinger }
	if err := payment.UnsetNoun(one{Pinger: pinger{}}); err != nil {
		t.Fatalf("UnsetNoun of a full struct: %v", err)
	}
}
