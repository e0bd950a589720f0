#!/usr/bin/env bash
# Reconciles generated Alipay bills of 10,000 and 100,000 lines against as many local
# records in MariaDB, each size in a process of its own, and prints lines per second,
# the heap high-water mark and the peak RSS of the run (statement/bench_test.go).
# Needs MariaDB on 127.0.0.1:3306 (PAYKIT_TEST_MYSQL_DSN to change it).
set -euo pipefail
cd "$(dirname "$0")/.."
for n in ${SIZES:-10000 100000}; do
  PAYKIT_STATEMENT_BENCH=$n go test -count=1 -v -run '^TestStatementBenchmark$' ./statement | grep -E '^statement bench|FAIL|--- ' || true
done
