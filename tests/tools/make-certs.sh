#!/usr/bin/env bash
# make-certs.sh DIR: a throwaway CA, an agent server certificate (localhost,
# 127.0.0.1), a controller client certificate, and a client certificate from
# an unrelated CA (to prove it is refused). For tests and the demo only.
set -euo pipefail
dir=${1:?usage: make-certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
quiet() { "$@" >/dev/null 2>&1 || { echo "make-certs: $* failed" >&2; "$@"; exit 1; }; }
mkca() {
  quiet openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj "/CN=$1" -keyout "$1.key" -out "$1.crt"
}
mkleaf() {  # name ca san
  quiet openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
    -keyout "$1.key" -out "$1.csr"
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$3" > "$1.ext"
  quiet openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 30 \
    -extfile "$1.ext" -out "$1.crt"
  rm -f "$1.csr" "$1.ext"
}
mkca ca
mkca rogue-ca
mkleaf agent ca "DNS:localhost,IP:127.0.0.1"
mkleaf controller ca "DNS:pillar-controller"
mkleaf rogue rogue-ca "DNS:pillar-controller"
