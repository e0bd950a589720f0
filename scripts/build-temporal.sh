#!/usr/bin/env bash
# Builds the pinned Temporal CLI (dev server + Web UI) from tools/go.mod into .bin/temporal.
# The first build compiles ~700 packages (about 9 minutes on 2 cores); later runs are cached.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .bin
go -C tools build -o ../.bin/temporal github.com/temporalio/cli/cmd/temporal
echo "temporal CLI: $(.bin/temporal --version)" >&2
