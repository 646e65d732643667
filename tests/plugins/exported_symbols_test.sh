#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The only symbols libbackplane exports are the C ABI's bp_*, and a plugin exports its entry
# point: no C++ symbol of Backplane (the IR library, the code generators, the SDK) leaks out
# of either, so a plugin linking its own copy of a different SDK version never binds to the
# core's copy or another plugin's.
#   exported_symbols_test.sh LIBBACKPLANE PLUGIN_DIR
set -euo pipefail
core="$1"
plugin_dir="$2"
status=0

# Defined dynamic symbols of a library, mangled.
exported() { nm -D --defined-only "$1" | awk '{print $3}'; }

# C++ names in namespace backplane: functions, vtables, typeinfo (names, objects), guards.
leaks() { grep -E '^_Z(N|NK|TV|TI|TS|GV|TH|TW)?N?9backplane' || true; }

check() {
  local lib="$1" what="$2" bad
  bad="$(exported "$lib" | leaks)"
  if [ -n "$bad" ]; then
    echo "FAIL: $what exports $(echo "$bad" | wc -l) C++ symbols of namespace backplane, e.g.:"
    echo "$bad" | head -5 | c++filt | sed 's/^/  /'
    echo "  Link static libraries with -Wl,--exclude-libs,ALL and build them with hidden visibility."
    status=1
  else
    echo "ok: $what exports no C++ symbol of Backplane"
  fi
}

check "$core" "libbackplane"

found=0
for plugin in "$plugin_dir"/*.so; do
  [ -e "$plugin" ] || continue
  found=1
  check "$plugin" "$(basename "$plugin")"
  if ! exported "$plugin" | grep -qx bp_plugin_init; then
    echo "FAIL: $(basename "$plugin") does not export bp_plugin_init"
    status=1
  fi
done
if [ "$found" -eq 0 ]; then
  echo "FAIL: no plugin in $plugin_dir"
  status=1
fi
exit "$status"
