#!/usr/bin/env bash
# Starts the Go WeChat Pay simulator with fresh development credentials, drives it with
# the npm wechatpay-axios-plugin client (installed from package-lock.json), and stops it.
# Usage: tools/wechatpay-npm-check/run.sh  (from anywhere)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
port="${WECHATPAYSIM_CHECK_PORT:-18091}"
work="$(mktemp -d)"
sim_pid=""
cleanup() {
  if [ -n "$sim_pid" ]; then kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && go build -o "$work/wechatpaysim" ./cmd/wechatpaysim)
"$work/wechatpaysim" keygen -out "$work/keys" >/dev/null
WECHATPAYSIM_KEY_DIR="$work/keys" WECHATPAYSIM_ADDR="127.0.0.1:$port" WECHATPAYSIM_LOG_LEVEL=warn \
  WECHATPAYSIM_TIME_SCALE=600 "$work/wechatpaysim" serve 2>"$work/sim.log" &
sim_pid=$!
for _ in $(seq 50); do
  curl -fsS "http://127.0.0.1:$port/_sim/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done

cd "$here"
[ -d node_modules ] || npm ci --no-audit --no-fund
WECHATPAYSIM_URL="http://127.0.0.1:$port" WECHATPAYSIM_KEY_DIR="$work/keys" node --test --test-concurrency=1 test/ || {
  echo "--- simulator log ---"; cat "$work/sim.log"; exit 1; }
