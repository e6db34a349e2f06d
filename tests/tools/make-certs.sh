#!/usr/bin/env bash
# make-certs.sh DIR: a throwaway CA and one certificate per role, each with its
# pillar-csi://<role>/<name> URI SAN (docs/security.md): agent (storage-1's
# server certificate, localhost and 127.0.0.1; agent-2 and node-named-storage-1
# impersonate it), controller (also the registry's server certificate), operator, node-a and node-b (node plugins); a certificate without a role
# (CA-signed, no URI), and one from an unrelated CA (to prove they are
# refused). For tests and the demo only.
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
mkleaf agent ca "DNS:localhost,IP:127.0.0.1,URI:pillar-csi://agent/storage-1"
# Impostors of storage-1 that name the dialled host: another agent's
# certificate, and a node's that carries the agent's name.
mkleaf agent-2 ca "DNS:localhost,IP:127.0.0.1,URI:pillar-csi://agent/storage-2"
mkleaf node-named-storage-1 ca "DNS:localhost,IP:127.0.0.1,URI:pillar-csi://node/storage-1"
mkleaf controller ca "DNS:pillar-controller,DNS:localhost,IP:127.0.0.1,URI:pillar-csi://controller/pillar-controller"
mkleaf operator ca "URI:pillar-csi://operator/admin"
mkleaf node-a ca "URI:pillar-csi://node/node-a"
mkleaf node-b ca "URI:pillar-csi://node/node-b"
mkleaf norole ca "DNS:pillar-controller"
mkleaf rogue rogue-ca "DNS:pillar-controller,URI:pillar-csi://controller/pillar-controller"
