// Package paykit is a client of paykit's merchant API. paykit.gen.go is generated from
// openapi/openapi.yaml by oapi-codegen (scripts/generate-clients.sh; never edit it): the
// models and the raw client. client.go wraps them with what the contract cannot say: an
// Idempotency-Key per logical request, reused on its retries; answers of 400 or above as
// *Error with the problem+json body decoded; the events feed read page by page (Feed),
// with a cursor past paykit's horizon as *CursorExpiredError.
//
// Start with New. docs/integrate/clients.md has examples.
package paykit
