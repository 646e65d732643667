#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the conformance kit and shows what its tests' processes printed of a layer's findings:
#
#   kit_findings.sh PATTERN JSON KIT [ARGS ...]
#
# runs `KIT ARGS --json JSON`, then prints every line of the JSON report that holds PATTERN
# (a finding a test's process wrote to stderr, at a call or at its exit, is kept in that
# test's "output" there, passed or not, and not on the kit's console), so that ctest's
# FAIL_REGULAR_EXPRESSION sees it. Exits with the kit's status.
set -uo pipefail

pattern="$1"
json="$2"
shift 2
rm -f "$json"
"$@" --json "$json"
status=$?
if [ -f "$json" ] && grep -q -- "$pattern" "$json"; then
  echo "kit_findings.sh: the tests' processes printed $pattern findings:"
  grep -o -- "$pattern[^\"]*" "$json" | head -50
fi
exit $status
