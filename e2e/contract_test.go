package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"

	"github.com/paykit/paykit/openapi/contract"
)

// apiHosts holds the host:port of every API server the tests started. The test client's
// exchanges with them are checked against the OpenAPI contract; those with the
// simulator are not.
var apiHosts sync.Map

// drift collects the exchanges that did not match the contract; TestMain fails the run
// if there is any.
var drift struct {
	mu   sync.Mutex
	errs []error
}

// contractChecked wraps base so that every exchange with a paykit API is checked.
func contractChecked(base http.RoundTripper) http.RoundTripper {
	v, err := contract.Load(context.Background())
	if err != nil {
		panic(err) // the document's own test (api) says why
	}
	only := func(r *http.Request) bool { _, ok := apiHosts.Load(r.URL.Host); return ok }
	return v.Transport(base, only, func(err error) {
		drift.mu.Lock()
		defer drift.mu.Unlock()
		drift.errs = append(drift.errs, err)
	})
}

// reportDrift prints the exchanges that drifted from the contract and reports whether
// there were any.
func reportDrift() bool {
	drift.mu.Lock()
	defer drift.mu.Unlock()
	for _, err := range drift.errs {
		fmt.Fprintln(os.Stderr, "e2e: contract drift:", err)
	}
	return len(drift.errs) > 0
}
