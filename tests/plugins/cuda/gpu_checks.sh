#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The CUDA checks that need a GPU, in one command, for a machine with an NVIDIA GPU, its
# driver and the CUDA Toolkit:
#   bash tests/plugins/cuda/gpu_checks.sh [OUT_DIR]
# Builds the release preset's cuda targets, then runs: every cuda test (the GPU ones run
# here: every catalog kernel on cuda:0 against the float64 reference, copies, streams,
# workspaces, attributes), `backplane info`, the conformance kit on the cuda plugin, a
# cross-built module through `backplane run`, and the benchmark pairs vs the raw driver API
# and cuBLAS. Everything is written to OUT_DIR (default: gpu-results/); the exit status is
# nonzero if any step failed.
set -u
cd "$(dirname "$0")/../../.."
out="${1:-gpu-results}"
mkdir -p "$out"
status=0
step() {  # step NAME COMMAND...: runs COMMAND, logs to $out/NAME.log
  local name="$1"
  shift
  echo "== $name: $*"
  if "$@" >"$out/$name.log" 2>&1; then echo "   ok"; else echo "   FAILED (see $out/$name.log)"; status=1; fi
}
nvidia-smi >"$out/nvidia-smi.log" 2>&1 || echo "nvidia-smi failed: is a driver installed?"
export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-}"
step configure cmake --preset release
step build cmake --build --preset release -j"$(nproc)" --target backplane backplane_cli \
  backplane_cpu backplane_cuda backplane_conformance cuda_plugin_test cuda_gpu_test bench_cuda
bin=build/release/bin
step info "$bin/backplane" info
step tests ctest --test-dir build/release -R 'Cuda' --output-on-failure
# The GPU tests must have run, not skipped.
if grep -q "Skipped" "$out/tests.log" && grep -q "CudaGpu.*Skipped" "$out/tests.log"; then
  echo "   the GPU tests skipped: no CUDA device was usable (see $out/info.log)"
  status=1
fi
step conformance "$bin/backplane-conformance" cuda --device cuda:0
step cross_build "$bin/backplane" build --target 'cuda -arch=sm_90' -f matmul_tiled_gpu \
  -o "$out/matmul_tiled_gpu.bpmod" build/release/share/backplane/kernels/matmul.bpir
step cross_run "$bin/backplane" run "$out/matmul_tiled_gpu.bpmod" -f matmul_tiled_gpu \
  --device cuda:0
step bench "$bin/bench_cuda" --benchmark_out="$out/bench_cuda.json" --benchmark_out_format=json
echo "results in $out/ (record the bench figures with the device name in docs/performance.md)"
exit $status
