#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What the built libraries export is exactly what c_api.h declares (docs/abi.md, "Exported
# symbols"):
# - libbackplane: every BP_EXPORT function of c_api.h, each in the version node
#   BACKPLANE_<major> (cmake/libbackplane.map), and nothing else;
# - every plugin in the plugin folder: its entry point (BP_PLUGIN_ENTRY_SYMBOL) and nothing else.
# A symbol exported but not declared fails, named, and so does one declared but not exported.
# No C++ symbol (the core's, the IR library's, the SDK's, libstdc++'s or Boost's template
# instances) leaks out: a plugin linking its own copy of another version never binds to ours.
#   exported_symbols_test.sh C_API_H LIBBACKPLANE PLUGIN_DIR
set -euo pipefail
header="${1:?usage: exported_symbols_test.sh C_API_H LIBBACKPLANE PLUGIN_DIR}"
core="${2:?usage: exported_symbols_test.sh C_API_H LIBBACKPLANE PLUGIN_DIR}"
plugin_dir="${3:?usage: exported_symbols_test.sh C_API_H LIBBACKPLANE PLUGIN_DIR}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../../cmake/abi/abi_common.sh
source "$root/cmake/abi/abi_common.sh"
command -v nm >/dev/null || {
  echo "FAIL: nm (binutils) is missing; it lists the symbols a library exports"
  exit 1
}
status=0
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The defined dynamic symbols of a library with their version ("bp_build@@BACKPLANE_1"),
# without the definitions of version nodes (absolute symbols named after the node). Sorted.
versioned() {
  nm -D --defined-only --with-symbol-versions "$1" | awk '$2 != "A" {print $3}' | LC_ALL=C sort -u
}
# The same names without their version.
exported() { versioned "$1" | sed 's/@.*//' | LC_ALL=C sort -u; }

# compare LIB WHAT EXPECTED_FILE FIX: the names a library exports against the expected list.
compare() {
  local lib="$1" what="$2" expected="$3" fix="$4" extra missing
  exported "$lib" >"$work/actual"
  extra="$(LC_ALL=C comm -13 "$expected" "$work/actual")"
  missing="$(LC_ALL=C comm -23 "$expected" "$work/actual")"
  if [ -n "$extra" ]; then
    echo "FAIL: $what exports $(echo "$extra" | wc -l) symbol(s) that c_api.h does not declare:"
    echo "$extra" | c++filt | sed 's/^/    /'
    echo "  $fix"
    status=1
  fi
  if [ -n "$missing" ]; then
    echo "FAIL: $what does not export $(echo "$missing" | wc -l) symbol(s) that c_api.h declares:"
    echo "$missing" | sed 's/^/    /'
    echo "  $fix"
    status=1
  fi
  if [ -z "$extra" ] && [ -z "$missing" ]; then
    echo "ok: $what exports the $(wc -l <"$expected") symbol(s) c_api.h declares for it, and no other"
  fi
}

node="$(abi_version_node "$header")"
abi_exported_symbols "$header" >"$work/core.expected"
if [ ! -s "$work/core.expected" ]; then
  echo "FAIL: found no BP_EXPORT function in $header"
  exit 1
fi
compare "$core" "libbackplane ($(basename "$core"))" "$work/core.expected" \
  "libbackplane exports the BP_EXPORT functions of c_api.h alone: a new entry point is declared there (a new minor, docs/abi.md); everything else stays hidden (cmake/libbackplane.map)."
# Each of them in the version node of this major, as its default version.
unversioned="$(versioned "$core" | awk -v node="$node" -v list="$work/core.expected" '
  BEGIN { while ((getline s < list) > 0) declared[s] = 1 }
  { name = $0; sub(/@.*/, "", name); if ((name in declared) && $0 != name "@@" node) print }')"
if [ -n "$unversioned" ]; then
  echo "FAIL: libbackplane exports $(echo "$unversioned" | wc -l) C ABI symbol(s) outside the" \
    "version node $node (ABI major $(abi_header_version "$header" | cut -d. -f1)), e.g.:"
  echo "$unversioned" | head -5 | sed 's/^/    /'
  echo "  cmake/libbackplane.map puts every bp_* symbol in $node; is it passed to the linker" \
    "(core/CMakeLists.txt), and does its node follow BP_ABI_VERSION_MAJOR?"
  status=1
else
  echo "ok: libbackplane's symbols are all in version node $node"
fi

abi_plugin_symbols "$header" >"$work/plugin.expected"
if [ ! -s "$work/plugin.expected" ]; then
  echo "FAIL: found no BP_PLUGIN_ENTRY_SYMBOL in $header"
  exit 1
fi
found=0
for plugin in "$plugin_dir"/*.so; do
  [ -e "$plugin" ] || continue
  found=$((found + 1))
  compare "$plugin" "$(basename "$plugin")" "$work/plugin.expected" \
    "A plugin exports its entry point alone: build it with backplane_add_plugin (cmake/BackplanePlugin.cmake), whose version script exports bp_plugin_* and hides the rest."
done
if [ "$found" -eq 0 ]; then
  echo "FAIL: no plugin (*.so) in $plugin_dir; build the plugins first"
  status=1
fi
exit "$status"
