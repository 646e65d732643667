#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The ABI check (ctest abi.baseline; docs/abi.md, "The checked baseline"):
#   check_abi.sh <libbackplane.so> [<work dir>]
# 1. c_api.h declares what the frozen header of its version (cmake/abi/<version>/) declares:
#    comments may change, declarations may not.
# 2. The newest library description (cmake/abi/<version>/libbackplane.abi) is of that version.
# 3. The built library's exported C ABI, as abidw describes it, equals that description: a change
#    that breaks the ABI fails naming the symbol or field, and an addition that was not recorded
#    (a new minor without update_baseline.sh) fails saying so.
# 4. Each recorded description is a compatible extension of the one before it in its major.
# Exits 0 when all hold, 1 when one does not, 77 (skipped) without abigail-tools.
set -euo pipefail

lib="${1:?usage: check_abi.sh <libbackplane.so> [<work dir>]}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="${2:-$(mktemp -d)}"
mkdir -p "$work"
# shellcheck source=abi_common.sh
source "$root/cmake/abi/abi_common.sh"

for tool in abidw abidiff "${CC:-cc}"; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool is missing (abigail-tools provides abidw and abidiff;" \
      "bash cmake/bootstrap.sh installs it)"
    exit 77
  fi
done

abi="$root/cmake/abi"
header="$root/core/include/backplane/c_api.h"
version="$(abi_header_version "$header")"
newest="$(abi_baselines "$abi" | tail -n 1)"
fix="run cmake/abi/update_baseline.sh in the same commit (docs/abi.md, \"The checked baseline\")"
status=0
fail() {
  echo "FAIL: $*"
  status=1
}

# 1. Within a version nothing changes.
frozen="$abi/$version/backplane/c_api.h"
if [ ! -f "$frozen" ]; then
  fail "c_api.h declares ABI $version, but cmake/abi/$version/ holds no frozen header: a new" \
    "minor records its header and library description when it is made: $fix"
elif ! diff -u <(abi_declarations "$frozen") <(abi_declarations "$header") >"$work/header.diff"; then
  fail "c_api.h no longer declares what ABI $version's frozen header" \
    "(cmake/abi/$version/backplane/c_api.h) declares. A frozen version never changes: an addition" \
    "is a new minor (BP_ABI_VERSION_MINOR, an entry in docs/abi-changelog.md, and $fix), and a" \
    "change to what exists is a new major. The declarations that differ (frozen -> now):"
  sed 's/^/    /' "$work/header.diff"
else
  echo "ok: c_api.h declares what ABI $version's frozen header declares"
fi

# 2. The library description of this version exists.
if [ -z "$newest" ]; then
  fail "cmake/abi holds no library description (libbackplane.abi): $fix"
  exit 1
fi
if [ "$newest" != "$version" ]; then
  fail "c_api.h declares ABI $version but the newest library description is ABI $newest's" \
    "(cmake/abi/$newest/libbackplane.abi): $fix"
fi

# 3. The built library against the newest description.
abi_describe "$lib" "$work/libbackplane.abi" "$root"
growable="$(abi_growable_structs "$abi/$newest/backplane/c_api.h" | tr '\n' ' ')"
verdict=0
abi_compare "$abi/$newest/libbackplane.abi" "$work/libbackplane.abi" "$growable" \
  "$work/report.txt" || verdict=$?
case "$verdict" in
  0) echo "ok: $(basename "$lib") exports ABI $newest as recorded (cmake/abi/$newest/libbackplane.abi)" ;;
  1)
    fail "$(basename "$lib") adds to ABI $newest, which is frozen: an addition is a new minor" \
      "(BP_ABI_VERSION_MINOR, an entry in docs/abi-changelog.md, and $fix). Added:"
    grep '^added: ' "$work/report.txt" | sed 's/^added: /    /'
    ;;
  2)
    fail "$(basename "$lib") breaks ABI $newest (cmake/abi/$newest/libbackplane.abi). Within a" \
      "major a change may only append: a function, a field at the end of a growable struct" \
      "($(abi_struct_list "$growable")), an enum value (docs/abi.md, \"What a minor may add\")." \
      "Revert the change," \
      "or make it a new major. What breaks it:"
    grep '^incompatible: ' "$work/report.txt" | sed 's/^incompatible: /    /'
    grep -v '^\(incompatible\|added\): ' "$work/report.txt" | sed 's/^/  /'
    ;;
  *)
    fail "could not compare $(basename "$lib") with cmake/abi/$newest/libbackplane.abi:"
    cat "$work/report.txt"
    ;;
esac

# 4. The recorded descriptions extend one another within a major.
previous=""
for v in $(abi_baselines "$abi"); do
  if [ -n "$previous" ] && [ "${previous%%.*}" = "${v%%.*}" ]; then
    growable="$(abi_growable_structs "$abi/$previous/backplane/c_api.h" | tr '\n' ' ')"
    verdict=0
    abi_compare "$abi/$previous/libbackplane.abi" "$abi/$v/libbackplane.abi" "$growable" \
      "$work/chain-$v.txt" || verdict=$?
    if [ "$verdict" -ge 2 ]; then
      fail "the recorded ABI $v is not a compatible extension of ABI $previous:"
      grep '^incompatible: ' "$work/chain-$v.txt" | sed 's/^incompatible: /    /'
    fi
  fi
  previous="$v"
done

if [ "$status" -eq 0 ]; then
  echo "ok: the ABI is ABI $version as recorded in cmake/abi/$version/"
fi
exit "$status"
