#!/usr/bin/env bash
# Starts the Go Alipay simulator with a fresh dev key set, runs the Node SDK checks
# against it, and stops it. Usage: tools/alipay-sdk-check/run.sh  (from anywhere)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
port="${ALIPAYSIM_CHECK_PORT:-18090}"
work="$(mktemp -d)"
sim_pid=""
cleanup() {
  if [ -n "$sim_pid" ]; then kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && go build -o "$work/alipaysim" ./cmd/alipaysim)
"$work/alipaysim" keygen -out "$work/keys" >/dev/null
ALIPAYSIM_KEY_DIR="$work/keys" ALIPAYSIM_ADDR="127.0.0.1:$port" ALIPAYSIM_LOG_LEVEL=warn \
  "$work/alipaysim" serve 2>"$work/sim.log" &
sim_pid=$!
for _ in $(seq 50); do
  curl -fsS "http://127.0.0.1:$port/_sim/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done

cd "$here"
[ -d node_modules ] || npm ci --no-audit --no-fund
ALIPAYSIM_URL="http://127.0.0.1:$port" ALIPAYSIM_KEY_DIR="$work/keys" node --test test/ || {
  echo "--- simulator log ---"; cat "$work/sim.log"; exit 1; }
