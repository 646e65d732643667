#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The test fuzz.<name> (tests/fuzz/CMakeLists.txt): a fixed set of inputs, the same every run.
#
# usage: run_generated.sh WORK SEEDS INPUTS SEED DICT REPLAY [FUZZER]
#
# REPLAY (<name>_replay) makes INPUTS inputs from the seed folder SEEDS with the seed SEED and
# the dictionary DICT ("none" for none), writes each to WORK/corpus before it runs it (a crash leaves
# the reproducer there: `REPLAY WORK/corpus/gen-NNNNNN` runs it again) and lists them in
# WORK/inputs.txt. Then FUZZER (<name>_fuzz, clang's sanitizers), when given, runs the same files
# and the seeds once each: -runs=0 executes the corpus folders and mutates nothing. Its first
# folder, WORK/scratch, only receives what libFuzzer would keep; nothing reads it.
set -eu
[ $# -ge 6 ] || { echo "usage: $0 WORK SEEDS INPUTS SEED DICT REPLAY [FUZZER]" >&2; exit 2; }
work=$1 seeds=$2 inputs=$3 seed=$4 dict=$5 replay=$6
shift 6
[ "$dict" != none ] || dict=""
rm -rf "$work/corpus" "$work/scratch" "$work/inputs.txt"
mkdir -p "$work/corpus" "$work/scratch" "$work/artifacts"
"$replay" --generate="$inputs" --seed="$seed" ${dict:+"--dict=$dict"} --max-len=4096 \
  --write="$work/corpus" --list="$work/inputs.txt" "$seeds"
[ $# -gt 0 ] || exit 0
# An input counts as a hang after 60 s: the largest seeds (a 10,000-term chain: parse, print,
# verify, split and compile, twice for the leak check) take about 10 s of CPU in this
# instrumented build, and a loaded CI machine must not turn that into a finding.
"$1" -runs=0 -timeout=60 -rss_limit_mb=4096 -artifact_prefix="$work/artifacts/" \
  -print_final_stats=1 "$work/scratch" "$work/corpus" "$seeds"
