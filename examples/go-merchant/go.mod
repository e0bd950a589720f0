module github.com/paykit/paykit/examples/go-merchant

go 1.24

require github.com/standard-webhooks/standard-webhooks/libraries v1.3.0
