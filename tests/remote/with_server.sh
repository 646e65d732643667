#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs a command against a fresh `backplane serve` (docs/remote.md):
#
#   with_server.sh BACKPLANE [serve options ...] -- COMMAND [ARGS ...]
#
# starts `BACKPLANE serve --listen 127.0.0.1:0 --port-file F [serve options]`, waits (at most
# 30 s) for the port, runs COMMAND with BACKPLANE_REMOTE=127.0.0.1:PORT and BACKPLANE_SERVER_PID
# set, then stops the server with SIGTERM and exits with COMMAND's status. The server's log is
# printed when COMMAND fails or the server does not start. SERVE_LISTEN overrides 127.0.0.1.
#
# SERVE_LAYERS=LIST runs the server under those layers (its BACKPLANE_LAYERS; COMMAND runs with
# BACKPLANE_LAYERS unset), then, after COMMAND, stops it, prints its whole log (what a layer
# reports, at a call or at exit, for ctest's FAIL_REGULAR_EXPRESSION) and fails unless it
# exited 0 (docs/layers/faults.md).
set -uo pipefail

cli="$1"
shift
serve_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  serve_args+=("$1")
  shift
done
if [ $# -eq 0 ]; then
  echo "with_server.sh: no '--' before the command" >&2
  exit 2
fi
shift

work="$(mktemp -d)"
log="$work/server.log"
port_file="$work/port"
listen="${SERVE_LISTEN:-127.0.0.1}"
layers="${SERVE_LAYERS:-}"
server_env=()
client_env=()
if [ -n "$layers" ]; then
  server_env=("BACKPLANE_LAYERS=$layers")
  client_env=(-u BACKPLANE_LAYERS)
fi
env "${server_env[@]}" "$cli" serve --listen "$listen:0" --port-file "$port_file" \
  "${serve_args[@]}" >"$log" 2>&1 &
server=$!
cleanup() {
  kill -TERM "$server" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

for _ in $(seq 300); do
  [ -s "$port_file" ] && break
  if ! kill -0 "$server" 2>/dev/null; then
    echo "with_server.sh: backplane serve exited before listening; its log:" >&2
    cat "$log" >&2
    exit 1
  fi
  sleep 0.1
done
if [ ! -s "$port_file" ]; then
  echo "with_server.sh: backplane serve did not listen within 30 s; its log:" >&2
  cat "$log" >&2
  exit 1
fi
port="$(cat "$port_file")"
export BACKPLANE_REMOTE="$listen:$port"
export BACKPLANE_SERVER_PID="$server"
env "${client_env[@]}" "$@"
status=$?
if [ -n "$layers" ]; then
  kill -TERM "$server"
  for _ in $(seq 200); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server" 2>/dev/null
  wait "$server"
  server_status=$?
  echo "--- the server's log (BACKPLANE_LAYERS=$layers) ---"
  cat "$log"
  if [ $server_status -ne 0 ]; then
    echo "with_server.sh: the server exited with $server_status, not 0 (SIGTERM)" >&2
    [ $status -eq 0 ] && status=1
  fi
elif [ $status -ne 0 ]; then
  echo "with_server.sh: '$*' exited with $status; the server's log:" >&2
  cat "$log" >&2
fi
exit $status
