#!/usr/bin/env bash
# TLS and the nodes' keys for a loopback deployment, made as docs/federation.md says (steps 2 and 3):
#   bash .ci/flower_keys.sh DIR      DIR/certs (ca.crt, server.pem, server.key, ...), DIR/keys/{a,b,c,rogue}_key[.pub]
# Used by .ci/flower.sh and scripts/bench_federation.sh.
set -euo pipefail
work="$1"
mkdir -p "$work/certs" "$work/keys"
(
  cd "$work/certs"
  openssl ecparam -name secp384r1 -genkey -noout -out ca.key
  openssl req -x509 -new -key ca.key -sha256 -days 365 -subj "/CN=fedgdp CA" -out ca.crt
  openssl ecparam -name secp384r1 -genkey -noout -out server.key
  openssl req -new -key server.key -subj "/CN=localhost" -out server.csr
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -sha256 \
    -extfile <(printf "subjectAltName=DNS:localhost,IP:127.0.0.1") -out server.pem
) 2>/dev/null
for node in a b c rogue; do ssh-keygen -q -t ecdsa -b 384 -N '' -f "$work/keys/${node}_key"; done
