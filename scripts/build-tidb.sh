#!/usr/bin/env bash
# Builds the pinned TiDB server from tools/tidb/go.mod into .bin/tidb-server, for the test
# command's TiDB pass (PAYKIT_E2E_MYSQL=tidb). The pin is TiDB's master at commit e4e814fdc0af
# (2025-11-26); the binary reports that as its version. The first build compiles about 1,500
# packages (8 to 9 minutes on 2 cores); later runs are cached and relink in about 10 s.
# PAYKIT_BUILD_NICE=1 builds at the lowest CPU priority, so tests running meanwhile keep theirs.
set -euo pipefail
cd "$(dirname "$0")/.."
# The compiler collects garbage a quarter as often: a fifth less CPU for a cold build
# (PAYKIT_BUILD_GOGC; see docs/testing.md).
export GOGC=${PAYKIT_BUILD_GOGC:-400}
# The compiler writes no debug information (nothing here reads it; the link strips it
# anyway): about a tenth less CPU for a cold build (see docs/testing.md).
mkdir -p .bin
nice=()
if [ "${PAYKIT_BUILD_NICE:-}" = 1 ]; then nice=(nice -n 19); fi
"${nice[@]}" go -C tools/tidb build -trimpath -gcflags=all=-dwarf=false \
  -ldflags '-s -w -X "github.com/pingcap/tidb/pkg/parser/mysql.TiDBReleaseVersion=master-e4e814fdc0af" -X "github.com/pingcap/tidb/pkg/util/versioninfo.TiDBGitHash=e4e814fdc0af"' \
  -o ../../.bin/tidb-server github.com/pingcap/tidb/cmd/tidb-server
echo "tidb-server: $(.bin/tidb-server -V 2>&1 | head -1)" >&2
