package paymenttest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/paykit/paykit/payment"
	"github.com/paykit/paykit/payment/paymenttest"
)

// A call a fake did not implement fails with its name, as a refusal the caller does not
// retry, instead of a nil-interface panic.
func TestGatewayNamesTheCallItDoesNotFake(t *testing.T) {
	_, err := paymenttest.Gateway{}.Query(context.Background(), "P1")
	if err == nil || !strings.Contains(err.Error(), "paymenttest.Gateway.Query") {
		t.Fatalf("Query: %v, want an error naming paymenttest.Gateway.Query", err)
	}
	if payment.IsRetryable(err) {
		t.Fatalf("Query: %v is retryable, want a refusal", err)
	}
}
