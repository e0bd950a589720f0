#!/usr/bin/env bash
# Runs every test: unit and workflow tests, the Prometheus alert rules' unit tests (promtool),
# storage tests on the real MariaDB and Redis,
# the Alipay simulator tests (also against Alipay's official Node SDK), and the end-to-end tests that run the Temporal dev server,
# the simulator, the API and the worker as real processes talking real HTTP; the 90 s soak on a Temporal server of its own; a bounded fuzz of
# the Alipay notification boundary; then the e2e happy path, two storms and the two-API two-worker topology again on
# the real Temporal server on PostgreSQL with a second server node killed mid-storm, and the happy path, the topology storm and the refund
# storms once more on that server with mutual TLS; the Redis tests and the storms on a Redis Cluster;
# the storage tests, the storms, the topology and a shortened fault suite on TiDB.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh
scripts/build-temporal.sh
# The TiDB server for the TiDB pass near the end, built at the lowest CPU priority while the
# other tests run (the first build takes 8 to 9 minutes on 2 cores; later ones are cached).
mkdir -p .artifacts
PAYKIT_BUILD_NICE=1 scripts/build-tidb.sh >.artifacts/build-tidb.log 2>&1 &
tidb_build=$!
# Helm and the chart checker, for scripts/helm-check.sh below (about 11 minutes of CPU cold).
PAYKIT_BUILD_NICE=1 scripts/helm-check.sh --build-only >.artifacts/build-helm.log 2>&1 &
helm_build=$!
trap 'kill "$tidb_build" "$helm_build" 2>/dev/null || true' EXIT
# The demo shop's browser test (e2e/shop_browser_test.go) drives Debian's chromium.
if ! command -v chromium >/dev/null; then
  echo "installing chromium from Debian packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null
fi
# The mutual-TLS pass makes its certificates with openssl (scripts/temporal-certs.sh).
if ! command -v openssl >/dev/null; then
  echo "installing openssl from Debian packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq openssl >/dev/null
fi
export PAYKIT_TEMPORAL_CLI="$PWD/.bin/temporal"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
# golangci-lint (pinned in tools/lint; .golangci.yml), then the fast tier with every service
# pointed at a closed port, which keeps its package list honest.
scripts/lint.sh
scripts/test-fast.sh
# The Prometheus scrape config, the alert rules and their unit tests (promtool).
scripts/promtool.sh
# The Helm chart: helm lint and helm template with its three values files, every rendered
# object decoded strictly into the Kubernetes API types, the PrometheusRule against
# deploy/prometheus/alerts.yml (Helm and the checker pinned in tools/helmcheck).
if ! wait "$helm_build"; then
  cat .artifacts/build-helm.log >&2
  exit 1
fi
scripts/helm-check.sh
# Lint the OpenAPI contract first (valid 3.1, every route and problem code in it, drift caught).
go test -count=1 -run 'TestOpenAPI|TestEveryRouteIsInTheContractAndBack|TestEveryProblemCodeIsInTheContract|TestContractCatchesDrift' ./api
# The Go and TypeScript clients regenerated from the contract must be what is committed
# (this also installs clients/ts's pinned npm packages, which e2e/TestTypeScriptClient uses).
scripts/generate-clients.sh --check
go test -race -count=1 -timeout 25m -skip '^TestSoak$' ./...
# The soak (90 s) after the rest, on a Temporal dev server of its own: it judges one
# stack's steady state, which the runs the other e2e tests leave on their shared in-memory
# server would blur (in one CI run that server's store timed out during the soak). A
# checkout slower than the bound leaves goroutine dumps and metrics in .artifacts/soak/.
PAYKIT_SOAK_STALL_DIR="$PWD/.artifacts/soak" go test -race -count=1 -timeout 10m -run '^TestSoak$' ./e2e
# The notification boundary, fuzzed from genuine signed bodies for a bounded time.
go test -count=1 -run '^$' -fuzz '^FuzzNotificationBoundary$' -fuzztime 20s ./alipay
# TestTemporalNodeKilledMidStorm starts a second server node on the same databases and
# SIGKILLs it while merchants check out and refund and buyers pay.
PAYKIT_E2E_TEMPORAL=postgres go test -race -count=1 -timeout 10m \
  -run '^(TestHappyPath|TestConcurrentIdenticalCheckouts|TestDuplicateNotificationsPayOnce|TestTwoAPIsTwoWorkersExactlyOnce|TestTemporalNodeKilledMidStorm)$' ./e2e
# The same server with mutual TLS on its frontend and internode traffic, on certificates
# made for the run (scripts/temporal-certs.sh); every paykit process presents the run's
# client certificate, and the server refuses a client without one or with another CA's.
PAYKIT_E2E_TEMPORAL=postgres-mtls go test -race -count=1 -timeout 10m \
  -run '^(TestHappyPath|TestTwoAPIsTwoWorkersExactlyOnce|TestRefundConcurrentIdenticalRequests|TestRefundConcurrentPartialRefundsNeverExceedThePayment|TestTemporalServerRefusesClientsWithoutItsCertificate)$' ./e2e
# The Redis storage tests and the happy path and two storms again on a Redis Cluster of
# three masters started from redis-server for the run (e2e/TestRedisClusterMasterKilledMidStorm,
# in the pass above, kills one of its own cluster's masters mid-storm).
PAYKIT_TEST_REDIS_ADDR=cluster go test -race -count=1 ./redis ./internal/testenv ./activities
PAYKIT_TEST_REDIS_ADDR=cluster go test -race -count=1 -timeout 10m \
  -run '^(TestHappyPath|TestConcurrentIdenticalCheckouts|TestDuplicateNotificationsPayOnce)$' ./e2e
# The TiDB pass: the storage and migration tests, the e2e happy path, two storms, the
# two-API two-worker topology and a shortened randomized fault suite on one standalone TiDB
# server (scripts/tidb.sh) instead of MariaDB.
if ! wait "$tidb_build"; then
  cat .artifacts/build-tidb.log >&2
  exit 1
fi
scripts/tidb.sh start
trap 'scripts/tidb.sh stop' EXIT
export PAYKIT_TEST_MYSQL_DSN="$(scripts/tidb.sh dsn)"
go test -race -count=1 ./mysql ./migrations
PAYKIT_FAULT_DURATION=20s go test -race -count=1 -timeout 15m \
  -run '^(TestHappyPath|TestConcurrentIdenticalCheckouts|TestDuplicateNotificationsPayOnce|TestTwoAPIsTwoWorkersExactlyOnce|TestRandomizedFaults)$' ./e2e
unset PAYKIT_TEST_MYSQL_DSN
scripts/tidb.sh stop
trap - EXIT
# An independent client (Alipay's official Node SDK) against the simulator.
tools/alipay-sdk-check/run.sh
# A second independent Go client (gopay), which posts to gateway.do?charset=utf-8.
tools/alipay-gopay-check/run.sh
# Real webhook deliveries verified with the official Standard Webhooks library for Node.
tools/standardwebhooks-check/run.sh
