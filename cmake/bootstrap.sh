#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Sets up a Debian 12 machine for Backplane and runs the main job or the tests.
#   bash cmake/bootstrap.sh demo   install what is missing, build what the demo needs (the
#                                  release preset's target backplane_demo_deps), run the demo
#   bash cmake/bootstrap.sh test   install what is missing, build and run every test
#                                  (release, the Python package's pytest, then the asan
#                                  preset: ASan + UBSan + LSan, then the concurrency tests
#                                  under the tsan preset)
#   bash cmake/bootstrap.sh python install what is missing, create the venv .venv with the
#                                  Python package (pip install ./python: it builds the core
#                                  and the plugins itself, in build/wheel-*) and run
#                                  `python -m backplane demo`
# Safe to run again: installs only what is missing and rebuilds incrementally.
set -euo pipefail

mode="${1:-demo}"
case "$mode" in
  demo | test | python) ;;
  *)
    echo "usage: bash cmake/bootstrap.sh demo|test|python" >&2
    exit 2
    ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Every Debian package the build and the tests need.
packages=(
  cmake ninja-build gcc g++ pkg-config file
  libboost-dev libboost-filesystem-dev libdlpack-dev
  nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
  # The Vulkan plugin: the loader, lavapipe (a CPU Vulkan device), the validation layers and
  # vulkaninfo (vulkan-tools; the attribute-truth test compares vulkan:N with it).
  libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers vulkan-tools
  # Its code generator: shaderc (GLSL -> SPIR-V in process), glslang, spirv-val for the tests.
  libshaderc-dev glslang-tools spirv-tools
  # The OpenCL plugin: the ICD loader, the headers, PoCL (OpenCL on the CPU) and clinfo (a
  # test compares the plugin's attributes with it).
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  # The attribute-truth test compares cpu:0 with lscpu (util-linux; essential on Debian, listed
  # so a minimal image has it) as it compares opencl with clinfo and vulkan with vulkaninfo.
  util-linux
  clang-format
  # The GPU bundle (tests/plugins/cuda/make_gpu_bundle.sh, test GpuBundle.SelfContained) sets
  # $ORIGIN RUNPATHs on the libraries it copies in.
  patchelf
  # The ABI check (ctest abi.baseline, cmake/abi/): abidw and abidiff describe and compare
  # libbackplane's exported C ABI against the frozen baseline.
  abigail-tools
  # Compiler cache: a second build of the same sources (another clone, CI after a
  # developer's build) compiles only what changed.
  ccache
  # Remote devices (plugins/remote, `backplane serve`): gRPC and protobuf; openssl makes the
  # tests' certificates and iproute2 their network namespace.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler openssl iproute2
  # OpenSSL: the server checks its key pair and its clients' certificates with it.
  libssl-dev
  # The Python package (python/): a venv, and the headers its extension builds against; its
  # PyPI requirements (python/requirements.txt) go into the venv.
  python3 python3-venv python3-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "==> installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs="$(nproc)"

# Builds go through ccache when it is there. Paths are taken relative to the repository root,
# and the build folder is left out of the hash of objects with debug information (the debug
# presets', libbackplane's), so two clones of the same commit share cached objects: a CI clone
# compiles only what differs from the last build on the machine. Such an object's debug
# information names the folder it was first compiled in.
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
fi

build() {
  local preset="$1"
  echo "==> configuring and building the '$preset' preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
}

if [ "$mode" = demo ]; then
  # Only what the demo runs: the CLI, libbackplane, the plugins and the kernel files (the
  # target backplane_demo_deps, about a quarter of the build's steps), not the tests and
  # benchmarks. It is the release build folder the test mode uses, so `bootstrap.sh test`
  # afterwards builds only the rest.
  echo "==> configuring the 'release' preset"
  cmake --preset release >/dev/null
  # The configure writes each plugin's manifest: the plugins whose SDK was found here.
  plugins=""
  for manifest in build/release/lib/backplane/plugins/*.bpplugin.json; do
    [ -e "$manifest" ] || continue
    manifest="${manifest##*/}"
    plugins+="${manifest%.bpplugin.json} "
  done
  echo "==> building what the demo needs (target backplane_demo_deps): the backplane CLI," \
    "libbackplane, the plugins (${plugins% }) and the reference kernels; no tests or benchmarks"
  cmake --build --preset release -j "$jobs" --target backplane_demo_deps
  echo "==> build/release/bin/backplane demo"
  exec build/release/bin/backplane demo
fi

# The Python package in .venv, as users get it: `pip install ./python` builds libbackplane and
# the plugins itself (in build/wheel-<tag>/, beside build/release, through ccache: the objects
# the release build made hit) and puts them inside the package (python/README.md). With the
# presets' -Werror and CMake's own compilers (cc, c++: scikit-build-core would take Python's
# gcc, g++, which ccache tells apart), so that the compile commands are the release build's
# (libbackplane's objects, -g, hit too: the wheel strips the debug information that names the
# other folder). An empty Backplane_DIR: the
# self-contained build even where the build folder was configured over an install before.
python_package() {
  local py="${BACKPLANE_PYTHON:-python3}"
  if [ ! -x .venv/bin/python ]; then
    echo "==> creating the venv .venv ($("$py" --version))"
    "$py" -m venv .venv
  fi
  echo "==> .venv: the Python requirements (python/requirements.txt) and the package"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r python/requirements.txt
  # A venv made before the package was named backplane-runtime holds it as "backplane".
  if .venv/bin/python -m pip show -q backplane >/dev/null 2>&1; then
    .venv/bin/python -m pip uninstall -q -y backplane
  fi
  CC="${CC:-cc}" CXX="${CXX:-c++}" .venv/bin/python -m pip install -q \
    --disable-pip-version-check --no-build-isolation ./python -C cmake.define.BACKPLANE_WERROR=ON \
    -C cmake.define.Backplane_DIR=
}

if [ "$mode" = python ]; then
  python_package
  echo "==> .venv/bin/python -m backplane demo"
  exec .venv/bin/python -m backplane demo
fi

build release
echo "==> tests (release)"
ctest --preset release

python_package
echo "==> tests (the Python package: pytest)"
.venv/bin/python -m pytest -q python/tests

build asan
echo "==> tests (asan: AddressSanitizer, UndefinedBehaviorSanitizer, LeakSanitizer)"
ctest --preset asan
# ThreadSanitizer for the concurrency tests only: the executables that hold them are built,
# and ctest runs the tests whose names say they use threads.
echo "==> concurrency tests (tsan: ThreadSanitizer)"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs" --target cpu_stress_test cpu_plugin_test simaccel_test \
  core_registry_test core_object_test core_target_test simaccel_build_test ir_tests \
  validation_test faults_layer_test
# IrLimits (deep trees walked from threads) is a stack-depth test, not a concurrency one: it runs
# under release and asan; under TSan its 30,000-level recursions grew to 24 GiB and were
# killed for memory.
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build/tsan --output-on-failure -j "$jobs" \
  -R "Stress|Concurrent|Thread|SimAccel|SlotIsPerThread|ResourceDeleter|IrInterpGrid" -E "IrLimits"
echo "==> all tests passed"
