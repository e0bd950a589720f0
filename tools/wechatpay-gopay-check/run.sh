#!/usr/bin/env bash
# Builds the WeChat Pay simulator and drives it with github.com/go-pay/gopay's wechat/v3,
# an independent WeChat Pay API v3 client, unchanged but for SetProxyHost.
# Usage: tools/wechatpay-gopay-check/run.sh  (from anywhere)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
exec go run . -root "$here/../.." "$@"
