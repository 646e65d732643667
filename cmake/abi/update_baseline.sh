#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Records the ABI that c_api.h declares as a frozen version (docs/abi.md, "The checked baseline"):
#   bash cmake/abi/update_baseline.sh [--amend] [<build dir>]      (default build/release)
# builds libbackplane in <build dir>, then writes
#   cmake/abi/<major>.<minor>/backplane/c_api.h   a copy of core/include/backplane/c_api.h
#   cmake/abi/<major>.<minor>/libbackplane.abi    abidw's description of the library
# for the version c_api.h declares. Run it in the commit that makes a new minor (after raising
# BP_ABI_VERSION_MINOR and writing its docs/abi-changelog.md entry), and commit what it writes.
#
# It refuses
# - a change that breaks the newest recorded version of the same major (the report names the
#   symbol or field): within a major a change may only append;
# - to rewrite a version that is recorded already: a recorded version is frozen. --amend rewrites
#   the newest one, for a minor that no release has shipped yet, checking it against the version
#   before it instead.
set -euo pipefail

amend=0
if [ "${1:-}" = "--amend" ]; then
  amend=1
  shift
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build/release}"
# shellcheck source=abi_common.sh
source "$root/cmake/abi/abi_common.sh"

for tool in abidw abidiff "${CC:-cc}" cmake; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "$tool is missing (abigail-tools provides abidw and abidiff)" >&2
    exit 2
  }
done
[ -f "$build/CMakeCache.txt" ] || {
  echo "$build is not a configured build folder (cmake --preset release first)" >&2
  exit 2
}

echo "==> building libbackplane in $build"
cmake --build "$build" --target backplane >/dev/null
lib="$build/lib/libbackplane.so"

abi="$root/cmake/abi"
header="$root/core/include/backplane/c_api.h"
version="$(abi_header_version "$header")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
abi_describe "$lib" "$work/libbackplane.abi" "$root"

# What the new description must extend: the newest recorded version of this major, or with
# --amend the one before it.
against=""
for v in $(abi_baselines "$abi"); do
  [ "${v%%.*}" = "${version%%.*}" ] || continue
  if [ "$v" = "$version" ]; then
    if [ "$amend" -eq 0 ]; then
      verdict=0
      abi_compare "$abi/$v/libbackplane.abi" "$work/libbackplane.abi" \
        "$(abi_growable_structs "$abi/$v/backplane/c_api.h" | tr '\n' ' ')" \
        "$work/report.txt" || verdict=$?
      if [ "$verdict" -eq 0 ] &&
        diff -q <(abi_declarations "$abi/$v/backplane/c_api.h") \
          <(abi_declarations "$header") >/dev/null; then
        echo "ABI $version is recorded already and unchanged: nothing to do"
        exit 0
      fi
      echo "ABI $version is recorded already (cmake/abi/$version/) and frozen: raise" \
        "BP_ABI_VERSION_MINOR for an addition (and write its docs/abi-changelog.md entry), or" \
        "pass --amend to rewrite $version if no release has shipped it" >&2
      exit 1
    fi
    break
  fi
  against="$v"
done

if [ -n "$against" ]; then
  verdict=0
  abi_compare "$abi/$against/libbackplane.abi" "$work/libbackplane.abi" \
    "$(abi_growable_structs "$abi/$against/backplane/c_api.h" | tr '\n' ' ')" \
    "$work/report.txt" || verdict=$?
  if [ "$verdict" -ge 2 ]; then
    echo "refused: this libbackplane breaks ABI $against; within major ${version%%.*} a change" \
      "may only append (docs/abi.md). What breaks it:" >&2
    grep '^incompatible: ' "$work/report.txt" | sed 's/^incompatible: /    /' >&2
    exit 1
  fi
  echo "==> ABI $version extends ABI $against:"
  grep '^added: ' "$work/report.txt" | sed 's/^added: /    /' || echo "    (no change the library exports)"
fi

mkdir -p "$abi/$version/backplane"
cp "$header" "$abi/$version/backplane/c_api.h"
cp "$work/libbackplane.abi" "$abi/$version/libbackplane.abi"
echo "==> recorded ABI $version in cmake/abi/$version/: commit it with the change (and check"
echo "    docs/abi-changelog.md and BACKPLANE_ABI_VERSION in cmake/BackplanePlugin.cmake)"
