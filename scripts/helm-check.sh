#!/usr/bin/env bash
# Checks the Helm chart deploy/helm/paykit: `helm lint` and `helm template` with each values
# file of its ci/ directory (minimal; production with Temporal mTLS and existing Secrets;
# TiDB plus a Redis Cluster; Alipay's certificate mode with the migration's own DSN; Worker
# Versioning with two builds, and its rainbow deployment's steps), then
# tools/helmcheck decodes every rendered object strictly into the Kubernetes API types
# (unknown fields and kinds fail), checks the chart's promises (probes,
# PodDisruptionBudgets, non-root, read-only root filesystem, termination grace, the hook
# Jobs, each container's secrets, the chart's Secrets deleted with their use, the admin
# port behind a NetworkPolicy), that each render does what its values file asks, and that
# the PrometheusRule's groups are deploy/prometheus/alerts.yml's.
# Helm (helm.sh/helm/v4) and the checker are pinned in tools/helmcheck/go.mod and built into
# .bin/. The first build takes about 11 minutes of CPU (9.5 minutes of wall time on the
# shared 2-core development machine); later runs are cached (about 7 s). --build-only builds
# and stops (scripts/test.sh starts it early, in the background); PAYKIT_BUILD_NICE=1 builds
# at the lowest CPU priority.
set -euo pipefail
cd "$(dirname "$0")/.."
# The compiler collects garbage a quarter as often: a fifth less CPU for a cold build
# (PAYKIT_BUILD_GOGC; see docs/testing.md).
export GOGC=${PAYKIT_BUILD_GOGC:-400}
# The compiler writes no debug information (nothing here reads it; the link strips it
# anyway): about a tenth less CPU for a cold build (see docs/testing.md).
mkdir -p .bin .artifacts/helm
nice=()
if [ "${PAYKIT_BUILD_NICE:-}" = 1 ]; then nice=(nice -n 19); fi
"${nice[@]}" go -C tools/helmcheck build -trimpath -gcflags=all=-dwarf=false -ldflags '-s -w -X helm.sh/helm/v4/internal/version.version=v4.3.2' -o ../../.bin/helm helm.sh/helm/v4/cmd/helm
"${nice[@]}" go -C tools/helmcheck build -trimpath -gcflags=all=-dwarf=false -o ../../.bin/helmcheck .
if [ "${1:-}" = --build-only ]; then
  exit 0
fi
go -C tools/helmcheck test -trimpath -gcflags=all=-dwarf=false -count=1 .
echo "helm: $(.bin/helm version --short)" >&2
chart=deploy/helm/paykit
rendered=()
for values in "$chart"/ci/*.yaml; do
  name=$(basename "$values" .yaml)
  .bin/helm lint --strict "$chart" -f "$values"
  .bin/helm template paykit "$chart" -f "$values" --namespace paykit >".artifacts/helm/$name.yaml"
  rendered+=(".artifacts/helm/$name.yaml")
done
# What a release must say is refused when missing, naming the value.
for value in publicUrl alipay.appId alipay.sellerId; do
  if out=$(.bin/helm template paykit "$chart" -f "$chart/ci/minimal.yaml" --set "$value=" 2>&1); then
    echo "helm template without $value rendered; want it refused" >&2
    exit 1
  fi
  grep -q "$value" <<<"$out" || { echo "helm template without $value: $out" >&2; exit 1; }
done
# A ServiceMonitor behind the default NetworkPolicy needs the peers that scrape named.
if out=$(.bin/helm template paykit "$chart" -f "$chart/ci/minimal.yaml" --set serviceMonitor.enabled=true 2>&1); then
  echo "helm template with a ServiceMonitor and no networkPolicy.adminFrom rendered; want it refused" >&2
  exit 1
fi
grep -q networkPolicy.adminFrom <<<"$out" || { echo "helm template with a ServiceMonitor and no networkPolicy.adminFrom: $out" >&2; exit 1; }
# The chart asks for Kubernetes 1.30 (preStop's sleep action); an older cluster is refused.
if .bin/helm template paykit "$chart" -f "$chart/ci/minimal.yaml" --kube-version 1.29.0 >/dev/null 2>&1; then
  echo "helm template for Kubernetes 1.29 rendered; want it refused (kubeVersion)" >&2
  exit 1
fi
# Worker Versioning's rainbow deployment (ci/rainbow.yaml has two builds): the old build
# alone, then the new one added beside it, then the old one dropped once drained; adding a
# build adds its Deployment and changes nothing of the old one's, and dropping it touches
# nothing else (helmcheck -rainbow).
rainbow=$chart/ci/rainbow.yaml
.bin/helm template paykit "$chart" -f "$rainbow" --namespace paykit \
  --set-json 'worker.versions=[{"buildId":"v0-2-0","tag":"v0.2.0","replicas":1}]' >.artifacts/helm/rainbow-before.yaml
.bin/helm template paykit "$chart" -f "$rainbow" --namespace paykit \
  --set-json 'worker.versions=[{"buildId":"v0-3-0","tag":"v0.3.0"}]' >.artifacts/helm/rainbow-after.yaml
.bin/helmcheck -rainbow .artifacts/helm/rainbow-before.yaml .artifacts/helm/rainbow.yaml .artifacts/helm/rainbow-after.yaml
# Versions a release cannot run are refused, naming the value.
for bad in 'worker.versions=[{"buildId":"v0-2-0"}]' \
  'worker.versioning.enabled=true' \
  'worker.versioning.enabled=true,worker.versions=[{"buildId":"v0.2.0"}]' \
  'worker.versioning.enabled=true,worker.versions=[{"buildId":"a"},{"buildId":"a"}]' \
  'env={"PAYKIT_WORKER_BUILD_ID":"a"}'; do
  if out=$(.bin/helm template paykit "$chart" -f "$chart/ci/minimal.yaml" --set-json "$bad" 2>&1); then
    echo "helm template with $bad rendered; want it refused" >&2
    exit 1
  fi
  grep -qE 'worker\.version|env\.PAYKIT_WORKER' <<<"$out" || { echo "helm template with $bad: $out" >&2; exit 1; }
done
if [ "${#rendered[@]}" -lt 4 ]; then
  echo "want at least four values files in $chart/ci" >&2
  exit 1
fi
.bin/helmcheck -alerts deploy/prometheus/alerts.yml -values "$chart/ci" "${rendered[@]}"
grep -q 'kind: PrometheusRule' "${rendered[@]}" || { echo "no values file renders the PrometheusRule" >&2; exit 1; }
