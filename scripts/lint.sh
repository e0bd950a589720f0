#!/usr/bin/env bash
# Lints the module with golangci-lint, pinned in tools/lint/go.mod (its own module, so
# that the linter's dependencies never reach paykit's), with .golangci.yml.
set -euo pipefail
cd "$(dirname "$0")/.."
# The compiler collects garbage a quarter as often: a fifth less CPU for a cold build
# (PAYKIT_BUILD_GOGC; see docs/testing.md).
export GOGC=${PAYKIT_BUILD_GOGC:-400}
# The compiler writes no debug information (nothing here reads it; the link strips it
# anyway): about a tenth less CPU for a cold build (see docs/testing.md).
mkdir -p .bin
if [ ! -x .bin/golangci-lint ] || [ tools/lint/go.mod -nt .bin/golangci-lint ]; then
  go -C tools/lint build -gcflags=all=-dwarf=false -o ../../.bin/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint
fi
exec .bin/golangci-lint run "$@" ./...
