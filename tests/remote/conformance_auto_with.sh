#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The conformance kit against a served cpu device in the obvious form, `backplane-conformance
# remote` with no --with (docs/conformance.md, "Checking a remote device"):
#
#   conformance_auto_with.sh BACKPLANE BACKPLANE_CONFORMANCE WITH_SERVER_SH
#
# 1. it adds the installed cpu plugin, whose code generator the remote Target names (kind 'c'),
#    says so on the console and in the JSON report, and passes a subset of the clauses (a
#    device copy, catalog kernels, construct clauses, a module saved and loaded back);
# 2. with the cpu plugin disabled here (BACKPLANE_DISABLE_PLUGINS, the kit's process only), it
#    exits 2 before running a test, naming the kind, target.build.c, why the plugin is not used
#    and the --with to add;
# 3. the same without code generation tests runs them: nothing is missing for them;
# 4. against a server without --allow-native-modules (code for kind 'c' is native), it skips
#    the code generation tests, saying so and naming that option, and passes the rest.
set -euo pipefail

cli="$1"
kit="$2"
with_server="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() {
  echo "conformance_auto_with.sh: $*" >&2
  for f in "$work"/*.txt; do
    echo "--- $f" >&2
    cat "$f" >&2
  done
  exit 1
}

# One server for the three runs (--allow-native-modules: code for kind 'c' is a native library).
export KIT="$kit" WORK="$work"
bash "$with_server" "$cli" --devices cpu --allow-native-modules -- bash -c '
  set -uo pipefail
  "$KIT" remote -j 2 -t "device.copy.host_to_device" -t "codegen.kernel.vector_add" \
      -t "codegen.kernel.matmul" -t "codegen.construct.add.*" -t "codegen.construct.fma.*" \
      -t "codegen.module.save_load" --json "$WORK/report.json" >"$WORK/run.txt" 2>&1
  echo $? >"$WORK/run.rc"
  BACKPLANE_DISABLE_PLUGINS=cpu "$KIT" remote -t "codegen.kernel.vector_add" \
      >"$WORK/missing.txt" 2>&1
  echo $? >"$WORK/missing.rc"
  BACKPLANE_DISABLE_PLUGINS=cpu "$KIT" remote -t "device.copy.*" >"$WORK/copies.txt" 2>&1
  echo $? >"$WORK/copies.rc"
  exit 0
' || fail "the server did not run the kit"

[ "$(cat "$work/run.rc")" = 0 ] || fail "the kit without --with exited $(cat "$work/run.rc"), not 0"
grep -q "^note: the Target of remote:0 names target kind 'c', whose code is generated here: the tests also load plugin 'cpu' (.*libbackplane_cpu.so), as --with .*libbackplane_cpu.so would" \
  "$work/run.txt" || fail "the kit did not say it added the cpu plugin"
grep -q "PASS  codegen.kernel.vector_add " "$work/run.txt" || fail "codegen.kernel.vector_add did not pass"
grep -q "PASS  codegen.module.save_load " "$work/run.txt" || fail "codegen.module.save_load did not pass"
if grep -q "SKIP\|FAIL" "$work/run.txt"; then fail "a selected test skipped or failed"; fi
grep -q "names target kind 'c', whose code is generated here: the tests also load plugin 'cpu'" \
  "$work/report.json" || fail "the JSON report's notes do not name the added cpu plugin"

[ "$(cat "$work/missing.rc")" = 2 ] ||
  fail "with the cpu plugin disabled the kit exited $(cat "$work/missing.rc"), not 2 (usage)"
for want in "names target kind 'c'" "no plugin found here provides target.kind.c and target.build.c" \
  "plugin 'cpu' (.*cpu.bpplugin.json) provides it but is skipped: disabled by BACKPLANE_DISABLE_PLUGINS" \
  "add --with PLUGIN" "-x 'codegen.\*'"; do
  grep -q -- "$want" "$work/missing.txt" || fail "the refusal does not say: $want"
done
if grep -q "PASS\|FAIL" "$work/missing.txt"; then fail "the refused run ran tests"; fi

[ "$(cat "$work/copies.rc")" = 0 ] ||
  fail "device.copy.* with the cpu plugin disabled exited $(cat "$work/copies.rc"), not 0"
grep -q "^PASSED, NO VERDICT: --test chose" "$work/copies.txt" ||
  fail "device.copy.* did not report its pass as a subset's (no verdict)"
grep -q "^note: .*no plugin found here provides it; no code generation test is selected" \
  "$work/copies.txt" || fail "device.copy.* did not note the kind it went without"
# 4. A server that loads no native code.
bash "$with_server" "$cli" --devices cpu -- bash -c '
  "$KIT" remote -j 2 -t "device.copy.host_to_device" -t "codegen.kernel.vector_add" \
      -t "codegen.construct.add.*" >"$WORK/native.txt" 2>&1
  echo $? >"$WORK/native.rc"
  exit 0
' || fail "the second server did not run the kit"
[ "$(cat "$work/native.rc")" = 0 ] ||
  fail "against a server without native code the kit exited $(cat "$work/native.rc"), not 0"
grep -q "^note: code for target kind 'c' is native code .*server_native_modules is 0.*--allow-native-modules" \
  "$work/native.txt" || fail "the kit did not say why the code generation tests do not run"
grep -q "SKIP  codegen.kernel.vector_add" "$work/native.txt" || fail "codegen.kernel.vector_add was not skipped"
grep -q "PASS  device.copy.host_to_device" "$work/native.txt" || fail "device.copy.host_to_device did not pass"
if grep -q "FAIL" "$work/native.txt"; then fail "a test failed against the server without native code"; fi

echo "conformance_auto_with.sh: the kit added the cpu plugin by itself, and named --with when it could not"
