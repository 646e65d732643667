#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# GpuBundle.SelfContained (tests/install/CMakeLists.txt): the GPU bundle that
# tests/plugins/cuda/make_gpu_bundle.sh makes runs on another machine
# with nothing of this one. From the already-built tree (no configure, no build):
#   1. make_gpu_bundle.sh --from-build into a scratch folder; it prints the size and the
#      newest glibc version, which GLIBC_NEEDED records
#   2. MOVE the bundle to another folder, then check every ELF file in it:
#      - each needed library is base (glibc's, the loader, the NVIDIA driver's) or found in
#        the bundle through the file's own RUNPATH;
#      - RUNPATH/RPATH has only $ORIGIN entries, each a folder inside the bundle;
#      - ldd, in a clean environment, resolves everything inside the bundle or to base;
#      - no file names the build tree or the folder the bundle was made in;
#      and that the bundle is at most 64 MiB and holds what a GPU run needs;
#   3. from the moved bundle, with a clean environment (env -i, PATH and HOME only) and
#      another current folder: `bin/backplane info` finds the cpu and cuda plugins in the
#      bundle; cuda_plugin_test runs tests that use the plugin, ptxas, the CLI and a scratch
#      folder, all found at run time; gpu_checks.sh stops where it needs a GPU with its
#      message and exit status 2, and its glibc check takes the machine's C++ runtime, or
#      stops, as the machine's glibc says (BACKPLANE_GPU_CHECKS_GLIBC stands in for it);
#   4. gpu_checks.sh --pack with a stand-in nvidia-smi that lists a GPU: every step runs to
#      the table (the GPU steps fail, as there is no device; cuda_plugin_test passes), the
#      exit status is 1, and $OUT holds the three packed files.
# Where this machine has nvidia-smi, the no-GPU expectations of step 3 are left out.
#
# usage: gpu_bundle_test.sh, with SOURCE_DIR BUILD_DIR SCRATCH set, and SKIP_REASON (when not
# empty: print it and exit 77, ctest's skip).
set -euo pipefail

if [ -n "${SKIP_REASON:-}" ]; then
  echo "GpuBundle.SelfContained skipped: $SKIP_REASON"
  exit 77
fi
fail() {
  echo "GpuBundle.SelfContained: FAILED: $*" >&2
  exit 1
}

rm -rf "$SCRATCH"
mkdir -p "$SCRATCH/made-here" "$SCRATCH/moved-there" "$SCRATCH/home" "$SCRATCH/cwd"
made="$SCRATCH/made-here/gpu-bundle"
bundle="$SCRATCH/moved-there/bundle"
build="$(cd "$BUILD_DIR" && pwd)"

# --- 1. make it ---
bash "$SOURCE_DIR/tests/plugins/cuda/make_gpu_bundle.sh" --from-build "$build" "$made" \
  >"$SCRATCH/make.log" 2>&1 || {
  cat "$SCRATCH/make.log"
  fail "make_gpu_bundle.sh --from-build $build failed"
}
cat "$SCRATCH/make.log"
glibc="$(cat "$made/GLIBC_NEEDED")"
[[ "$glibc" =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]] || fail "GLIBC_NEEDED holds '$glibc', not a version"
grep -qE "newest glibc symbol version needed: GLIBC_$glibc " "$SCRATCH/make.log" ||
  fail "make_gpu_bundle.sh did not print the GLIBC_NEEDED version ($glibc)"
grep -qE "size: [0-9]+ bytes" "$SCRATCH/make.log" || fail "make_gpu_bundle.sh did not print the size"
cmp -s "$made/gpu_checks.sh" "$SOURCE_DIR/tests/plugins/cuda/gpu_checks.sh" ||
  fail "the bundle's gpu_checks.sh is not tests/plugins/cuda/gpu_checks.sh"

# --- 2. move it, and check every ELF file ---
mv "$made" "$bundle"
bundle_real="$(cd "$bundle" && pwd -P)"
for f in bin/backplane bin/backplane-conformance bin/cuda_plugin_test bin/cuda_gpu_test \
  lib/libbackplane.so.1 lib/backplane/plugins/libbackplane_cpu.so \
  lib/backplane/plugins/cpu.bpplugin.json lib/backplane/plugins/libbackplane_cuda.so \
  lib/backplane/plugins/cuda.bpplugin.json share/backplane/kernels/matmul.bpir \
  share/backplane/kernels/conv2d.bpir gpu_checks.sh GLIBC_NEEDED BUNDLE_INFO; do
  [ -e "$bundle/$f" ] || fail "the bundle lacks $f"
done
# Every cuda_* program and bench_cuda the build made is in it.
for f in "$build"/bin/cuda_* "$build"/bin/bench_cuda; do
  [ -e "$f" ] || continue
  [ -x "$bundle/bin/$(basename "$f")" ] || fail "the bundle lacks bin/$(basename "$f") (built in $build/bin)"
done
# Only the cpu, cuda and (where they were built) vulkan and remote plugins and the layers: the others'
# libraries need what the bundle does not carry.
plugins="$(find "$bundle/lib/backplane/plugins" -mindepth 1 -printf '%f\n' | sort | tr '\n' ' ')"
want_list=(cpu.bpplugin.json cuda.bpplugin.json libbackplane_cpu.so libbackplane_cuda.so)
[ -e "$build/lib/backplane/plugins/libbackplane_vulkan.so" ] &&
  want_list+=(libbackplane_vulkan.so vulkan.bpplugin.json)
[ -e "$build/lib/backplane/plugins/libbackplane_remote.so" ] &&
  want_list+=(libbackplane_remote.so remote.bpplugin.json)
for layer in validation trace faults; do
  [ -e "$build/lib/backplane/plugins/libbackplane_$layer.so" ] &&
    want_list+=("libbackplane_$layer.so" "$layer.bpplugin.json")
done
want="$(printf '%s\n' "${want_list[@]}" | sort | tr '\n' ' ')"
[ "$plugins" = "$want" ] ||
  fail "lib/backplane/plugins holds '$plugins', not '$want'"
# What travels is the packed bundle: within the device tool's 64 MiB, and the same bundle.
pack="$SCRATCH/made-here/gpu-bundle-pack/bundle.tar.gz"
[ -f "$pack" ] || fail "make_gpu_bundle.sh wrote no $pack"
size="$(stat -c %s "$pack")"
[ "$size" -le $((64 * 1024 * 1024)) ] || fail "the packed bundle is $size bytes, over 64 MiB"
mkdir -p "$SCRATCH/unpacked"
tar -xzf "$pack" -C "$SCRATCH/unpacked" || fail "$pack does not unpack"
diff -r "$SCRATCH/unpacked/gpu-bundle" "$bundle" >/dev/null ||
  fail "$pack does not hold the bundle (diff -r $SCRATCH/unpacked/gpu-bundle $bundle)"
rm -rf "$SCRATCH/unpacked"

base_re='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libmvec\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so|libanl\.so|libnsl\.so|libBrokenLocale\.so|libcuda\.so|libnvidia-)'
elves=()
while read -r f; do
  [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = "177ELF" ] && elves+=("$f")
done < <(find "$bundle" -type f | sort)
[ "${#elves[@]}" -ge 10 ] || fail "only ${#elves[@]} ELF files in the bundle"
for f in "${elves[@]}"; do
  rel="${f#"$bundle"/}"
  dir="$(dirname "$f")"
  # RUNPATH/RPATH: $ORIGIN entries only, each inside the bundle.
  paths="$(readelf -d "$f" | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]$/\2/p')"
  search=()
  IFS=: read -r -a entries <<<"$paths"
  for e in "${entries[@]}"; do
    # shellcheck disable=SC2016  # the literal $ORIGIN, which the loader expands
    case "$e" in
      '$ORIGIN' | '$ORIGIN'/*) ;;
      *) fail "$rel has the RUNPATH entry '$e', which is not \$ORIGIN-relative" ;;
    esac
    d="$(cd "$dir/${e#\$ORIGIN}" 2>/dev/null && pwd -P)" || fail "$rel's RUNPATH entry $e is no folder"
    case "$d/" in "$bundle_real"/*) ;; *) fail "$rel's RUNPATH entry $e leads out of the bundle, to $d" ;; esac
    search+=("$d")
  done
  # NEEDED: base, or found through that RUNPATH.
  while read -r name; do
    [[ "$name" =~ $base_re ]] && continue
    found=""
    for d in "${search[@]}"; do [ -e "$d/$name" ] && found="$d/$name"; done
    [ -n "$found" ] || fail "$rel needs $name, which is not base and not found through its RUNPATH '$paths'"
  done < <(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
  # ldd in a clean environment: inside the bundle or base.
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [ "$path" != "not" ] || fail "ldd: $rel needs $name, which is not found"
    case "$path" in
      "$bundle"/* | "$bundle_real"/*) ;;
      *) [[ "$name" =~ $base_re ]] || fail "ldd: $rel takes $name from $path, outside the bundle" ;;
    esac
  done < <(env -i PATH=/usr/bin:/bin ldd "$f")
  # No path of the build tree or of where the bundle was made.
  for p in "$build" "$SCRATCH/made-here"; do
    n="$(grep -c -a -F -- "$p" "$f" || true)"
    [ "$n" -eq 0 ] || fail "$rel names $p ($n times): the bundle must not depend on it"
  done
done
echo "checked ${#elves[@]} ELF files: needed libraries, RUNPATH, ldd, no build-tree path"

# --- 3. run it from there, in a clean environment and another folder ---
clean=(env -i PATH=/usr/bin:/bin HOME="$SCRATCH/home")
cd "$SCRATCH/cwd"
"${clean[@]}" "$bundle/bin/backplane" info >"$SCRATCH/info.log" 2>&1 || {
  cat "$SCRATCH/info.log"
  fail "bin/backplane info failed from the moved bundle"
}
grep -qE "^ +1 +$bundle/lib/backplane/plugins +install +ok" "$SCRATCH/info.log" ||
  fail "backplane info does not search the moved bundle's plugin folder (info.log)"
for p in cpu cuda; do
  grep -qE "^ +$p +loaded .*$bundle/lib/backplane/plugins/libbackplane_$p.so" "$SCRATCH/info.log" ||
    fail "the $p plugin was not loaded from the moved bundle (info.log)"
done
# (The scratch folder, and so the bundle, lies in the build tree: its own paths are fine.)
if grep -F -- "$build" "$SCRATCH/info.log" | grep -vF -- "$SCRATCH" >/dev/null; then
  fail "backplane info names the build tree (info.log)"
fi
echo "backplane info: the cpu and cuda plugins load from the moved bundle"

have_gpu=0
command -v nvidia-smi >/dev/null 2>&1 && have_gpu=1
tests="Catalog/CudaKernelBuildTest.CompilesToPtxThatPtxasAcceptsAndSaves/vector_add_gpu"
[ "$have_gpu" -eq 1 ] ||
  tests="$tests:CudaNoDeviceTest.ReportsZeroDevicesWithTheReason:CudaCliTest.InfoShowsTheReasonAndBuildCrossCompiles"
"${clean[@]}" "$bundle/bin/cuda_plugin_test" --gtest_filter="$tests" >"$SCRATCH/test.log" 2>&1 || {
  cat "$SCRATCH/test.log"
  fail "cuda_plugin_test failed from the moved bundle"
}
for t in ${tests//:/ }; do
  grep -qF "[       OK ] $t" "$SCRATCH/test.log" || fail "cuda_plugin_test did not pass $t (test.log)"
done
# Its scratch files are where run_time_paths.h puts them: beside the moved program.
[ -f "$bundle/tests/plugins/scratch/vector_add_gpu.ptx.cubin" ] ||
  fail "cuda_plugin_test wrote no vector_add_gpu.ptx.cubin into $bundle/tests/plugins/scratch"
echo "cuda_plugin_test: passed $tests"

if [ "$have_gpu" -eq 0 ]; then
  expect_stop() {  # expect_stop NAME MESSAGE ENV...: gpu_checks.sh exits 2 printing MESSAGE
    local name="$1" message="$2" status=0
    shift 2
    "${clean[@]}" OUT="$SCRATCH/$name" "$@" bash "$bundle/gpu_checks.sh" >"$SCRATCH/$name.log" 2>&1 ||
      status=$?
    [ "$status" -eq 2 ] || {
      cat "$SCRATCH/$name.log"
      fail "gpu_checks.sh ($name) exited with $status, not 2"
    }
    grep -qF -- "$message" "$SCRATCH/$name.log" || {
      cat "$SCRATCH/$name.log"
      fail "gpu_checks.sh ($name) did not say: $message"
    }
    [ -f "$SCRATCH/$name/summary.txt" ] || fail "gpu_checks.sh ($name) wrote no summary.txt"
  }
  no_gpu="nvidia-smi not found: this machine has no NVIDIA driver; gpu_checks.sh needs a GPU machine"
  expect_stop gpu_checks "$no_gpu"
  grep -qE "^glibc +ok" "$SCRATCH/gpu_checks/summary.txt" || fail "gpu_checks.sh's glibc step did not pass here"
  grep -qE "^nvidia_smi +STOPPED" "$SCRATCH/gpu_checks/summary.txt" ||
    fail "gpu_checks.sh's table does not show nvidia_smi STOPPED"
  # A glibc older than the bundle's libstdc++ needs, new enough for the rest: this machine's
  # own C++ runtime is used (it has what the bundle needs of it), then the same stop.
  own="$(sed -n 's/^glibc_needed_without_cxx_runtime=//p' "$bundle/BUNDLE_INFO")"
  if [ "$own" != "$glibc" ]; then
    expect_stop gpu_checks_own_cxx "$no_gpu" BACKPLANE_GPU_CHECKS_GLIBC="$own"
    grep -qF "this run uses this machine's own C++ runtime instead" "$SCRATCH/gpu_checks_own_cxx.log" ||
      fail "gpu_checks.sh with glibc $own did not take this machine's C++ runtime"
  fi
  expect_stop gpu_checks_old_glibc "this machine's glibc 2.17 is older than the $glibc the bundle needs" \
    BACKPLANE_GPU_CHECKS_GLIBC=2.17
  echo "gpu_checks.sh: stops where it needs a GPU, with its message; glibc checks as expected"

  # --- 4. every step, with a stand-in nvidia-smi ---
  mkdir -p "$SCRATCH/fakebin"
  cat >"$SCRATCH/fakebin/nvidia-smi" <<'EOF_SMI'
#!/bin/sh
# A stand-in that lists one GPU, so that gpu_checks.sh goes through every step.
case "$*" in
  -L) echo "GPU 0: Stand-in GPU (UUID: GPU-none)" ;;
  *--query-gpu=name*) echo "Stand-in GPU" ;;
  *--query-gpu=compute_cap*) echo "9.0" ;;
  *--query-gpu=driver_version*) echo "580.0" ;;
  *) echo "| NVIDIA-SMI 580.0   Driver Version: 580.0   CUDA Version: 13.0 |" ;;
esac
EOF_SMI
  chmod +x "$SCRATCH/fakebin/nvidia-smi"
  status=0
  env -i PATH="$SCRATCH/fakebin:/usr/bin:/bin" HOME="$SCRATCH/home" OUT="$SCRATCH/all-steps" \
    bash "$bundle/gpu_checks.sh" --pack --budget 240 >"$SCRATCH/all-steps.log" 2>&1 || status=$?
  [ "$status" -eq 1 ] || {
    cat "$SCRATCH/all-steps.log"
    fail "gpu_checks.sh with a stand-in nvidia-smi exited with $status, not 1 (the GPU steps fail here)"
  }
  summary="$SCRATCH/all-steps/summary.txt"
  for step in bundle glibc nvidia_smi toolkit info tests_cuda_gpu_test tests_cuda_plugin_test \
    conformance_cuda conformance_cuda_host remote_cuda cross_build demo demo_validation bench \
    launch_phases \
    sanitizer_memcheck \
    sanitizer_racecheck sanitizer_synccheck; do
    grep -qE "^$step +(ok|FAILED|skipped|TIMEOUT) +[0-9]+s$" "$summary" ||
      fail "gpu_checks.sh's table has no row for $step ($summary)"
  done
  for step in bundle glibc nvidia_smi tests_cuda_plugin_test; do
    grep -qE "^$step +ok " "$summary" || fail "gpu_checks.sh's $step did not pass here ($summary)"
  done
  grep -qE "^info +FAILED " "$summary" || fail "gpu_checks.sh's info step passed without a device"
  packed="$(find "$SCRATCH/all-steps" -mindepth 1 -printf '%f\n' | sort | tr '\n' ' ')"
  [ "$packed" = "bench_cuda.json gpu-checks.tar.gz summary.txt " ] ||
    fail "gpu_checks.sh --pack left '$packed' in \$OUT"
  tar -tzf "$SCRATCH/all-steps/gpu-checks.tar.gz" >"$SCRATCH/all-steps.list"
  grep -q 'tests_cuda_plugin_test/.*\.xml$' "$SCRATCH/all-steps.list" ||
    fail "gpu-checks.tar.gz holds no test XML"
  # A GPU test that skips (no usable device) fails the step: a GPU run cannot pass by skipping.
  tar -xzf "$SCRATCH/all-steps/gpu-checks.tar.gz" -C "$SCRATCH/all-steps" ./tests_cuda_gpu_test.log
  grep -qF "FAILED: Catalog/CudaGpuKernelTest.RunsAndMatchesTheReference/vector_add_gpu (skipped on a GPU machine)" \
    "$SCRATCH/all-steps/tests_cuda_gpu_test.log" ||
    fail "tests_cuda_gpu_test did not fail the GPU tests that skipped (tests_cuda_gpu_test.log)"
  echo "gpu_checks.sh: every step runs to the table with a stand-in nvidia-smi; --pack leaves three files"
fi
echo "GpuBundle.SelfContained: ok (bundle $size bytes, GLIBC_$glibc)"
