#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs a client command against `backplane serve` with layers in the server's environment alone
# (docs/layers/faults.md, "Under the conformance kit and the remote server"):
#
#   serve_with_layers.sh BACKPLANE LAYERS [serve options ...] -- COMMAND [ARGS ...]
#
# starts `BACKPLANE_LAYERS=LAYERS BACKPLANE serve --listen 127.0.0.1:0 [serve options]`, runs
# COMMAND with BACKPLANE_REMOTE set and BACKPLANE_LAYERS unset, stops the server with SIGTERM
# (what a layer reports at exit, such as leaks, is written then) and prints the server's whole
# log, so that ctest's FAIL_REGULAR_EXPRESSION sees the server's findings too. Exits with
# COMMAND's status, or 1 when the server did not start or did not stop cleanly (exit status 0).
set -uo pipefail

cli="$1"
layers="$2"
shift 2
serve_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  serve_args+=("$1")
  shift
done
if [ $# -eq 0 ]; then
  echo "serve_with_layers.sh: no '--' before the command" >&2
  exit 2
fi
shift

work="$(mktemp -d)"
log="$work/server.log"
port_file="$work/port"
BACKPLANE_LAYERS="$layers" "$cli" serve --listen 127.0.0.1:0 --port-file "$port_file" \
  "${serve_args[@]}" >"$log" 2>&1 &
server=$!
trap 'kill -KILL "$server" 2>/dev/null; rm -rf "$work"' EXIT

for _ in $(seq 300); do
  [ -s "$port_file" ] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
if [ ! -s "$port_file" ]; then
  echo "serve_with_layers.sh: backplane serve did not listen; its log:" >&2
  cat "$log" >&2
  exit 1
fi
BACKPLANE_REMOTE="127.0.0.1:$(cat "$port_file")" env -u BACKPLANE_LAYERS "$@"
status=$?

kill -TERM "$server"
for _ in $(seq 200); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$server" 2>/dev/null; then
  echo "serve_with_layers.sh: the server did not stop within 20 s of SIGTERM" >&2
  kill -KILL "$server"
fi
wait "$server"
server_status=$?
echo "--- the server's log (BACKPLANE_LAYERS=$layers) ---"
cat "$log"
if [ "$server_status" -ne 0 ]; then
  echo "serve_with_layers.sh: the server exited with $server_status, not 0" >&2
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "serve_with_layers.sh: '$*' exited with $status" >&2
fi
exit $status
