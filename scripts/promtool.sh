#!/usr/bin/env bash
# Checks the Prometheus files in deploy/prometheus with promtool: the scrape config
# (promtool check config), the alert rules (promtool check rules) and their unit tests
# (promtool test rules alerts_test.yml).
#
# promtool comes from Debian's prometheus package, unpacked into a cache directory
# (PAYKIT_PROMTOOL_DIR, default ~/.cache/paykit/prometheus) rather than installed, so
# that no Prometheus server is set up or started on this machine. PAYKIT_PROMTOOL names
# a promtool to use instead.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${PAYKIT_PROMTOOL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/paykit/prometheus}
promtool=${PAYKIT_PROMTOOL:-$dir/usr/bin/promtool}
if [ ! -x "$promtool" ]; then
  echo "unpacking promtool from Debian's prometheus package into $dir" >&2
  work=$(mktemp -d)
  chmod 755 "$work" # apt-get download writes as _apt where it can
  trap 'rm -rf "$work"' EXIT
  if ! (cd "$work" && apt-get download prometheus >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 && apt-get download prometheus >/dev/null; }); then
    echo "could not download Debian's prometheus package; fetch it by hand:" >&2
    echo "  (cd /tmp && apt-get update && apt-get download prometheus && mkdir -p $dir && dpkg-deb -x prometheus_*.deb $dir)" >&2
    echo "or point PAYKIT_PROMTOOL at a promtool." >&2
    exit 1
  fi
  mkdir -p "$dir"
  dpkg-deb -x "$work"/prometheus_*.deb "$dir"
fi
echo "promtool: $("$promtool" --version 2>&1 | head -1)" >&2

cd deploy/prometheus
"$promtool" check config prometheus.yml
"$promtool" check rules alerts.yml
"$promtool" test rules alerts_test.yml
