#!/usr/bin/env bash
# The fast tier: formatting, go vet, and the tests of every package that needs no
# service (no MariaDB, Redis or Temporal), in under a minute on 2 cores. The services are
# pointed at a closed port, so a package that starts needing one fails here loudly and
# moves to the full command (scripts/test.sh), which runs everything, these included.
#   scripts/test-fast.sh            the whole tier
#   scripts/test-fast.sh -run X     extra flags go to go test
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
fast=(
  ./alipay ./alipaysim/... ./checkout ./clients/... ./cmd/alipaysim ./gateways/... ./gauges
  ./internal/admin ./internal/buildinfo ./internal/config ./internal/devstack ./internal/house ./internal/promql
  ./internal/temporalconn ./internal/temporalmetrics ./internal/tracing
  ./openapi/... ./orchestrator ./payment/... ./secrets ./shop ./webhook ./worker ./workflows
)
PAYKIT_TEST_MYSQL_DSN='root@tcp(127.0.0.1:1)/' PAYKIT_TEST_REDIS_ADDR=127.0.0.1:1 PAYKIT_TEMPORAL_CLI=/nonexistent \
  go test -count=1 "$@" "${fast[@]}"
