#!/usr/bin/env bash
# A real Temporal server (not the dev server) on PostgreSQL, with SQL advanced visibility
# (postgres12 plugin) so that search attributes work. Built from the pinned server module
# in tools/ by scripts/build-temporal.sh.
#
#   scripts/temporal-postgres.sh schema   create the two databases if missing and apply the
#                                         server's schema with its own temporal-sql-tool
#   scripts/temporal-postgres.sh config   write the server config into $TEMPORAL_PG_DIR
#   scripts/temporal-postgres.sh start    exec the server (foreground) on that config
#   scripts/temporal-postgres.sh setup    namespace + paykit search attributes (paykit temporal-setup)
#   scripts/temporal-postgres.sh up       schema, config, server in the background, setup
#   scripts/temporal-postgres.sh drop     drop both databases
#
# Settings (environment, with defaults):
#   TEMPORAL_PG_HOST=127.0.0.1 TEMPORAL_PG_PORT=5432 TEMPORAL_PG_USER=postgres TEMPORAL_PG_PASSWORD=
#   TEMPORAL_PG_DB=temporal TEMPORAL_PG_VISIBILITY_DB=temporal_visibility (tests use their own)
#   TEMPORAL_PG_DIR=.dev/temporal-postgres   config and log
#   TEMPORAL_PORT=7233        frontend gRPC; history +1, matching +2, worker +6, frontend HTTP +10
#   TEMPORAL_MEMBERSHIP_PORT=$((TEMPORAL_PORT-300))   the four membership ports: +0 +1 +2 +6
#   TEMPORAL_METRICS_ADDR=127.0.0.1:8000   Prometheus metrics of the server
#   TEMPORAL_HISTORY_SHARDS=4  fixed for the life of the databases
#   TEMPORAL_NAMESPACE=default
#   TEMPORAL_LOG_LEVEL=warn   TEMPORAL_BIN_DIR=.bin   PAYKIT_BIN="go run ./cmd/paykit" (for setup)
#   TEMPORAL_TLS_DIR=         empty: no TLS. Else a directory made by scripts/temporal-certs.sh:
#                             mutual TLS on the frontend and on internode traffic (a client
#                             certificate of its CA required on both), the worker service
#                             dialling the frontend with the server's certificate, and `setup`
#                             dialling with the client certificate
#   TEMPORAL_TLS_SERVER_NAME=temporal-server   the name in the server's certificate, which its
#                             nodes and `setup` check (they dial 127.0.0.1)
#   TEMPORAL_FORCE_SA_REFRESH=false   true re-reads search attributes from the database on every
#                             check (a testing aid, not for production; SQL visibility does not need it)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=${TEMPORAL_BIN_DIR:-$root/.bin}
pg_host=${TEMPORAL_PG_HOST:-127.0.0.1}
pg_port=${TEMPORAL_PG_PORT:-5432}
pg_user=${TEMPORAL_PG_USER:-postgres}
pg_password=${TEMPORAL_PG_PASSWORD:-}
db=${TEMPORAL_PG_DB:-temporal}
vis_db=${TEMPORAL_PG_VISIBILITY_DB:-temporal_visibility}
dir=${TEMPORAL_PG_DIR:-$root/.dev/temporal-postgres}
port=${TEMPORAL_PORT:-7233}
mport=${TEMPORAL_MEMBERSHIP_PORT:-$((port - 300))}
metrics=${TEMPORAL_METRICS_ADDR:-127.0.0.1:8000}
shards=${TEMPORAL_HISTORY_SHARDS:-4}
namespace=${TEMPORAL_NAMESPACE:-default}
tls_dir=${TEMPORAL_TLS_DIR:-}
tls_name=${TEMPORAL_TLS_SERVER_NAME:-temporal-server}
if [ -n "$tls_dir" ]; then
  tls_dir=$(cd "$tls_dir" && pwd)
fi

need() {
  if [ ! -x "$bin/$1" ]; then
    echo "no $bin/$1: build it with scripts/build-temporal.sh" >&2
    exit 1
  fi
}

# sql_tool runs the server's SQL tool quietly, showing its log only when it fails.
sql_tool() {
  local out
  if ! out=$("$bin/temporal-sql-tool" --plugin postgres12 --ep "$pg_host" -p "$pg_port" -u "$pg_user" --pw "$pg_password" "$@" 2>&1); then
    echo "$out" >&2
    return 1
  fi
}

schema() {
  need temporal-sql-tool
  local d name
  for d in "$db:temporal" "$vis_db:visibility"; do
    name=${d%%:*}
    # create-database fails if it exists; setup-schema -v 0.0 only creates the version
    # table if it is missing, and update-schema applies what is not applied yet.
    sql_tool --db "$name" create-database 2>/dev/null || true
    sql_tool --db "$name" setup-schema -v 0.0
    sql_tool --db "$name" update-schema --schema-name "postgresql/v12/${d#*:}"
  done
  echo "temporal schema ready in $db and $vis_db on $pg_host:$pg_port" >&2
}

drop() {
  need temporal-sql-tool
  local name
  for name in "$db" "$vis_db"; do
    # A server that just stopped may still hold connections for a moment.
    for _ in 1 2 3 4 5 6; do
      sql_tool --db "$name" drop-database -f 2>/dev/null && break
      sleep 0.5
    done
  done
}

datastore() { # name database maxConns
  cat <<EOF
    $1:
      sql:
        pluginName: postgres12
        databaseName: "$2"
        connectAddr: "$pg_host:$pg_port"
        connectProtocol: tcp
        user: "$pg_user"
        password: "$pg_password"
        maxConns: $3
        maxIdleConns: $3
        maxConnLifetime: 1h
EOF
}

service() { # name grpc-offset
  cat <<EOF
  $1:
    rpc:
      grpcPort: $((port + $2))
      membershipPort: $((mport + $2))
      bindOnLocalHost: true
EOF
}

# tls prints the server's global.tls: one certificate and CA for the frontend (paykit, the
# CLI) and for internode traffic (history, matching, and the worker service's client of the
# frontend), a client certificate of that CA required on both. The files are read again
# every minute, so a renewed certificate needs no restart.
tls() {
  local f group
  for f in ca.pem server.pem server-key.pem; do
    if [ ! -s "$tls_dir/$f" ]; then
      echo "TEMPORAL_TLS_DIR=$tls_dir has no $f: make it with scripts/temporal-certs.sh" >&2
      return 1
    fi
  done
  cat <<EOF
  tls:
    refreshInterval: 1m
EOF
  for group in internode frontend; do
    cat <<EOF
    $group:
      server:
        certFile: "$tls_dir/server.pem"
        keyFile: "$tls_dir/server-key.pem"
        requireClientAuth: true
        clientCaFiles: ["$tls_dir/ca.pem"]
      client:
        serverName: "$tls_name"
        rootCaFiles: ["$tls_dir/ca.pem"]
EOF
  done
  cat <<EOF
    systemWorker:
      certFile: "$tls_dir/server.pem"
      keyFile: "$tls_dir/server-key.pem"
      client:
        serverName: "$tls_name"
        rootCaFiles: ["$tls_dir/ca.pem"]
EOF
}

config() {
  mkdir -p "$dir/config"
  [ -z "$tls_dir" ] || tls >/dev/null
  # Modelled on config/development-postgres12.yaml of the server module, all four services
  # in one process.
  {
    cat <<EOF
log:
  stdout: true
  level: ${TEMPORAL_LOG_LEVEL:-warn}
persistence:
  defaultStore: default
  visibilityStore: visibility
  numHistoryShards: $shards
  datastores:
EOF
    datastore default "$db" 20
    datastore visibility "$vis_db" 10
    cat <<EOF
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
  metrics:
    prometheus:
      framework: tally
      timerType: histogram
      listenAddress: "$metrics"
EOF
    [ -z "$tls_dir" ] || tls
    cat <<EOF
services:
EOF
    service frontend 0
    echo "      httpPort: $((port + 10))"
    service history 1
    service matching 2
    service worker 6
    cat <<EOF
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "127.0.0.1:$port"
      httpAddress: "127.0.0.1:$((port + 10))"
dcRedirectionPolicy:
  policy: noop
dynamicConfigClient:
  filepath: "$dir/config/dynamicconfig.yaml"
  pollInterval: 10s
EOF
  } >"$dir/config/paykit.yaml"
  cat >"$dir/config/dynamicconfig.yaml" <<EOF
# With SQL visibility a custom search attribute is an alias in the namespace, in effect
# once the namespace cache refreshes (2 s), which paykit temporal-setup waits for.
system.forceSearchAttributesCacheRefreshOnRead:
  - value: ${TEMPORAL_FORCE_SA_REFRESH:-false}
EOF
  echo "temporal config in $dir/config (frontend 127.0.0.1:$port${tls_dir:+, mutual TLS as $tls_name})" >&2
}

start() {
  need temporal-server
  exec "$bin/temporal-server" --root "$dir" --config config --env paykit --allow-no-auth start
}

setup() {
  if [ -n "$tls_dir" ]; then
    export PAYKIT_TEMPORAL_TLS_CA_FILE=$tls_dir/ca.pem PAYKIT_TEMPORAL_TLS_SERVER_NAME=$tls_name \
      PAYKIT_TEMPORAL_TLS_CERT_FILE=$tls_dir/client.pem PAYKIT_TEMPORAL_TLS_KEY_FILE=$tls_dir/client-key.pem
  fi
  PAYKIT_TEMPORAL_ADDR=127.0.0.1:$port PAYKIT_TEMPORAL_NAMESPACE=$namespace \
    ${PAYKIT_BIN:-go run ./cmd/paykit} temporal-setup "$@"
}

case "${1:-}" in
  schema) schema ;;
  config) config ;;
  start) start ;;
  setup) shift; setup "$@" ;;
  drop) drop ;;
  up)
    schema
    config
    "$0" start >"$dir/server.log" 2>&1 &
    echo "temporal server pid $! (log $dir/server.log)" >&2
    setup
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
    exit 2
    ;;
esac
