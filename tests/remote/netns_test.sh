#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The remote plugin against a server in another network namespace of this machine, reached over
# a veth pair: a real, non-loopback address, so the server must run with mutual TLS.
#
#   netns_test.sh BACKPLANE BACKPLANE_CONFORMANCE PLUGIN_DIR
#
# 1. makes certificates (make_certs.sh) whose server certificate names the namespace's address;
# 2. starts `backplane serve --listen ADDR:0` in the namespace with --tls-cert, --tls-key and
#    --client-ca, serving its cpu device with native modules allowed;
# 3. checks that a client with no certificate and one with a certificate of another CA are
#    refused, and that a plaintext client refuses to talk to a non-loopback address;
# 4. runs the conformance kit on remote:0 with the right certificate: it must be CONFORMANT.
# Needs root (CAP_NET_ADMIN) and iproute2; without them it exits 77 (skipped), saying why.
set -uo pipefail
cli="$1"
kit="$2"
plugins="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  echo "netns_test.sh: skipped: needs root and iproute2 (ip) to make a network namespace" >&2
  exit 77
fi

tag="bp$$"
ns="$tag"
host_if="${tag}a"
ns_if="${tag}b"
octet=$(( ($$ % 200) + 20 ))
host_ip="10.213.$octet.1"
ns_ip="10.213.$octet.2"
work="$(mktemp -d)"
server=""
cleanup() {
  if [ -n "$server" ]; then
    kill -TERM "$server" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server" 2>/dev/null
    wait "$server" 2>/dev/null
  fi
  ip link del "$host_if" 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "netns_test.sh: FAILED: $*" >&2
  [ -f "$work/server.log" ] && { echo "--- the server's log:" >&2; cat "$work/server.log" >&2; }
  exit 1
}

ip netns add "$ns" || fail "ip netns add"
ip link add "$host_if" type veth peer name "$ns_if" || fail "ip link add veth"
ip link set "$ns_if" netns "$ns" || fail "moving $ns_if into $ns"
ip addr add "$host_ip/24" dev "$host_if" && ip link set "$host_if" up || fail "host side"
ip netns exec "$ns" ip addr add "$ns_ip/24" dev "$ns_if" || fail "namespace address"
ip netns exec "$ns" ip link set "$ns_if" up && ip netns exec "$ns" ip link set lo up ||
  fail "namespace links"

sh "$here/make_certs.sh" "$work/certs" "$ns_ip" >/dev/null || fail "make_certs.sh"
c="$work/certs"

# Plaintext on a non-loopback address is refused by the server itself.
if ip netns exec "$ns" "$cli" serve --listen "$ns_ip:0" >"$work/plain.log" 2>&1; then
  fail "backplane serve listened on $ns_ip without TLS"
fi
grep -q -- "--client-ca" "$work/plain.log" || fail "the refusal does not name --client-ca: $(cat "$work/plain.log")"

ip netns exec "$ns" "$cli" serve --listen "$ns_ip:0" --port-file "$work/port" \
  --tls-cert "$c/server.pem" --tls-key "$c/server.key" --client-ca "$c/ca.pem" \
  --devices cpu --allow-native-modules >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 300); do
  [ -s "$work/port" ] && break
  kill -0 "$server" 2>/dev/null || fail "backplane serve exited"
  sleep 0.1
done
[ -s "$work/port" ] || fail "backplane serve did not listen within 30 s"
address="$ns_ip:$(cat "$work/port")"
echo "netns_test.sh: server in namespace $ns at $address (mutual TLS)"

# info as JSON: the remote server's state and error as the plugin reports them.
servers() {
  env "$@" BACKPLANE_REMOTE="$address" BACKPLANE_REMOTE_TIMEOUT_MS=5000 \
    "$cli" info --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(1 for x in d.get("devices", []) if str(x.get("device", x.get("name", ""))).startswith("remote:")))'
}
n=$(servers BACKPLANE_REMOTE_CA="$c/ca.pem")
[ "$n" = 0 ] || fail "a client without a certificate saw $n remote devices"
n=$(servers BACKPLANE_REMOTE_CA="$c/ca.pem" BACKPLANE_REMOTE_CERT="$c/other_client.pem" \
  BACKPLANE_REMOTE_KEY="$c/other_client.key")
[ "$n" = 0 ] || fail "a client with another CA's certificate saw $n remote devices"
n=$(servers)
[ "$n" = 0 ] || fail "a plaintext client saw $n remote devices"
# The refusals say why on the client, and the command that listed the devices
# fails, naming the server.
err=$(BACKPLANE_REMOTE="$address" BACKPLANE_REMOTE_TIMEOUT_MS=5000 BACKPLANE_REMOTE_CA="$c/ca.pem" \
  "$cli" info -l 2>&1 >/dev/null) && fail "info -l exited 0 with the server refusing it"
echo "$err" | grep -q "presented no client certificate" ||
  fail "the client without a certificate was not told why: $err"
echo "$err" | grep -q "remote server $address is unreachable" ||
  fail "info -l did not name the unreachable server: $err"
err=$(BACKPLANE_REMOTE="$address" BACKPLANE_REMOTE_TIMEOUT_MS=5000 BACKPLANE_REMOTE_CA="$c/ca.pem" \
  BACKPLANE_REMOTE_CERT="$c/other_client.pem" BACKPLANE_REMOTE_KEY="$c/other_client.key" \
  "$cli" info -l 2>&1 >/dev/null)
echo "$err" | grep -q "does not verify against --client-ca" ||
  fail "the client with another CA's certificate was not told why: $err"
grep -q "refused ipv4:.*presented no client certificate" "$work/server.log" ||
  fail "the server's log does not name the refused peer: $(cat "$work/server.log")"
n=$(servers BACKPLANE_REMOTE_CA="$c/ca.pem" BACKPLANE_REMOTE_CERT="$c/client.pem" \
  BACKPLANE_REMOTE_KEY="$c/client.key")
[ "$n" = 1 ] || fail "the client with the right certificate saw $n remote devices, not 1"
echo "netns_test.sh: refused: no certificate, another CA's certificate, plaintext; accepted: ours"

BACKPLANE_REMOTE="$address" BACKPLANE_REMOTE_CA="$c/ca.pem" BACKPLANE_REMOTE_CERT="$c/client.pem" \
  BACKPLANE_REMOTE_KEY="$c/client.key" \
  "$kit" "$plugins/libbackplane_remote.so" --with "$plugins/libbackplane_cpu.so" \
  --device remote:0 --json "$work/conformance.json" || fail "the conformance kit over $address"
echo "netns_test.sh: CONFORMANT over $address"
