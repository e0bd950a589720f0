#!/usr/bin/env bash
# Makes sure MariaDB (or MySQL), Redis and PostgreSQL (for the Temporal server,
# scripts/temporal-postgres.sh) answer on 127.0.0.1, starting the local servers if they
# are installed but stopped. Used by the test command and by CI.
set -euo pipefail

wait_for() { # name, check command...
  local name=$1; shift
  for _ in $(seq 1 60); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  echo "error: $name did not come up" >&2
  return 1
}

mysql_up() { mysqladmin -h 127.0.0.1 -P 3306 -u root ping; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }
pg_up() { pg_isready -q -h 127.0.0.1 -p 5432; }

if ! command -v mysqladmin >/dev/null || ! command -v redis-cli >/dev/null; then
  echo "installing MariaDB and Redis clients/servers from Debian packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq mariadb-server mariadb-client redis-server >/dev/null
fi

if ! mysql_up >/dev/null 2>&1; then
  echo "starting MariaDB" >&2
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  wait_for MariaDB mysql_up
fi
# The test command runs dozens of paykit processes at once (each pools up to 20
# connections) beside the storage tests' own pools: MariaDB's default of 151 connections
# is too few (a cold run's race pass hit it: "Error 1040: Too many connections").
mysql -h 127.0.0.1 -P 3306 -u root -e 'SET GLOBAL max_connections = GREATEST(@@GLOBAL.max_connections, 1000)'
if ! redis_up; then
  echo "starting Redis" >&2
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_for Redis redis_up
fi
if ! command -v pg_isready >/dev/null; then
  echo "installing PostgreSQL from Debian packages" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
if ! pg_up; then
  echo "starting PostgreSQL" >&2
  read -r pg_version pg_cluster _ < <(pg_lsclusters -h)
  pg_ctlcluster "$pg_version" "$pg_cluster" start
  wait_for PostgreSQL pg_up
fi
echo "MariaDB, Redis and PostgreSQL are up" >&2
