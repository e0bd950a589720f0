#!/usr/bin/env bash
# Builds the Alipay simulator and drives it with github.com/go-pay/gopay, a second,
# independent Go Alipay client, in public-key and in certificate mode.
# Usage: tools/alipay-gopay-check/run.sh [-mode pubkey|cert|both]  (from anywhere)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
exec go run . -root "$here/../.." "$@"
