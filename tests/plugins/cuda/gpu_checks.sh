#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The CUDA checks that need a GPU, run from the GPU bundle (tests/plugins/cuda/
# make_gpu_bundle.sh builds it on a machine with the Debian packages); nothing is built here.
# docs/cuda.md, "Running the GPU checks".
#
#   bash tests/plugins/cuda/gpu_checks.sh [--pack] [--budget SECONDS] [BUNDLE_DIR]
#   bash <bundle>/gpu_checks.sh [--pack] ...          (the bundle's own copy)
# BUNDLE_DIR defaults to the folder this script is in when that is a bundle, else gpu-bundle/
# at the repository root. Results go to $OUT (default: ./gpu-results): <step>.log for each
# step, the tests' XML, the reports of the conformance kit and bench_cuda.json, and
# summary.txt, the table printed last. --pack leaves only summary.txt, bench_cuda.json and
# gpu-checks.tar.gz (everything) in $OUT, for the device tool, which brings back at most 8
# files.
#
# Steps, in order (each with a time limit; the whole run keeps within --budget, default
# 540 s, so that it ends inside the device tool's 10 minutes; a step left without time is
# TIMEOUT):
#   bundle       the bundle where plugin discovery trusts it (modes fixed; a copy under /tmp
#                when a folder above it may be written by others or a file is another user's)
#   glibc        the machine's glibc against the newest version the bundle needs
#                (GLIBC_NEEDED); where only the bundle's C++ runtime (libstdc++, libgcc_s)
#                needs more, the machine's own is used instead when it has every version
#                the bundle needs of it; else: stop
#   nvidia_smi   nvidia-smi and the GPUs; no nvidia-smi, a failing one or no GPU: stop
#   toolkit      the machine's CUDA Toolkit: NVRTC (BACKPLANE_NVRTC_LIBRARY), cuBLAS
#                (BACKPLANE_CUBLAS_LIBRARY), ptxas (BACKPLANE_CUDA_PTXAS), compute-sanitizer;
#                the same major as the bundle was built with first
#   info         `backplane info`: the cuda plugin loaded and cuda:0 listed
#   tests_<bin>  every test of every bin/cuda_* program, each in a process of its own (as
#                ctest runs them): cuda_gpu_test runs every catalog kernel on cuda:0
#                against its float64 reference (also after save and load), copies, streams,
#                workspaces, attributes and the run-time checks; none may skip here;
#                cuda_ir_features_test runs the IR's constructs (loop steps, var, negation,
#                atomics) on cuda:0 against the interpreter; its cuda tests may not skip
#   conformance_cuda, conformance_cuda_host
#                the conformance kit on cuda:0 and on cuda_host:0
#   remote_cuda  `backplane serve --devices cuda` on loopback and the conformance kit on its
#                cuda:0 through the remote plugin (remote:0); remote_isolation_check: no
#                session reads another's freed or killed buffers (1 byte to 64 MiB)
#   cross_build  a module built for the GPU's arch in a process that sees no driver, then
#                run on cuda:0 with `backplane run --check` (against the IR interpreter)
#   demo         `backplane demo --size small -k <each GPU kernel>`: every GPU kernel of the
#                catalog on cuda:0 against its float64 reference, through the CLI
#   demo_validation
#                the same under the validation layer (BACKPLANE_LAYERS=validation,
#                docs/layers/validation.md): every kernel passes and no BP-VALID- finding
#   vulkan_info, conformance_vulkan, demo_vulkan, ir_features_vulkan
#                where the bundle has the vulkan plugin: the GPU's own Vulkan driver (NVIDIA's
#                ICD manifest, VK_DRIVER_FILES) through the bundle's Vulkan loader: vulkan:0
#                listed, the conformance kit on it, every catalog kernel on it against its
#                float64 reference, the IR's constructs (loop steps, var, negation, atomics)
#                against the interpreter; skipped with a note where the machine has no NVIDIA ICD
#   bench        bench_cuda: launch vs raw cuLaunchKernel, pinned copies vs raw, vector_add
#                (the catalog's variant for cuda:0, vector_add4_gpu, and the base
#                vector_add_gpu) vs a device copy, sum (the variant for cuda:0, sum4_gpu, and
#                the base sum_gpu; grid-wide) vs the device
#                copy's bandwidth, matmul (the variant for cuda:0,
#                matmul_reg_gpu, the named variants matmul_reg16_gpu and matmul_smem_gpu
#                and the base matmul_tiled_gpu) vs cuBLAS; each ratio's
#                line names the function that ran; no benchmark may report an error;
#                the ratios go to summary.txt
#   launch_phases
#                bench_cuda's launch pair again with BACKPLANE_CUDA_LAUNCH_PHASES=1: where
#                the time of a Backplane launch goes, phase by phase, beside the raw call
#                (launch_phases.txt, bench_launch_phases.json; the table also in summary.txt)
#   sanitizer_memcheck, sanitizer_racecheck, sanitizer_synccheck
#                compute-sanitizer over the catalog's GPU kernels (the demo at small
#                sizes); skipped with a note where compute-sanitizer is missing or refuses
#                the device
# Exit status: 0 when every step passed or was skipped with a note, 1 when one failed or
# had no time left, 2 when the run stopped before the GPU steps (no bundle, glibc too old,
# no NVIDIA driver or GPU).
# BACKPLANE_GPU_CHECKS_GLIBC=x.y pretends the machine's glibc is x.y (for the test of this
# script, tests/install/gpu_bundle_test.sh).
set -euo pipefail

usage() {
  echo "usage: gpu_checks.sh [--pack] [--budget SECONDS] [BUNDLE_DIR]" >&2
  exit 2
}
pack=0
budget=540
bundle=""
while [ $# -gt 0 ]; do
  case "$1" in
    --pack)
      pack=1
      shift
      ;;
    --budget)
      [ $# -ge 2 ] || usage
      budget="$2"
      shift 2
      ;;
    -h | --help) usage ;;
    -*) usage ;;
    *)
      [ -z "$bundle" ] || usage
      bundle="$1"
      shift
      ;;
  esac
done

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -z "$bundle" ]; then
  if [ -f "$here/GLIBC_NEEDED" ]; then bundle="$here"; else bundle="$here/../../../gpu-bundle"; fi
fi
if [ ! -f "$bundle/GLIBC_NEEDED" ] || [ ! -x "$bundle/bin/backplane" ]; then
  echo "gpu_checks.sh: no GPU bundle at $bundle (no GLIBC_NEEDED or bin/backplane): build one" \
    "on a machine with the Debian packages with: bash tests/plugins/cuda/make_gpu_bundle.sh" >&2
  exit 2
fi
bundle="$(cd "$bundle" && pwd)"
bin="$bundle/bin"
out="${OUT:-$PWD/gpu-results}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
# Nothing of an earlier run in $OUT may pass for this one's.
rm -f "$out/bench_cuda.json" "$out/bench_summary.txt" "$out/gpu-checks.tar.gz" \
  "$out/launch_phases.txt" "$out/bench_launch_phases.json"
start_all=$SECONDS
deadline=$((SECONDS + budget))
scratch="$(mktemp -d "${TMPDIR:-/tmp}/gpu-checks.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
# The cuda tests' scratch files (tests/plugins/run_time_paths.h), outside the bundle.
export BACKPLANE_TEST_SCRATCH_DIR="$scratch/tests"
# Only the bundle's plugins and kernels.
unset BACKPLANE_PLUGIN_PATH BACKPLANE_PLUGIN_FILES BACKPLANE_KERNEL_DIR BACKPLANE_DISABLE_PLUGINS
# The vulkan plugin (where the bundle has it) only in the vulkan steps: the cuda steps see
# cpu and cuda alone, as in a build without Vulkan.
export BACKPLANE_DISABLE_PLUGINS=vulkan
# --- steps and the table ---
names=()
results=()
times=()
failed=0
cur="" cur_log="" cur_result="" cur_start=0 cur_deadline=0

say() { echo "$*" | tee -a "$out/summary.txt"; }
: >"$out/summary.txt"

# step_begin NAME LIMIT: a step of at most LIMIT seconds (less if the budget has less left).
step_begin() {
  cur="$1"
  cur_log="$out/$1.log"
  cur_result=ok
  cur_start=$SECONDS
  cur_deadline=$((SECONDS + $2))
  [ "$cur_deadline" -le "$deadline" ] || cur_deadline=$deadline
  : >"$cur_log"
  echo "== $cur"
}
# note TEXT: a line in the step's log and on the screen.
note() { echo "   $*" | tee -a "$cur_log"; }
# step_fail TEXT: the step failed, and why.
step_fail() {
  [ "$cur_result" = TIMEOUT ] || cur_result=FAILED
  note "FAILED: $*"
}
step_skip() {
  cur_result="skipped"
  note "skipped: $*"
}
step_end() {
  names+=("$cur")
  results+=("$cur_result")
  times+=("$((SECONDS - cur_start))")
  case "$cur_result" in
    ok | skipped) ;;
    *) failed=1 ;;
  esac
  echo "   $cur_result ($((SECONDS - cur_start)) s; $cur_log)"
}
# run CMD...: runs CMD, its output appended to the step's log, killed at the step's time limit.
# Returns CMD's status (124 when it was killed), and marks the step failed if it was not 0.
run() {
  local left=$((cur_deadline - SECONDS)) status=0
  if [ "$left" -le 0 ]; then
    cur_result=TIMEOUT
    note "no time left for: $*"
    return 124
  fi
  echo "\$ $*" >>"$cur_log"
  timeout -k 10 "$left" "$@" >>"$cur_log" 2>&1 || status=$?
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    cur_result=TIMEOUT
    note "killed after its time limit: $*"
  elif [ "$status" -ne 0 ]; then
    step_fail "exit status $status: $*"
  fi
  return "$status"
}
# expect REGEX WHAT: the step's log has a line matching REGEX, else the step failed with WHAT.
expect() {
  grep -qE -- "$1" "$cur_log" || step_fail "$2 (no line matching '$1' in $cur_log)"
}
table() {
  say ""
  say "$(printf '%-28s %-9s %6s' STEP RESULT TIME)"
  local i
  for i in "${!names[@]}"; do
    say "$(printf '%-28s %-9s %5ss' "${names[$i]}" "${results[$i]}" "${times[$i]}")"
  done
  say "total $((SECONDS - start_all)) s; results in $out"
}
finish() {  # finish STATUS
  table
  if [ "$pack" -eq 1 ]; then
    tar -C "$out" -czf "$scratch/gpu-checks.tar.gz" --exclude=./gpu-checks.tar.gz .
    find "$out" -mindepth 1 -maxdepth 1 ! -name summary.txt ! -name bench_cuda.json \
      -exec rm -rf {} +
    mv "$scratch/gpu-checks.tar.gz" "$out/gpu-checks.tar.gz"
    echo "packed: $out/gpu-checks.tar.gz, $out/summary.txt"
  fi
  exit "$1"
}
# stop MESSAGE: the run cannot go on here.
stop() {
  cur_result=STOPPED
  note "$*"
  step_end
  say ""
  say "gpu_checks.sh stopped: $*"
  finish 2
}

say "gpu_checks.sh: bundle $bundle"
grep -vE '^needs_of_' "$bundle/BUNDLE_INFO" 2>/dev/null | sed 's/^/  /' | tee -a "$out/summary.txt" || true

# --- the bundle where plugin discovery trusts it ---
# Discovery loads only what is owned by root or this user and writable by neither group nor
# others, and lies in folders that are so up to / (docs/discovery.md). A copied bundle may
# have lost its modes (fixed here) or lie below a folder others may write, or be owned by
# another user (then a copy of it in a fresh folder under /tmp is run instead).
step_begin bundle 120
chmod -R go-w "$bundle" 2>/dev/null || true
me="$(id -u)"
why=""
foreign="$(find "$bundle" ! -uid 0 ! -uid "$me" -print -quit 2>/dev/null || true)"
[ -z "$foreign" ] || why="$foreign is owned by another user"
d="$(cd "$bundle/lib/backplane/plugins" && pwd -P)"
while [ -z "$why" ]; do
  read -r uid mode <<<"$(stat -c '%u %a' "$d")"
  perm=$((8#$mode))
  if [ "$uid" -ne 0 ] && [ "$uid" -ne "$me" ]; then
    why="$d is owned by user $uid"
  elif [ $((perm & 8#022)) -ne 0 ] && ! { [ "$uid" -eq 0 ] && [ $((perm & 8#1000)) -ne 0 ]; }; then
    why="$d has mode $mode (group or others may write it)"
  fi
  [ "$d" != / ] || break
  d="$(dirname "$d")"
done
if [ -n "$why" ]; then
  note "plugin discovery would refuse the bundle's plugins here: $why; running a copy in $scratch/bundle"
  cp -r "$bundle" "$scratch/bundle"
  chmod -R go-w "$scratch/bundle"
  bundle="$scratch/bundle"
  bin="$bundle/bin"
fi
note "bundle: $bundle"
step_end

# --- glibc ---
step_begin glibc 30
info_value() { sed -n "s/^$1=//p" "$bundle/BUNDLE_INFO" 2>/dev/null; }
needed="$(cat "$bundle/GLIBC_NEEDED")"
needed_own="$(info_value glibc_needed_without_cxx_runtime)"
machine="${BACKPLANE_GPU_CHECKS_GLIBC:-}"
if [ -z "$machine" ]; then
  machine="$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc //p')"
  [ -n "$machine" ] || machine="$(ldd --version 2>/dev/null | sed -n 1p | grep -oE '[0-9]+\.[0-9]+$' || true)"
fi
[ -n "$machine" ] || stop "cannot tell this machine's glibc version (getconf GNU_LIBC_VERSION and ldd --version say nothing); the bundle needs glibc $needed"
# version_ge A B: A >= B
version_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | sed -n 1p)" = "$2" ]; }
note "this machine: glibc $machine; the bundle needs $needed ($needed_own without its C++ runtime)"
if ! version_ge "$machine" "$needed"; then
  if [ -z "$needed_own" ] || ! version_ge "$machine" "$needed_own"; then
    stop "this machine's glibc $machine is older than the $needed the bundle needs (GLIBC_NEEDED;" \
      "built on: $(info_value machine)). Build the bundle on a system with glibc <= $machine" \
      "(make_gpu_bundle.sh prints what it needs), or run on a newer system"
  fi
  # Only libstdc++ and libgcc_s of the bundle need more: use the machine's, preloaded so that
  # the bundle's copies (same sonames) are never opened, if they have every symbol version
  # the rest of the bundle needs of them.
  ldconfig_bin="$(command -v ldconfig || echo /sbin/ldconfig)"
  missing=""
  preload=""
  for lib in libstdc++.so.6 libgcc_s.so.1; do
    # (awk reads to the end: an early exit would be a SIGPIPE to ldconfig, fatal under pipefail)
    path="$("$ldconfig_bin" -p 2>/dev/null |
      awk -v l="$lib" '$1 == l && /x86-64/ && found == "" {found = $NF} END {print found}')"
    if [ -z "$path" ]; then
      missing="$missing $lib (not on this machine)"
      continue
    fi
    preload="$preload${preload:+:}$path"
    have="$(grep -aoE '(GLIBCXX|CXXABI|GCC)_[0-9][0-9.]*' "$path" | sort -u)"
    # BUNDLE_INFO's needs_of_libstdcxx and needs_of_libgcc_s
    key="needs_of_${lib%%.so*}"
    key="${key//+/x}"
    for v in $(info_value "$key"); do
      grep -qxF "$v" <<<"$have" || missing="$missing $lib:$v"
    done
  done
  if [ -n "$missing" ]; then
    stop "this machine's glibc $machine is older than the $needed the bundle's C++ runtime needs," \
      "and its own C++ runtime lacks what the bundle needs:$missing. Build the bundle on a" \
      "system with glibc <= $machine"
  fi
  export LD_PRELOAD="$preload${LD_PRELOAD:+:$LD_PRELOAD}"
  note "the bundle's libstdc++/libgcc_s need glibc $needed; this run uses this machine's own" \
    "C++ runtime instead (LD_PRELOAD=$preload), which has every version the bundle needs"
fi
step_end

# --- nvidia-smi ---
step_begin nvidia_smi 60
command -v nvidia-smi >/dev/null 2>&1 ||
  stop "nvidia-smi not found: this machine has no NVIDIA driver; gpu_checks.sh needs a GPU machine"
run nvidia-smi ||
  stop "nvidia-smi failed (see $cur_log): the NVIDIA driver does not work here; gpu_checks.sh needs a GPU machine with a working driver"
gpu_list="$(nvidia-smi -L 2>>"$cur_log" || true)"
echo "$gpu_list" >>"$cur_log"
grep -q '^GPU 0' <<<"$gpu_list" || stop "nvidia-smi lists no GPU: gpu_checks.sh needs a GPU machine"
# gpu_query FIELD: GPU 0's FIELD (empty where this nvidia-smi does not know it).
gpu_query() {
  nvidia-smi -i 0 --query-gpu="$1" --format=csv,noheader 2>/dev/null | sed -n 1p | sed 's/^ *//; s/ *$//'
}
device_name="$(gpu_query name)"
compute_cap="$(gpu_query compute_cap)"
driver_version="$(gpu_query driver_version)"
driver_cuda="$(grep -oE 'CUDA Version: [0-9.]+' "$cur_log" | grep -oE '[0-9.]+$' || true)"
say "GPU 0: $device_name, compute capability $compute_cap, driver $driver_version (CUDA $driver_cuda)"
step_end

# --- the machine's CUDA Toolkit ---
step_begin toolkit 60
built_major="$(info_value cuda_toolkit | cut -d. -f1)"
roots=()
for r in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda /usr/local/cuda-*; do
  [ -n "$r" ] && [ -d "$r" ] && roots+=("$r")
done
if command -v nvcc >/dev/null 2>&1; then roots+=("$(dirname "$(dirname "$(command -v nvcc)")")"); fi
# The wheels PyTorch brings (nvidia-cuda-nvrtc, nvidia-cublas): site-packages/nvidia/*.
if command -v python3 >/dev/null 2>&1; then
  while read -r r; do [ -n "$r" ] && [ -d "$r" ] && roots+=("$r"); done < <(
    python3 -c 'import nvidia, os; [print(os.path.join(p, d)) for p in nvidia.__path__ for d in sorted(os.listdir(p))]' 2>/dev/null || true)
fi
lib_dirs=()
for r in "${roots[@]}"; do
  for d in "$r/lib64" "$r/lib" "$r/targets/x86_64-linux/lib"; do
    [ -d "$d" ] || continue
    d="$(cd "$d" && pwd -P)"
    case " ${lib_dirs[*]} " in *" $d "*) ;; *) lib_dirs+=("$d") ;; esac
  done
done
# prepend_library_path DIR: DIR first on the loader's path (once).
prepend_library_path() {
  case ":${LD_LIBRARY_PATH:-}:" in
    *":$1:"*) ;;
    *) export LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
  esac
}
note "looked in: ${lib_dirs[*]:-(no CUDA Toolkit folder)}"
# find_lib NAME: NAME.so.<the bundle's major> in the folders above, else the NAME.so.<N> of
# the highest N.
find_lib() {
  local d f
  for d in "${lib_dirs[@]}"; do
    if [ -e "$d/$1.so.$built_major" ]; then
      echo "$d/$1.so.$built_major"
      return 0
    fi
  done
  for d in "${lib_dirs[@]}"; do
    for f in "$d/$1".so.[0-9]*; do
      [ -e "$f" ] && printf '%s\t%s\n' "$(basename "$f")" "$f"
    done
  done | sort -V | tail -n 1 | cut -f2 | grep .
}
if [ -n "${BACKPLANE_NVRTC_LIBRARY:-}" ]; then
  note "NVRTC: $BACKPLANE_NVRTC_LIBRARY (BACKPLANE_NVRTC_LIBRARY was set)"
elif nvrtc="$(find_lib libnvrtc)"; then
  export BACKPLANE_NVRTC_LIBRARY="$nvrtc"
  # NVRTC opens libnvrtc-builtins from the loader's path.
  prepend_library_path "$(dirname "$nvrtc")"
  note "NVRTC: $nvrtc"
else
  step_fail "no NVRTC (libnvrtc.so.*) in any CUDA Toolkit folder here: nothing can be built for" \
    "cuda; install the toolkit (cuda-nvrtc) or set BACKPLANE_NVRTC_LIBRARY"
fi
case "${BACKPLANE_NVRTC_LIBRARY:-}" in
  *.so."$built_major"*) ;;
  "") ;;
  *) note "note: the bundle was built with CUDA $(info_value cuda_toolkit); NVRTC here is another major" ;;
esac
if [ -n "${BACKPLANE_CUBLAS_LIBRARY:-}" ]; then
  note "cuBLAS: $BACKPLANE_CUBLAS_LIBRARY (BACKPLANE_CUBLAS_LIBRARY was set)"
elif cublas="$(find_lib libcublas)"; then
  export BACKPLANE_CUBLAS_LIBRARY="$cublas"
  prepend_library_path "$(dirname "$cublas")"
  note "cuBLAS: $cublas"
else
  step_fail "no cuBLAS (libcublas.so.*) here: bench_cuda's matmul baseline will be missing"
fi
# ptxas and compute-sanitizer: on PATH, else in a toolkit's bin/.
find_tool() {
  local r
  if command -v "$1" >/dev/null 2>&1; then command -v "$1" && return 0; fi
  for r in "${roots[@]}"; do
    for f in "$r/bin/$1" "$r/$1/$1" "$r/compute-sanitizer/$1"; do
      [ -x "$f" ] && {
        echo "$f"
        return 0
      }
    done
  done
  return 1
}
if ptxas="$(find_tool ptxas)"; then
  export BACKPLANE_CUDA_PTXAS="${BACKPLANE_CUDA_PTXAS:-$ptxas}"
  note "ptxas: $BACKPLANE_CUDA_PTXAS"
else
  step_fail "no ptxas here: cuda_plugin_test's PTX checks will fail; install the toolkit or set BACKPLANE_CUDA_PTXAS"
fi
sanitizer="$(find_tool compute-sanitizer || true)"
note "compute-sanitizer: ${sanitizer:-not found (the sanitizer steps will be skipped)}"
note "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
step_end

# --- backplane info ---
step_begin info 60
if run "$bin/backplane" info; then
  expect "^ +cuda +loaded" "the cuda plugin did not load from $bundle/lib/backplane/plugins"
  expect "^  cuda:0$" "backplane info lists no cuda:0: the plugin sees no device (its status line in $cur_log says why)"
fi
step_end

# --- the cuda test programs, each test in a process of its own ---
gpu_kernels=()
for test_bin in "$bin"/cuda_*; do
  [ -x "$test_bin" ] || continue
  name="$(basename "$test_bin")"
  step_begin "tests_$name" 240
  xml="$out/tests_$name"
  mkdir -p "$xml"
  cases=()
  if timeout 60 "$test_bin" --gtest_list_tests >"$scratch/$name.list" 2>>"$cur_log"; then
    # "Suite.\n  Test  # GetParam() = ..." (after gtest_main's "Running main() from ...")
    mapfile -t cases < <(awk '/^Running main/ {next} /^[^ ]/ {suite = $1; next}
                              /^  [^ ]/ {print suite $1}' "$scratch/$name.list")
  else
    step_fail "$name --gtest_list_tests failed"
  fi
  passed=0 skipped=0 failures=()
  for c in "${cases[@]}"; do
    case "$c" in Catalog/CudaGpuKernelTest.RunsAndMatchesTheReference/*)
      gpu_kernels+=("${c##*/}") ;;
    esac
    before="$(wc -l <"$cur_log")"
    if run "$test_bin" --gtest_filter="$c" --gtest_output="xml:$xml/$(echo "$c" | tr '/.' '__').xml"; then
      # (grep reads everything, no -q: an early exit would be a SIGPIPE to pipefail)
      if tail -n +"$((before + 1))" "$cur_log" | grep '^\[  SKIPPED \]' >/dev/null; then
        skipped=$((skipped + 1))
        # Nothing that runs on cuda:0 may skip here.
        case "$name:$c" in
          cuda_gpu_test:* | cuda_ir_features_test:*/cuda) failures+=("$c (skipped on a GPU machine)") ;;
        esac
      else
        passed=$((passed + 1))
      fi
    else
      failures+=("$c")
    fi
  done
  note "$name: ${#cases[@]} tests, $passed passed, $skipped skipped, ${#failures[@]} failed"
  for f in "${failures[@]}"; do step_fail "$f"; done
  [ "${#cases[@]}" -gt 0 ] || step_fail "$name lists no test ($scratch/$name.list is empty)"
  step_end
done

# --- the conformance kit ---
# Known failures of GPU devices (gpu_xfail.txt: the bundle's copy, else the repository's).
xfail=()
for f in "$bundle/gpu_xfail.txt" "$here/gpu_xfail.txt"; do
  if [ -f "$f" ]; then
    xfail=(--xfail "$f")
    break
  fi
done
for dev in cuda:0 cuda_host:0; do
  step_begin "conformance_${dev%%:*}" 200
  run "$bin/backplane-conformance" cuda --device "$dev" --jobs 4 --timeout 120 "${xfail[@]}" \
    --json "$out/conformance_${dev%%:*}.json" --junit "$out/conformance_${dev%%:*}.xml" || true
  step_end
done

# --- the GPU as a remote device: `backplane serve` on loopback, the kit through the remote
# plugin (docs/remote.md), the code generated by the cuda plugin on the client side ---
step_begin remote_cuda 240
if [ ! -e "$bundle/lib/backplane/plugins/libbackplane_remote.so" ]; then
  step_skip "the bundle has no remote plugin (a build without gRPC)"
else
  "$bin/backplane" serve --listen 127.0.0.1:0 --port-file "$out/remote_port" --devices cuda \
    >"$out/remote_server.log" 2>&1 &
  server=$!
  for _ in $(seq 200); do
    [ -s "$out/remote_port" ] && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  if [ ! -s "$out/remote_port" ]; then
    step_fail "backplane serve did not listen ($out/remote_server.log)"
  else
    BACKPLANE_REMOTE="127.0.0.1:$(cat "$out/remote_port")" run "$bin/backplane-conformance" \
      "$bundle/lib/backplane/plugins/libbackplane_remote.so" \
      --with "$bundle/lib/backplane/plugins/libbackplane_cuda.so" --device remote:0 --jobs 4 \
      --timeout 120 --json "$out/conformance_remote_cuda.json" || true
    # Sessions never see each other's memory on cuda:0 either (docs/remote.md).
    if [ -x "$bin/remote_isolation_check" ]; then
      BACKPLANE_REMOTE="127.0.0.1:$(cat "$out/remote_port")" run "$bin/remote_isolation_check" ||
        true
    fi
  fi
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  cat "$out/remote_server.log" >>"$cur_log" || true
  rm -f "$out/remote_port" "$out/remote_server.log"
fi
step_end

# --- a module built without a device, run on the GPU ---
step_begin cross_build 120
# The GPU's own arch (sm_75, which every GPU CUDA 13 supports runs, where nvidia-smi does not say).
arch="sm_$(echo "${compute_cap:-7.5}" | tr -d .)"
[[ "$arch" =~ ^sm_[0-9]+$ ]] || arch=sm_75
module="$out/matmul_tiled_gpu_$arch.bpmod"
# The build process sees no driver: the module is what a machine without a GPU would build.
if BACKPLANE_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 run "$bin/backplane" build \
  --target "cuda -arch=$arch" -f matmul_tiled_gpu -o "$module" \
  "$bundle/share/backplane/kernels/matmul.bpir"; then
  # Odd sizes, small enough for the interpreter that --check runs beside it.
  if run "$bin/backplane" run "$module" -f matmul_tiled_gpu --device cuda:0 --check --repeat 3 \
    --dim m=257 --dim n=190 --dim k=131; then
    expect "matmul_tiled_gpu on cuda:0: ok" "the cross-built module did not pass on cuda:0"
  fi
fi
step_end

# The catalog's GPU kernels (as cuda_gpu_test lists them), for the demo and the sanitizers:
# on this bundle's devices they run on cuda:0 only.
kernel_args=()
for k in "${gpu_kernels[@]}"; do kernel_args+=(-k "$k"); done

# --- every GPU kernel of the catalog on cuda:0, through the CLI ---
step_begin demo 180
if [ "${#kernel_args[@]}" -eq 0 ]; then
  step_fail "no catalog GPU kernel is known (cuda_gpu_test lists none)"
elif run "$bin/backplane" demo --size small --repeat 1 "${kernel_args[@]}"; then
  # A kernel with a variant for CUDA devices runs that variant on cuda:0, and the row names the
  # function that ran (docs/host-guide.md, "Variants of a GPU kernel"; the variants of
  # sdk/apps/kernels/src/catalog.cc); cuda_gpu_test runs the base kernels themselves.
  declare -A cuda_variant=([vector_add_gpu]=vector_add4_gpu [sum_gpu]=sum4_gpu
    [matmul_tiled_gpu]=matmul_reg_gpu)
  for k in "${gpu_kernels[@]}"; do
    ran="${cuda_variant[$k]:-$k}"
    expect "^$ran +cuda:0 +ok" "the demo did not pass $k ($ran) on cuda:0"
  done
  expect " passed, 0 failed" "the demo reported failures"
fi
step_end

# --- the same under the validation layer: a correct run has no finding ---
step_begin demo_validation 180
if [ ! -e "$bundle/lib/backplane/plugins/libbackplane_validation.so" ]; then
  step_skip "the bundle has no validation layer"
elif [ "${#kernel_args[@]}" -eq 0 ]; then
  step_fail "no catalog GPU kernel is known (cuda_gpu_test lists none)"
elif run env BACKPLANE_LAYERS=validation "$bin/backplane" demo --size small --repeat 1 \
  "${kernel_args[@]}"; then
  expect " passed, 0 failed" "the demo reported failures under the validation layer"
  if grep -q "BP-VALID-" "$cur_log"; then
    step_fail "the validation layer reported findings on cuda:0 (BP-VALID- in $cur_log)"
  fi
fi
step_end

# --- the vulkan plugin on the GPU's own Vulkan driver ---
if [ -e "$bundle/lib/backplane/plugins/libbackplane_vulkan.so" ]; then
  step_begin vulkan_info 90
  icds=()
  for f in /usr/share/vulkan/icd.d/nvidia_icd*.json /etc/vulkan/icd.d/nvidia_icd*.json \
    /usr/local/share/vulkan/icd.d/nvidia_icd*.json \
    /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd*.json; do
    [ -f "$f" ] && icds+=("$f")
  done
  vk=()
  if [ "${#icds[@]}" -eq 0 ]; then
    step_skip "no NVIDIA Vulkan ICD manifest (nvidia_icd.json) in the loader's folders or /usr/local/nvidia: no vulkan steps"
  else
    # The first manifest whose driver the loader opens and that shows vulkan:0; for each
    # one that does not, the loader's own account (VK_LOADER_DEBUG) goes to the log.
    # NVIDIA's driver (libGLX_nvidia.so.0) loads GLVND's libraries: first the machine's, then
    # the bundle's lib/glvnd (with NVIDIA's EGL vendor file, where the driver has one).
    egl_vendor=""
    for f in /usr/share/glvnd/egl_vendor.d/10_nvidia.json \
      /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json; do
      [ -f "$f" ] && egl_vendor="$f"
    done
    glvnd=(LD_LIBRARY_PATH="$bundle/lib/glvnd${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    [ -n "$egl_vendor" ] && glvnd+=(__EGL_VENDOR_LIBRARY_FILENAMES="$egl_vendor")
    note "driver files: $(ls /usr/local/nvidia/lib64 2>/dev/null | grep -iE 'glx|egl|vulkan|glvk|dispatch' | tr '\n' ' ')"
    note "GLVND here: $(ldconfig -p | grep -oE 'lib(GLdispatch|EGL|GLX)\.so\.[0-9]+' | sort -u | tr '\n' ' ')"
    for icd in "${icds[@]}"; do
      note "NVIDIA ICD: $icd: $(tr -d '\n' <"$icd" | tr -s ' ')"
      for with in machine bundle; do
        try=(env BACKPLANE_DISABLE_PLUGINS=cuda VK_DRIVER_FILES="$icd")
        if [ "$with" = bundle ]; then
          [ -d "$bundle/lib/glvnd" ] || continue
          try+=("${glvnd[@]}")
        fi
        note "trying $icd with the $with's GLVND"
        if "${try[@]}" timeout 60 "$bin/backplane" info >"$scratch/vk-info.log" 2>&1 &&
          grep -qE "^  vulkan:0$" "$scratch/vk-info.log"; then
          vk=("${try[@]}")
          note "vulkan:0 found: ${try[*]:1}"
          cat "$scratch/vk-info.log" >>"$cur_log"
          break 2
        fi
        grep -E "vulkan|status" "$scratch/vk-info.log" >>"$cur_log" || true
        "${try[@]}" VK_LOADER_DEBUG=error,warn,driver timeout 60 "$bin/backplane" info 2>&1 |
          grep -E "Loader|DRIVER|ERROR|WARNING" | head -n 40 >>"$cur_log" || true
      done
    done
    if [ "${#vk[@]}" -eq 0 ]; then
      step_fail "no NVIDIA ICD manifest gave a vulkan:0 (the plugin's status and the loader's messages are in $cur_log)"
    else
      expect "^ +vulkan +loaded" "the vulkan plugin did not load from $bundle/lib/backplane/plugins"
    fi
  fi
  step_end
  if [ "${#vk[@]}" -gt 0 ]; then
    step_begin conformance_vulkan 150
    run "${vk[@]}" "$bin/backplane-conformance" vulkan --device vulkan:0 --jobs 4 --timeout 120 \
      "${xfail[@]}" --json "$out/conformance_vulkan.json" --junit "$out/conformance_vulkan.xml" ||
      true
    step_end
    step_begin demo_vulkan 150
    if run "${vk[@]}" "$bin/backplane" demo --size small --repeat 3; then
      expect "^[a-z0-9_]+ +vulkan:0 +ok" "the demo ran no kernel on vulkan:0"
      expect " passed, 0 failed" "the demo reported failures"
    fi
    step_end
    step_begin ir_features_vulkan 120
    if [ ! -x "$bin/cuda_ir_features_test" ]; then
      step_fail "the bundle has no cuda_ir_features_test"
    elif run "${vk[@]}" "$bin/cuda_ir_features_test" --gtest_filter='*/vulkan' \
      --gtest_output="xml:$out/ir_features_vulkan.xml"; then
      expect "^\[  PASSED  \] [1-9][0-9]* tests?" "cuda_ir_features_test ran no vulkan test"
      if grep '^\[  SKIPPED \]' "$cur_log" >/dev/null; then
        step_fail "vulkan tests of cuda_ir_features_test skipped on the GPU's driver ($cur_log)"
      fi
    fi
    step_end
  fi
fi

# --- bench_cuda ---
step_begin bench 180
if [ ! -x "$bin/bench_cuda" ]; then
  step_fail "the bundle has no bench_cuda (built with BACKPLANE_BUILD_BENCHMARKS off)"
elif run "$bin/bench_cuda" --benchmark_out="$out/bench_cuda.json" --benchmark_out_format=json; then
  if grep -q '"error_occurred": true' "$out/bench_cuda.json"; then
    step_fail "benchmarks reported errors: $(grep -E 'ERROR OCCURRED' "$cur_log" | tr '\n' ' ')"
  fi
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$out/bench_cuda.json" >"$out/bench_summary.txt" 2>>"$cur_log" <<'EOF' || true
import json, sys
runs = {b["name"].split("/")[0]: b for b in json.load(open(sys.argv[1]))["benchmarks"]
        if not b.get("error_occurred")}
def get(name, key):
    b = runs.get(name)
    return None if b is None else b.get(key)
rows = [("launch: Backplane / raw cuLaunchKernel, time (goal <= 1.1)", "BM_Launch_Backplane",
         "BM_Launch_RawDriver", "real_time"),
        ("H2D 256 MiB pinned: Backplane / raw, bytes/s (goal >= 0.95)", "BM_CopyH2D_Backplane",
         "BM_CopyH2D_RawDriver", "bytes_per_second"),
        ("D2H 256 MiB pinned: Backplane / raw, bytes/s (goal >= 0.95)", "BM_CopyD2H_Backplane",
         "BM_CopyD2H_RawDriver", "bytes_per_second"),
        ("vector_add, variant for cuda / device copy, bytes/s (goal >= 0.95)",
         "BM_VectorAdd_Backplane", "BM_DeviceCopy_RawDriver", "bytes_per_second"),
        ("vector_add, base vector_add_gpu / device copy, bytes/s",
         "BM_VectorAddBase_Backplane", "BM_DeviceCopy_RawDriver", "bytes_per_second"),
        ("sum, variant for cuda, bytes read / device copy, bytes/s (goal >= 0.9)",
         "BM_Sum_Backplane", "BM_DeviceCopy_RawDriver", "bytes_per_second"),
        ("sum, base sum_gpu, bytes read / device copy, bytes/s",
         "BM_SumBase_Backplane", "BM_DeviceCopy_RawDriver", "bytes_per_second"),
        ("matmul 4096, variant for cuda / cuBLAS sgemm, flop/s (goal >= 0.6)",
         "BM_Matmul_Backplane", "BM_Matmul_cuBLAS", "flops"),
        ("matmul 4096, named variant reg16 / cuBLAS sgemm, flop/s",
         "BM_MatmulReg16_Backplane", "BM_Matmul_cuBLAS", "flops"),
        ("matmul 4096, named variant smem / cuBLAS sgemm, flop/s",
         "BM_MatmulSmem_Backplane", "BM_Matmul_cuBLAS", "flops"),
        ("matmul 4096, base matmul_tiled_gpu / cuBLAS sgemm, flop/s",
         "BM_MatmulBase_Backplane", "BM_Matmul_cuBLAS", "flops")]
print("bench_cuda ratios")
for what, ours, base, key in rows:
    a, b = get(ours, key), get(base, key)
    ratio = "n/a" if not a or not b else "%.3f" % (a / b)
    label = (runs.get(ours) or {}).get("label", "")
    print("  %-62s %s  (%s vs %s)%s" % (what, ratio, a, b, "  [" + label + "]" if label else ""))
pair = runs.get("BM_LaunchPair")
if pair is not None and pair.get("ratio"):
    print("  %-62s %.3f  (p10 %.3f, p90 %.3f; %.1f vs %.1f ns)" % (
        "launch pair, alternating, host cost a launch (goal <= 1.1)", pair["ratio"],
        pair.get("ratio_p10", 0), pair.get("ratio_p90", 0), pair.get("backplane_ns", 0),
        pair.get("raw_ns", 0)))
EOF
    tee -a "$cur_log" <"$out/bench_summary.txt"
  fi
fi
step_end

# --- the launch path's phases: the pair again, the plugin's timer on ---
step_begin launch_phases 90
if [ ! -x "$bin/bench_cuda" ]; then
  step_fail "the bundle has no bench_cuda (built with BACKPLANE_BUILD_BENCHMARKS off)"
elif run env BACKPLANE_CUDA_LAUNCH_PHASES=1 "$bin/bench_cuda" --benchmark_filter=LaunchPair \
  --benchmark_out="$out/bench_launch_phases.json" --benchmark_out_format=json; then
  expect "^launch phases of the Backplane side" \
    "bench_cuda printed no phase breakdown (a plugin without the launch phase timer?)"
  sed -n '/^launch pair/,/outside the plugin/p' "$cur_log" >"$out/launch_phases.txt"
  sed "s/^/   /" "$out/launch_phases.txt"
fi
step_end

# --- compute-sanitizer over the catalog's GPU kernels ---
for tool in memcheck racecheck synccheck; do
  step_begin "sanitizer_$tool" 150
  if [ -z "$sanitizer" ]; then
    step_skip "no compute-sanitizer on this machine (PATH or a toolkit's bin/)"
  elif [ "${#kernel_args[@]}" -eq 0 ]; then
    step_fail "no catalog GPU kernel is known (cuda_gpu_test lists none)"
  else
    run "$sanitizer" --tool "$tool" --error-exitcode 86 --print-limit 50 \
      "$bin/backplane" demo --size small --repeat 1 "${kernel_args[@]}" || true
    if grep -qE "Device not supported|is not supported on this (device|platform)" "$cur_log"; then
      cur_result=ok
      step_skip "compute-sanitizer does not support this device or runtime here (see $cur_log)"
    elif [ "$cur_result" = ok ]; then
      # memcheck and synccheck end with "ERROR SUMMARY: 0 errors", racecheck with
      # "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)".
      expect "(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\))" \
        "compute-sanitizer $tool reported errors"
      expect " passed, 0 failed" "the kernels failed under compute-sanitizer $tool"
    fi
  fi
  step_end
done

say ""
say "Record afterwards: the device ($device_name, driver $driver_version) and this table in"
say "docs/cuda.md; bench_summary.txt's ratios and bench_cuda.json's figures in"
say "docs/performance.md (docs/cuda.md, \"Running the GPU checks\")."
[ -f "$out/bench_summary.txt" ] && sed 's/^/  /' "$out/bench_summary.txt" >>"$out/summary.txt"
if [ -s "$out/launch_phases.txt" ]; then
  echo "  launch phases (BACKPLANE_CUDA_LAUNCH_PHASES=1; docs/cuda.md, \"The launch path\")" \
    >>"$out/summary.txt"
  sed 's/^/  /' "$out/launch_phases.txt" >>"$out/summary.txt"
fi
finish "$failed"
