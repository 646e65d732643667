#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The installed conformance kit checks the example plugin the way a third party checks
# theirs: sdk/apps/examples/simaccel, built out of tree against the moved install and installed
# into a prefix of its own by the test install.simaccel (tests/install/, the fixture this
# test needs), found by name on --plugin-path. Every test that applies must pass, on
# simaccel:0 and, with two simulated devices, on simaccel:1; the JSON and JUnit reports are
# written beside the install's scratch files.
#
# usage: simaccel_test.sh   with SCRATCH (tests/install's scratch folder) and SKIP_REASON set
set -euo pipefail

if [ -n "${SKIP_REASON:-}" ]; then
  echo "conformance.simaccel skipped: $SKIP_REASON"
  exit 77
fi
prefix="$SCRATCH/prefix"
kit="$prefix/bin/backplane-conformance"
plugins="$SCRATCH/simaccel-prefix/lib/backplane/plugins"
unset BACKPLANE_PLUGIN_PATH BACKPLANE_KERNEL_DIR
[ -x "$kit" ] || { echo "conformance.simaccel: FAILED: the install lacks $kit" >&2; exit 1; }
[ -f "$plugins/simaccel.bpplugin.json" ] ||
  { echo "conformance.simaccel: FAILED: no installed simaccel in $plugins (install.simaccel)" >&2; exit 1; }

echo "==> $kit simaccel --plugin-path $plugins"
"$kit" simaccel --plugin-path "$plugins" --json "$SCRATCH/conformance-simaccel.json" \
  --junit "$SCRATCH/conformance-simaccel.xml"
echo "==> SIMACCEL_DEVICES=2 $kit simaccel --device simaccel:1 (device tests)"
SIMACCEL_DEVICES=2 "$kit" simaccel --plugin-path "$plugins" --device simaccel:1 \
  --test 'device.*' --test 'codegen.kernel.*_gpu' --json "$SCRATCH/conformance-simaccel-1.json"
grep -q '"ok": true' "$SCRATCH/conformance-simaccel.json" ||
  { echo "conformance.simaccel: FAILED: the JSON report does not say ok" >&2; exit 1; }
echo "conformance.simaccel: ok"
