#!/usr/bin/env bash
# The fast tier: formatting, go vet, and go test -short ./... (every pure unit and
# workflow test; a test that needs MariaDB, Redis, PostgreSQL or Temporal skips under
# -short), in under a minute on 2 cores once Go's build cache is warm. The services are
# pointed at closed ports, so a test that reaches one without skipping fails here loudly;
# the full command (scripts/test.sh) runs everything, these included, without -short.
#   scripts/test-fast.sh            the whole tier
#   scripts/test-fast.sh -run X     extra flags go to go test
#   scripts/test-fast.sh --no-vet   without go vet (scripts/test.sh: its golangci-lint
#                                   runs the same analyzers)
set -euo pipefail
cd "$(dirname "$0")/.."
vet=true
if [ "${1:-}" = --no-vet ]; then
  vet=false
  shift
fi
# The compiler collects garbage a quarter as often: a fifth less CPU for a cold build
# (PAYKIT_BUILD_GOGC; see docs/testing.md).
export GOGC=${PAYKIT_BUILD_GOGC:-400}
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:" >&2
  echo "$unformatted" >&2
  exit 1
fi
if $vet; then go vet ./...; fi
PAYKIT_TEST_MYSQL_DSN='root@tcp(127.0.0.1:1)/' PAYKIT_TEST_REDIS_ADDR=127.0.0.1:1 PAYKIT_TEMPORAL_CLI=/nonexistent \
  go test -short -count=1 "$@" ./...
