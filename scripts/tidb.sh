#!/usr/bin/env bash
# A standalone TiDB server (unistore: its storage in the process) for the test command's TiDB
# pass, built by scripts/build-tidb.sh.
#
#   scripts/tidb.sh start   start it in the background and wait until it answers SQL
#   scripts/tidb.sh stop    stop it and remove its data
#   scripts/tidb.sh dsn     the DSN to point PAYKIT_TEST_MYSQL_DSN (or PAYKIT_MYSQL_DSN) at
#
# Settings (environment, with defaults): TIDB_PORT=4000 TIDB_STATUS_PORT=10080
#   TIDB_DIR=.dev/tidb (its data, log and pid)   TIDB_BIN=.bin/tidb-server
set -euo pipefail
cd "$(dirname "$0")/.."
port=${TIDB_PORT:-4000}
status=${TIDB_STATUS_PORT:-10080}
dir=${TIDB_DIR:-$PWD/.dev/tidb}
bin=${TIDB_BIN:-$PWD/.bin/tidb-server}
dsn="root@tcp(127.0.0.1:$port)/"

up() { mysqladmin -h 127.0.0.1 -P "$port" -u root ping >/dev/null 2>&1; }

case "${1:-}" in
start)
  if [ ! -x "$bin" ]; then
    echo "no $bin: build it with scripts/build-tidb.sh" >&2
    exit 1
  fi
  if up; then
    echo "a server already answers on 127.0.0.1:$port" >&2
    exit 1
  fi
  rm -rf "$dir/data"
  mkdir -p "$dir/data"
  # Logs at warn: TiDB's info log writes a line per DDL job and per slow query.
  "$bin" -store unistore -path "$dir/data" -host 127.0.0.1 -P "$port" -status "$status" \
    -L warn --log-file "$dir/tidb.log" -log-slow-query "$dir/tidb-slow.log" >"$dir/stdout.log" 2>&1 &
  echo $! >"$dir/pid"
  for _ in $(seq 1 120); do
    if up; then
      echo "TiDB $(mysql -h 127.0.0.1 -P "$port" -u root -N -e 'SELECT VERSION()') on 127.0.0.1:$port" >&2
      exit 0
    fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      echo "tidb-server exited; its output:" >&2
      tail -20 "$dir/stdout.log" "$dir/tidb.log" >&2 || true
      exit 1
    fi
    sleep 0.5
  done
  echo "TiDB did not answer on 127.0.0.1:$port within 60 s; see $dir/tidb.log" >&2
  exit 1
  ;;
stop)
  if [ -f "$dir/pid" ]; then
    kill "$(cat "$dir/pid")" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$(cat "$dir/pid")" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$(cat "$dir/pid")" 2>/dev/null || true
    rm -f "$dir/pid"
  fi
  rm -rf "$dir/data"
  ;;
dsn) echo "$dsn" ;;
*)
  sed -n '2,11p' "$0" >&2
  exit 2
  ;;
esac
