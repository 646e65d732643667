#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# An old SDK-built code generator on today's host (docs/abi.md, "Old code generators"; the
# ctest compat.old_codegen, tests/compat/CMakeLists.txt):
#
#   1. extract the simaccel example plugin as commit d35e781 had it -- its sources, the SDK
#      headers (sdk/include, core/include with c_api.h of ABI 1.6), its IR library (core/ir,
#      which reads IR text version 1 only), the launch kit and backplane_add_plugin() -- with
#      `git archive` from this clone, and check that its c_api.h is the frozen
#      cmake/abi/1.6/backplane/c_api.h;
#   2. build it with tests/compat/old_codegen/CMakeLists.txt into a folder of its own (the
#      plugin and its manifest, ABI 1.6), through the compiler launcher of this build (ccache);
#   3. on today's host, from this build: `backplane info` loads it from that folder (today's
#      simaccel is never in the build's plugin folder, and BACKPLANE_PLUGIN_PATH is unset);
#      the conformance kit ends CONFORMANT, its clauses whose kernels need a newer IR text
#      version skipped with the host's refusal as the reason, and old_codegen.xfail lists
#      what that simaccel and its IR interpreter do otherwise than today's contract
#      (--verify-xfails: one that passes fails the run); old_codegen_catalog runs every GPU
#      function of the kernel catalog on simaccel:0 against the float64 reference: each
#      passes, is refused by the message contract, or fails as a known defect says.
#
# When this clone has no commit d35e781 (a source archive, a shallow clone) the test is skipped
# (exit 77) with what to do; CI clones the whole history.
#
# usage: old_codegen_test.sh   with these variables set (CMakeLists.txt passes them):
#   SOURCE_DIR SCRATCH CMAKE GENERATOR MAKE_PROGRAM CXX LAUNCHER (may be empty) GIT (may be
#   empty: not found) CLI KIT CATALOG (the programs: backplane, backplane-conformance,
#   old_codegen_catalog) MUST_PASS (catalog functions, space-separated) KNOWN_DEFECTS
#   (FUNC=TEXT entries, '|'-separated) SKIP_REASON (when not empty: print it, exit 77)
set -euo pipefail

commit=d35e781
name=compat.old_codegen
if [ -n "${SKIP_REASON:-}" ]; then
  echo "$name skipped: $SKIP_REASON"
  exit 77
fi
fail() {
  echo "$name: FAILED: $*" >&2
  exit 1
}
skip() {
  echo "$name skipped: $*"
  exit 77
}
# run LOG COMMAND...: runs the command, its output in $SCRATCH/LOG.log, shown; fails with it.
run() {
  local log="$SCRATCH/$1.log"
  shift
  echo "==> $*"
  if ! "$@" >"$log" 2>&1; then
    cat "$log"
    fail "'$*' exited with an error (output above, and in $log)"
  fi
  cat "$log"
}

# --- 1. the sources of d35e781 ---
[ -n "${GIT:-}" ] || skip "git is not installed; install it (apt-get install git) and run the \
test in a clone that has commit $commit"
if ! "$GIT" -C "$SOURCE_DIR" rev-parse --git-dir >/dev/null 2>&1; then
  skip "$SOURCE_DIR is not a git clone, so the sources of commit $commit (simaccel with the SDK \
and IR library of ABI 1.6) cannot be had; run the test in a clone of the repository with its \
history (git clone, not a source archive)"
fi
if ! "$GIT" -C "$SOURCE_DIR" cat-file -e "$commit^{commit}" 2>/dev/null; then
  skip "this clone lacks commit $commit (a shallow clone?), whose simaccel, SDK and IR library \
the test builds; fetch the history (git -C $SOURCE_DIR fetch --unshallow) and run it again"
fi
mkdir -p "$SCRATCH"
src="$SCRATCH/src-$commit"
paths=(sdk/examples/simaccel sdk/include sdk/launch core/include core/ir cmake/BackplanePlugin.cmake)
# Extracted once: the files keep their times, so a second run rebuilds nothing.
if [ ! -f "$src/.extracted" ]; then
  rm -rf "$src"
  mkdir -p "$src"
  "$GIT" -C "$SOURCE_DIR" archive "$commit" "${paths[@]}" | tar -x -C "$src" ||
    fail "git archive $commit ${paths[*]} failed"
  touch "$src/.extracted"
fi
cmp "$src/core/include/backplane/c_api.h" "$SOURCE_DIR/cmake/abi/1.6/backplane/c_api.h" ||
  fail "the c_api.h of commit $commit differs from the frozen cmake/abi/1.6/backplane/c_api.h; \
the frozen header of ABI 1.6 must be the one that commit shipped"
grep -q "^#define BP_ABI_VERSION_MINOR 6$" "$src/core/include/backplane/c_api.h" ||
  fail "the c_api.h of commit $commit is not ABI 1.6"

# --- 2. the old plugin, in a folder of its own ---
build="$SCRATCH/build"
plugins="$SCRATCH/plugins"
run configure "$CMAKE" -S "$SOURCE_DIR/tests/compat/old_codegen" -B "$build" -G "$GENERATOR" \
  -DCMAKE_MAKE_PROGRAM="$MAKE_PROGRAM" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_CXX_COMPILER_LAUNCHER="${LAUNCHER:-}" -DOLD_SOURCE_DIR="$src" -DPLUGIN_DIR="$plugins"
run build "$CMAKE" --build "$build" -j 2
library="$plugins/libbackplane_simaccel.so"
[ -f "$library" ] || fail "the build made no $library"
grep -q '"abi_version": "1.6"' "$plugins/simaccel.bpplugin.json" ||
  fail "the old plugin's manifest $plugins/simaccel.bpplugin.json does not say ABI 1.6"

# --- 3. today's host ---
# Only the old plugin's folder and the build's own plugin folder: no simaccel of today's.
unset BACKPLANE_PLUGIN_PATH BACKPLANE_DISABLE_PLUGINS BACKPLANE_KERNEL_DIR SIMACCEL_DEVICES
run info "$CLI" info --plugin-path "$plugins"
grep -qE "^ +simaccel +loaded +1\.6 +0\.1\.0 +$library\$" "$SCRATCH/info.log" ||
  fail "backplane info does not show simaccel (ABI 1.6) loaded from $library"
[ "$(grep -cE '^ +simaccel ' "$SCRATCH/info.log")" = 1 ] ||
  fail "backplane info lists more than one simaccel plugin; only the old one may be found"
# It declares no IR versions (it predates BP_FUNCTION_READS_IR): version 1 only.
grep -A1 -E '^ +target\.build\.simaccel ' "$SCRATCH/info.log" |
  grep -q 'code generator: reads IR text versions 1 to 1' ||
  fail "backplane info does not say that target.build.simaccel reads IR text version 1 only"

echo "==> $KIT $library --xfail old_codegen.xfail --verify-xfails"
if ! "$KIT" "$library" --xfail "$SOURCE_DIR/tests/compat/old_codegen.xfail" --verify-xfails \
  --json "$SCRATCH/conformance.json" --junit "$SCRATCH/conformance.xml" >"$SCRATCH/kit.log" 2>&1; then
  cat "$SCRATCH/kit.log"
  fail "the conformance kit did not end CONFORMANT on the old simaccel (above; every clause \
refused for its IR text version must be skipped, docs/conformance.md)"
fi
cat "$SCRATCH/kit.log"
# The clauses that need what no lowering brings to version 1 (C's %, atomics) are skipped
# with the refusal, which names the version they need.
for clause in codegen.construct.mod.int32:3 codegen.construct.atomic.add.int32:2; do
  test="${clause%:*}"
  version="${clause##*:}"
  grep -A1 -E "\] SKIP +$test\$" "$SCRATCH/kit.log" |
    grep -q "which needs IR text version $version; the code generator target.build.simaccel" ||
    fail "the kit did not skip $test with the refusal \"... which needs IR text version \
$version; the code generator target.build.simaccel ...\""
done
refusals=$(grep -c "which needs IR text version" "$SCRATCH/kit.log" || true)
echo "$name: the kit skipped $refusals clauses for their IR text version"

defects=()
if [ -n "${KNOWN_DEFECTS:-}" ]; then
  IFS='|' read -r -a entries <<<"$KNOWN_DEFECTS"
  for e in "${entries[@]}"; do defects+=(--known-defect "$e"); done
fi
must=()
for f in $MUST_PASS; do must+=(--must-pass "$f"); done
run catalog "$CATALOG" --plugin "$library" --device simaccel:0 "${must[@]}" "${defects[@]}"
echo "$name: ok"
