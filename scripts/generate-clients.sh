#!/usr/bin/env bash
# Generates the clients from the OpenAPI contract (openapi/openapi.yaml): the Go client's
# clients/go/paykit/paykit.gen.go with oapi-codegen (pinned in tools/oapi-codegen/go.mod)
# and the TypeScript client's clients/ts/src/schema.ts with openapi-typescript (pinned
# in clients/ts/package-lock.json). Never edit either by hand.
#   scripts/generate-clients.sh           regenerate both
#   scripts/generate-clients.sh --check   regenerate, and fail if the result is not what is
#                                         committed (the test command runs this)
set -euo pipefail
cd "$(dirname "$0")/.."
generated=(clients/go/paykit/paykit.gen.go clients/ts/src/schema.ts)
mkdir -p .bin
if [ ! -x .bin/oapi-codegen ] || [ tools/oapi-codegen/go.mod -nt .bin/oapi-codegen ]; then
  go -C tools/oapi-codegen build -o ../../.bin/oapi-codegen github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen
fi
if [ ! -d clients/ts/node_modules ] || [ clients/ts/package-lock.json -nt clients/ts/node_modules ]; then
  (cd clients/ts && npm ci --no-audit --no-fund)
fi
.bin/oapi-codegen -config clients/go/paykit/oapi-codegen.yaml openapi/openapi.yaml
(cd clients/ts && npm run --silent generate)
if [ "${1:-}" = "--check" ]; then
  if [ -n "$(git status --porcelain -- "${generated[@]}")" ]; then
    echo "the generated clients differ from openapi/openapi.yaml: run scripts/generate-clients.sh and commit the result" >&2
    git --no-pager diff --stat -- "${generated[@]}" >&2
    exit 1
  fi
fi
