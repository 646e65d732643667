#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds the GPU bundle: a folder that runs Backplane's CUDA checks on a machine with an
# NVIDIA GPU, its driver and a CUDA Toolkit, and nothing else of ours (no Debian development
# packages, no build step there). docs/cuda.md, "Running the GPU checks".
#
#   bash tests/plugins/cuda/make_gpu_bundle.sh [--jobs N] [BUNDLE_DIR]
#       configures and builds the release preset (only what the bundle takes: the target
#       backplane_gpu_bundle), then bundles it into BUNDLE_DIR (default: gpu-bundle/ at the
#       repository root, which git ignores)
#   bash tests/plugins/cuda/make_gpu_bundle.sh --from-build BUILD_DIR [BUNDLE_DIR]
#       bundles an already-built tree: no configure, no build
#
# The bundle is the install's layout (`cmake --install`, which gives every program and
# library a $ORIGIN-relative RUNPATH and puts the kernel catalog beside libbackplane), pruned
# to what a GPU run needs, plus the install component gpu_bundle (tests/install/
# CMakeLists.txt: the cuda tests and bench_cuda) and every shared library they need that is
# not part of the base system, copied into lib/:
#   bin/        backplane, backplane-conformance, cuda_plugin_test, cuda_gpu_test, any other
#               cuda_* test, bench_cuda
#   lib/        libbackplane and the copied libraries (libstdc++, libgcc_s, Boost, OpenBLAS
#               and its Fortran runtime, Google Benchmark, ...)
#   lib/backplane/plugins/   the cpu and cuda plugins and their manifests
#   share/backplane/kernels/ the kernel catalog; share/doc/backplane/ the docs
#   gpu_checks.sh            a copy of tests/plugins/cuda/gpu_checks.sh, which runs it all
#   gpu_xfail.txt            the conformance kit's expected failures on GPU devices
#   GLIBC_NEEDED             the newest GLIBC_x.y symbol version any ELF file here needs
#   BUNDLE_INFO              what it was built from (commit, machine, CUDA Toolkit version)
# The base system, never copied: glibc's libraries and the loader, and the NVIDIA driver
# (libcuda.so.1). NVRTC and cuBLAS are opened at run time from the GPU machine's own toolkit
# (gpu_checks.sh finds them); they are far too big to carry (100 MiB and 600 MiB).
# Every ELF file's RUNPATH is set to $ORIGIN/<the way to lib/> (patchelf), so the bundle
# works from any folder. It is also packed into <BUNDLE_DIR>-pack/bundle.tar.gz, which must
# stay within 64 MiB, the most the device tool carries.
set -euo pipefail

usage() {
  echo "usage: make_gpu_bundle.sh [--jobs N] [--from-build BUILD_DIR] [BUNDLE_DIR]" >&2
  exit 2
}
fail() {
  echo "make_gpu_bundle.sh: $*" >&2
  exit 1
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
from_build=""
jobs="$(nproc)"
bundle=""
while [ $# -gt 0 ]; do
  case "$1" in
    --from-build)
      [ $# -ge 2 ] || usage
      from_build="$2"
      shift 2
      ;;
    --jobs | -j)
      [ $# -ge 2 ] || usage
      jobs="$2"
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
bundle="${bundle:-$root/gpu-bundle}"
limit_bytes=$((64 * 1024 * 1024))

for tool in cmake patchelf readelf objdump ldd; do
  command -v "$tool" >/dev/null 2>&1 ||
    fail "$tool not found; install it (Debian: bash cmake/bootstrap.sh installs patchelf and binutils)"
done

if [ -n "$from_build" ]; then
  build="$(cd "$from_build" && pwd)" || fail "no build folder $from_build"
else
  build="$root/build/release"
  echo "==> configuring and building the release preset (target backplane_gpu_bundle)"
  (cd "$root" && cmake --preset release >/dev/null)
  cmake --build "$build" -j "$jobs" --target backplane_gpu_bundle
fi
cache="$build/CMakeCache.txt"
[ -f "$cache" ] || fail "$build is not a CMake build folder (no CMakeCache.txt)"
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$cache"; }
for v in BACKPLANE_SANITIZE BACKPLANE_TSAN; do
  case "$(cache_value "$v")" in
    ON | TRUE | 1)
      fail "$build is built with $v; its programs need the sanitizer's runtime. Bundle the release preset (build/release)"
      ;;
  esac
done
[ "$(cache_value CMAKE_INSTALL_LIBDIR)" = lib ] ||
  fail "$build installs libraries into '$(cache_value CMAKE_INSTALL_LIBDIR)', not lib; the bundle (and the cuda tests' lookup beside their program) needs lib"
grep -q "^BACKPLANE_BUILD_TESTS:BOOL=ON" "$cache" ||
  fail "$build is configured without tests (BACKPLANE_BUILD_TESTS=OFF); the bundle carries the cuda tests"
[ -f "$build/lib/backplane/plugins/libbackplane_cuda.so" ] ||
  fail "$build has no cuda plugin (lib/backplane/plugins/libbackplane_cuda.so): is the CUDA Toolkit installed, and the tree built (cmake --build $build --target backplane_gpu_bundle)?"

# A folder that is not empty is replaced only when it is an earlier bundle.
if [ -e "$bundle" ]; then
  if [ -n "$(ls -A "$bundle")" ] && [ ! -f "$bundle/GLIBC_NEEDED" ]; then
    fail "$bundle exists and is not a GPU bundle (no GLIBC_NEEDED); choose another folder"
  fi
  rm -rf "$bundle"
fi
mkdir -p "$bundle"
bundle="$(cd "$bundle" && pwd)"

echo "==> installing $build into $bundle"
cmake --install "$build" --prefix "$bundle" >/dev/null
cmake --install "$build" --prefix "$bundle" --component gpu_bundle >/dev/null

# What a GPU run does not need: headers, static libraries, CMake and pkg-config files, the
# example sources, and the plugins other than cpu, cuda, vulkan, remote and the layers (OpenCL's ICD loader is not
# carried; the vulkan plugin carries shaderc inside it and Debian's Vulkan loader beside it,
# for gpu_checks.sh's vulkan steps on the GPU's own Vulkan driver).
rm -rf "$bundle/include" "$bundle/lib/cmake" "$bundle/lib/pkgconfig" \
  "$bundle/share/backplane/examples"
rm -f "$bundle"/lib/*.a
for f in "$bundle"/lib/backplane/plugins/*; do
  case "$(basename "$f")" in
    libbackplane_cpu.so | cpu.bpplugin.json | libbackplane_cuda.so | cuda.bpplugin.json) ;;
    libbackplane_vulkan.so | vulkan.bpplugin.json) ;;
    libbackplane_remote.so | remote.bpplugin.json) ;;
    # The layers (docs/layer-guide.md): the catalog runs under validation on the GPU too.
    libbackplane_validation.so | validation.bpplugin.json) ;;
    libbackplane_trace.so | trace.bpplugin.json | libbackplane_faults.so | faults.bpplugin.json) ;;
    *) rm -rf "$f" ;;
  esac
done
for f in bin/backplane bin/backplane-conformance bin/cuda_plugin_test bin/cuda_gpu_test \
  lib/libbackplane.so.1 lib/backplane/plugins/libbackplane_cpu.so \
  lib/backplane/plugins/cpu.bpplugin.json lib/backplane/plugins/libbackplane_cuda.so \
  lib/backplane/plugins/cuda.bpplugin.json share/backplane/kernels/matmul.bpir; do
  [ -e "$bundle/$f" ] || fail "the bundle lacks $f; build it first (cmake --build $build --target backplane_gpu_bundle)"
done
[ -e "$bundle/bin/bench_cuda" ] ||
  echo "note: no bench_cuda (the build has BACKPLANE_BUILD_BENCHMARKS off): the bundle has no benchmark"

# GLVND's dispatch libraries, for the vulkan steps: NVIDIA's Vulkan driver (libGLX_nvidia.so.0)
# needs them, and a GPU machine without a desktop may lack them. In lib/glvnd/, which only the
# vulkan steps put on the loader's path (gpu_checks.sh), never the cuda ones.
if [ -e "$bundle/lib/backplane/plugins/libbackplane_vulkan.so" ]; then
  mkdir -p "$bundle/lib/glvnd"
  for name in libGLdispatch.so.0 libEGL.so.1 libGLX.so.0 libOpenGL.so.0 libGL.so.1 libGLESv2.so.2; do
    path="$(ldconfig -p | awk -v n="$name" '$1 == n && /x86-64/ {print $NF; exit}')"
    if [ -n "$path" ]; then
      cp -L "$path" "$bundle/lib/glvnd/$name"
      chmod 0755 "$bundle/lib/glvnd/$name"
    else
      echo "note: no $name here (Debian: libglvnd0, libegl1, libglx0, libopengl0, libgl1, libgles2): the bundle's vulkan steps rely on the GPU machine's own"
    fi
  done
fi

# The ELF files of the bundle (not symlinks: the library links point at them).
elf_files() {
  local f
  find "$bundle" -type f | sort | while read -r f; do
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = "177ELF" ] && echo "$f"
  done
  return 0
}

# The base system: glibc's libraries and the loader, and the NVIDIA driver's.
base_lib_re='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libmvec\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so|libanl\.so|libnsl\.so|libBrokenLocale\.so|libcuda\.so|libnvidia-)'

# Copy every library an ELF file here needs (ldd: the whole closure) that is neither in the
# bundle nor base, into lib/ under the name it is needed by. Twice more for what the copies
# need, though ldd's closure leaves nothing for the second pass.
for pass in 1 2 3; do
  copied=0
  while read -r f; do
    while read -r name arrow path _; do
      [ "$arrow" = "=>" ] || continue
      [[ "$name" =~ $base_lib_re ]] && continue
      [ "$path" = "not" ] && fail "$f needs $name, which is found neither in the bundle nor on this machine"
      case "$path" in "$bundle"/*) continue ;; esac
      [ -e "$bundle/lib/$name" ] && continue
      # GLVND's libraries find each other in lib/glvnd (their rpath, below): not copied twice.
      case "$f" in "$bundle/lib/glvnd/"*) [ -e "$bundle/lib/glvnd/$name" ] && continue ;; esac
      cp -L "$path" "$bundle/lib/$name"
      chmod 0755 "$bundle/lib/$name"
      echo "    copied $path -> lib/$name"
      copied=$((copied + 1))
    done < <(ldd "$f" 2>/dev/null || true)
  done < <(elf_files)
  [ "$copied" -eq 0 ] && break
  [ "$pass" -lt 3 ] || fail "libraries were still being copied after 3 passes"
done

# Debug information stays here (libbackplane is built with -g for the ABI check, cmake/abi/,
# which alone would make the bundle 17 MiB larger); symbols stay, so backtraces on the GPU
# machine still name functions.
while read -r f; do
  strip --strip-debug "$f"
done < <(elf_files)

# Every ELF file finds lib/ from where it is: $ORIGIN, $ORIGIN/../lib, $ORIGIN/../.. ...
while read -r f; do
  rel="$(realpath --relative-to="$(dirname "$f")" "$bundle/lib")"
  if [ "$rel" = . ]; then rpath="\$ORIGIN"; else rpath="\$ORIGIN/$rel"; fi
  case "$f" in "$bundle/lib/glvnd/"*) rpath="\$ORIGIN:$rpath" ;; esac
  patchelf --set-rpath "$rpath" "$f"
done < <(elf_files)

# The newest glibc symbol version any ELF file needs; the GPU machine's glibc must be at least
# that (gpu_checks.sh compares).
glibc_needed="$(elf_files | xargs objdump -T 2>/dev/null | grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' |
  sed 's/^GLIBC_//' | sort -uV | tail -n 1)"
[ -n "$glibc_needed" ] || fail "found no GLIBC_ symbol version in the bundle's ELF files"
newest_users="$(elf_files | while read -r f; do
  # grep reads all of objdump's output (no -q): an early exit would be a SIGPIPE to pipefail.
  if objdump -T "$f" 2>/dev/null | grep -E "GLIBC_${glibc_needed//./\\.}([^.0-9]|$)" >/dev/null; then
    echo "${f#"$bundle"/}"
  fi
done | tr '\n' ' ')"
echo "$glibc_needed" >"$bundle/GLIBC_NEEDED"
# What the bundle needs without its C++ runtime, and the symbol versions the rest needs of
# that runtime: where the GPU machine's glibc is too old for the bundle's libstdc++ but its
# own libstdc++ and libgcc_s have those versions, gpu_checks.sh uses the machine's.
cxx_runtime_re='/lib/(libstdc\+\+\.so\.6|libgcc_s\.so\.1)$'
glibc_needed_own="$(elf_files | grep -vE "$cxx_runtime_re" | xargs objdump -T 2>/dev/null |
  grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' | sed 's/^GLIBC_//' | sort -uV | tail -n 1)"
# needs_of LIB: the versions the bundle's other ELF files need of LIB (readelf's version needs).
needs_of() {
  elf_files | grep -vE "$cxx_runtime_re" | xargs readelf -V 2>/dev/null |
    awk -v lib="$1" '{for (i = 1; i < NF; i++) if ($i == "File:") f = ($(i + 1) == lib)}
      f && $2 == "Name:" {print $3}' | sort -uV | tr '\n' ' '
}

cp "$root/tests/plugins/cuda/gpu_checks.sh" "$bundle/gpu_checks.sh"
cp "$root/tests/plugins/cuda/gpu_xfail.txt" "$bundle/gpu_xfail.txt"
chmod 0755 "$bundle/gpu_checks.sh"
# The toolkit the plugin and bench_cuda were built against: gpu_checks.sh prefers NVRTC and
# cuBLAS of the same major on the GPU machine.
nvcc="$(cache_value CUDAToolkit_NVCC_EXECUTABLE)"
toolkit_version="$("${nvcc:-nvcc}" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9.]*\).*/\1/p')"
toolkit_version="${toolkit_version:-unknown}"
{
  echo "commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine=$(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release 2>/dev/null), $(getconf GNU_LIBC_VERSION)"
  echo "cuda_toolkit=$toolkit_version"
  echo "glibc_needed=$glibc_needed"
  echo "glibc_needed_without_cxx_runtime=$glibc_needed_own"
  echo "needs_of_libstdcxx=$(needs_of libstdc++.so.6)"
  echo "needs_of_libgcc_s=$(needs_of libgcc_s.so.1)"
} >"$bundle/BUNDLE_INFO"

# Group- and other-writable files are refused by plugin discovery (docs/discovery.md).
chmod -R go-w "$bundle"

size="$(du -sb "$bundle" | cut -f1)"
echo "==> GPU bundle: $bundle"
echo "    size: $size bytes ($((size / 1024 / 1024)) MiB unpacked)"
echo "    newest glibc symbol version needed: GLIBC_$glibc_needed (by $newest_users)"
echo "    built with CUDA Toolkit $toolkit_version; NVRTC and cuBLAS come from the GPU machine's toolkit"
# The device tool carries at most 64 MiB (the working tree and the bundle together): the
# bundle also travels as one compressed archive, <bundle>-pack/bundle.tar.gz, which is what
# must fit.
pack="$bundle-pack"
rm -rf "$pack"
mkdir -p "$pack"
echo "==> packing $pack/bundle.tar.gz"
tar -C "$(dirname "$bundle")" -czf "$pack/bundle.tar.gz" "$(basename "$bundle")"
packed="$(stat -c %s "$pack/bundle.tar.gz")"
echo "    packed: $packed bytes ($((packed / 1024 / 1024)) MiB)"
if [ "$packed" -gt "$limit_bytes" ]; then
  fail "the packed bundle is $packed bytes, over the 64 MiB ($limit_bytes bytes) the device tool carries; see what is largest with: du -ab $bundle | sort -n | tail"
fi
# The device tool carries the working tree too, within the same 64 MiB.
tree="$(git -C "$root" ls-files -z 2>/dev/null | (cd "$root" && xargs -0 du -cb 2>/dev/null) |
  tail -n 1 | cut -f1 || true)"
if [ -n "$tree" ]; then
  echo "    with the working tree ($((tree / 1024 / 1024)) MiB), $(((tree + packed) / 1024 / 1024)) MiB travel to a device machine"
  [ $((tree + packed)) -le "$limit_bytes" ] ||
    echo "warning: the working tree and the packed bundle together are over the device tool's 64 MiB" >&2
fi
echo "    on a GPU machine: tar -xzf bundle.tar.gz -C DIR && bash DIR/$(basename "$bundle")/gpu_checks.sh"
echo "    or here, from the folder: bash $bundle/gpu_checks.sh   (docs/cuda.md, \"Running the GPU checks\")"
