// Package openapi holds paykit's HTTP contract, the OpenAPI 3.1 document of the merchant
// API (/v1) and of the Alipay callback endpoint, embedded in the binary. The API serves
// it at GET /openapi.yaml; package contract checks real exchanges against it in tests.
package openapi

import _ "embed"

//go:embed openapi.yaml
var document []byte

// Document returns the OpenAPI document (YAML).
func Document() []byte { return document }
