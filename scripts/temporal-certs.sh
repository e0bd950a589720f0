#!/usr/bin/env bash
# Certificates for a Temporal server with mutual TLS on its frontend and internode traffic,
# and for paykit as its client, made with openssl:
#
#   scripts/temporal-certs.sh DIR [SERVER_NAME...]
#
# writes into DIR (created 0700):
#   ca.pem ca-key.pem           a CA of its own (P-256, 10 years); kept if already there, so
#                               running again renews the leaves under the same CA
#   server.pem server-key.pem   the server's certificate, for the frontend and for internode
#                               traffic (serverAuth and clientAuth: a node presents it to the
#                               others), with the SERVER_NAMEs as DNS names (default
#                               temporal-server localhost) and 127.0.0.1 as an IP address
#   client.pem client-key.pem   paykit's client certificate (clientAuth, CN paykit)
# Leaves last TEMPORAL_CERT_DAYS days (default 365). The leaves' keys are written
# TEMPORAL_CERT_KEY_MODE (default 600; the CA key always 600). Containers that run as other
# users than the one who made the files (the compose production profile mounts DIR
# read-only; docs/operate/temporal.md) need 644, which also opens DIR to them (755). The
# e2e postgres-mtls pass makes a DIR for each run.
set -euo pipefail
if [ $# -lt 1 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
fi
dir=$1
shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(temporal-server localhost)
days=${TEMPORAL_CERT_DAYS:-365}
key_mode=${TEMPORAL_CERT_KEY_MODE:-600}
command -v openssl >/dev/null || { echo "temporal-certs: openssl is needed (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir"
chmod 700 "$dir"
umask 077
cd "$dir"

if [ ! -s ca.pem ] || [ ! -s ca-key.pem ]; then
  openssl ecparam -name prime256v1 -genkey -noout -out ca-key.pem
  openssl req -new -x509 -key ca-key.pem -out ca.pem -days 3650 -subj "/CN=paykit Temporal CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
fi

san=""
for n in "${names[@]}"; do
  san+="DNS:$n,"
done
san+="IP:127.0.0.1"

leaf() { # name cn extendedKeyUsage [subjectAltName]
  local ext
  ext=$(mktemp)
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=$3"
    [ -z "${4:-}" ] || echo "subjectAltName=$4"
  } >"$ext"
  openssl ecparam -name prime256v1 -genkey -noout -out "$1-key.pem"
  openssl req -new -key "$1-key.pem" -subj "/CN=$2" -out "$1.csr" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days "$days" \
    -extfile "$ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$ext" ca.srl
}
leaf server "${names[0]}" serverAuth,clientAuth "$san"
leaf client paykit clientAuth
chmod 644 ca.pem server.pem client.pem
chmod "$key_mode" server-key.pem client-key.pem # the CA key stays 600: no container needs it
[ "$key_mode" = 600 ] || chmod 755 .
echo "temporal certificates in $dir (server names: ${names[*]} 127.0.0.1)" >&2
