#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Makes the certificates the remote server tests use, with openssl (Debian: openssl), into
# FOLDER:
#   ca.pem, ca.key                   a CA
#   server.pem, server.key           the server's, signed by the CA, for 127.0.0.1, ::1,
#                                    localhost and EXTRA_IP (when given)
#   client.pem, client.key           a client's, signed by the CA
#   other_ca.pem, other_ca.key       a second, unrelated CA
#   other_client.pem, other_client.key   a client's signed by the second CA (a "wrong
#                                    certificate" for a server that trusts the first)
# EC P-256 keys, valid for a day from now: fast, and nothing to keep.
# Usage: make_certs.sh FOLDER [EXTRA_IP]
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 FOLDER [EXTRA_IP]" >&2
  exit 2
fi
dir=$1
extra=${2:-}
mkdir -p "$dir"
cd "$dir"

key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1" 2>/dev/null; }

# ca NAME SUBJECT
ca() {
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -sha256 -days 1 -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$1.pem" 2>/dev/null
}

# leaf NAME CA SUBJECT EXTENSIONS
leaf() {
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$3" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -set_serial "0x$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')" \
    -days 1 -sha256 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

san="DNS:localhost,IP:127.0.0.1,IP:::1"
if [ -n "$extra" ]; then san="$san,IP:$extra"; fi

ca ca "Backplane test CA"
ca other_ca "Another test CA"
leaf server ca "localhost" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=$san"
leaf client ca "backplane test client" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
leaf other_client other_ca "another test client" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
chmod 600 ./*.key
