#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The compile error every plugin author used to meet: MakeModule<T> needs
# `static constexpr const char* kKind` in T. module_kind_probe.cc is compiled twice
# (-fsyntax-only, as a plugin is: BACKPLANE_PLUGIN=1, the SDK and core headers only):
#   - with its kKind, it compiles (the probe itself is sound);
#   - without, the compile fails and the first error is MakeModule's static_assert, which
#     names kKind and shows the line to add; no other error follows it.
#
# usage: module_kind_test.sh   with CXX and SOURCE_DIR set (tests/plugins/CMakeLists.txt)
set -euo pipefail

probe="$SOURCE_DIR/tests/sdk/kit/module_kind_probe.cc"
flags=(-std=c++17 -fsyntax-only -DBACKPLANE_PLUGIN=1 -I"$SOURCE_DIR/core/include"
  -I"$SOURCE_DIR/sdk/kit/include" -fdiagnostics-color=never)

fail() {
  echo "module_kind_test: FAILED: $*" >&2
  exit 1
}

echo "==> $CXX ${flags[*]} -DPROBE_WITH_KIND $probe"
"$CXX" "${flags[@]}" -DPROBE_WITH_KIND "$probe" || fail "the probe with its kKind does not compile"

echo "==> $CXX ${flags[*]} $probe (must fail)"
if log="$("$CXX" "${flags[@]}" "$probe" 2>&1)"; then
  fail "a module class without kKind compiled; MakeModule must refuse it"
fi
echo "$log"
errors="$(grep -E "error:" <<<"$log" || true)"
# gcc says `static assertion failed: MESSAGE`, clang `static_assert failed due to ... "MESSAGE"`
# (with its quotes escaped).
grep -E "static.assert(ion)? failed.*backplane::sdk::MakeModule<T>: the module class T has no kind" \
  <<<"$errors" >/dev/null || fail "the first error is not MakeModule's static_assert naming the missing kind"
grep -qE 'Add `static constexpr const char\* kKind = \\?"yourkind\\?";` to it' <<<"$errors" ||
  fail "the static_assert does not show the line to add"
[ "$(wc -l <<<"$errors")" -eq 1 ] ||
  fail "the compiler reported more errors than the static_assert; MakeModule must not use T::kKind where it is missing"
echo "module_kind_test: ok"
