#!/usr/bin/env bash
# Delivers webhooks with paykit's worker code to a real HTTP server (the Go test
# TestStandardWebhooks, which also verifies them with the official Go library), then
# verifies the captured deliveries with the official Node library. Needs the MariaDB and
# Redis the Go tests use, Go, Node >= 18 and npm.
# Usage: tools/standardwebhooks-check/run.sh  (from anywhere)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd "$here"
[ -d node_modules ] || npm ci --no-audit --no-fund
(cd "$root" && PAYKIT_STANDARD_WEBHOOKS_OUT="$work" go test -count=1 -run '^TestStandardWebhooks$' ./activities)
STANDARD_WEBHOOKS_DELIVERIES="$work/deliveries.json" node --test test/
