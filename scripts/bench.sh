#!/usr/bin/env bash
# The benchmark: Temporal's own floors and paykit's paths in one run against one Temporal
# dev server, each pair alternately for several rounds; prints the medians, their ratios
# to the floor and the targets (e2e/perf_test.go). Run it on a quiet machine: the MySQL
# and Redis counts of a duplicate checkout are read from the servers' own statistics.
#
#   scripts/bench.sh                      # 3 rounds
#   PAYKIT_PERF_ROUNDS=5 scripts/bench.sh
#   PAYKIT_PERF_PROFILE_DIR=/tmp/prof scripts/bench.sh   # CPU profiles of the API and
#                                         # worker and Temporal's metrics, last round
#   PAYKIT_PERF_PAID=0 PAYKIT_PERF_OPEN=0 scripts/bench.sh  # without the 10,000 whole
#                                         # payments and the 10,000 open ones
#   PAYKIT_PERF_OPEN_LIFE=1 scripts/bench.sh  # the 10,000 open payments kept until every one
#                                         # has ended (about 17 more minutes), then what each
#                                         # cost over its life: queries, closes, workflow tasks
#   PAYKIT_E2E_TEMPORAL=postgres PAYKIT_PERF_WORKERS=2 scripts/bench.sh  # two workers and
#                                         # two APIs taking the requests in turn
#
# The table is also written to PAYKIT_PERF_OUT (default bench-results.md, not committed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh
if [ -z "${PAYKIT_TEMPORAL_CLI:-}" ]; then
  scripts/build-temporal.sh
  export PAYKIT_TEMPORAL_CLI="$PWD/.bin/temporal"
fi
export PAYKIT_PERF=1
export PAYKIT_PERF_OUT="${PAYKIT_PERF_OUT:-$PWD/bench-results.md}"
go test ./e2e -run '^TestPerf$' -count=1 -v -timeout 90m
echo "table written to $PAYKIT_PERF_OUT"
