#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The installed package, used the way a third party uses it. Three steps, each a ctest test
# (tests/install/CMakeLists.txt), each needing the one before:
#
#   package   `cmake --install` the build into a scratch prefix, MOVE the tree elsewhere,
#             then from the moved tree: no path into the source or build tree is left in
#             the package files; `backplane info` finds the cpu plugin beside the moved
#             libbackplane; `backplane demo --size small` passes; a C program builds with
#             pkg-config alone and runs.
#   simaccel  configure sdk/examples/simaccel (the copy the package installs) as a separate
#             CMake project against the moved prefix only (CMAKE_PREFIX_PATH; no include
#             path into this tree), build and
#             install it, put it on BACKPLANE_PLUGIN_PATH: `backplane info` lists simaccel:0,
#             `backplane demo --size small` passes every GPU kernel on simaccel:0 and every
#             CPU kernel on cpu:0, and a module saved by one process runs in another.
#   host_app  the same for sdk/examples/host_app, then runs it for a CPU Target and for
#             simaccel.
#
# usage: install_test.sh STEP   with these variables set (CMakeLists.txt passes them):
#   SOURCE_DIR BUILD_DIR SCRATCH CMAKE GENERATOR MAKE_PROGRAM CXX CC
#   SKIP_REASON  when not empty, print it and exit 77 (ctest: skipped)
set -euo pipefail

step="${1:?usage: install_test.sh package|simaccel|host_app}"
if [ -n "${SKIP_REASON:-}" ]; then
  echo "install.$step skipped: $SKIP_REASON"
  exit 77
fi

prefix="$SCRATCH/prefix"  # the moved install tree
# Only the moved tree may be used: no plugin or kernel folder from the environment.
unset BACKPLANE_PLUGIN_PATH BACKPLANE_KERNEL_DIR

fail() {
  echo "install.$step: FAILED: $*" >&2
  exit 1
}

# run NAME COMMAND...: runs the command, saves its output in $SCRATCH/NAME.log and shows it.
run() {
  local name="$1"
  shift
  echo "==> $*"
  if ! "$@" >"$SCRATCH/$name.log" 2>&1; then
    cat "$SCRATCH/$name.log"
    fail "'$*' exited with an error"
  fi
  cat "$SCRATCH/$name.log"
}

expect() {  # expect LOG REGEX WHAT
  grep -qE -- "$2" "$SCRATCH/$1.log" || fail "$3 (no line matching '$2' in $1.log)"
}

# configure_example NAME: configures and builds the example NAME against the moved prefix,
# from the copy the package installs (share/backplane/examples/NAME, sdk/examples/NAME here),
# where a third party starts from.
configure_example() {
  local name="$1" build="$SCRATCH/$1-build"
  rm -rf "$build"
  diff -rq "$SOURCE_DIR/sdk/examples/$name" "$prefix/share/backplane/examples/$name" ||
    fail "the installed example $name differs from sdk/examples/$name; run install.package"
  # Lean on purpose: Ninja, two jobs, no optimisation (the code that runs hot, the IR
  # interpreter and the cpu plugin's kernels, comes optimised from the package).
  run "$name-configure" "$CMAKE" -S "$prefix/share/backplane/examples/$name" -B "$build" \
    -G "$GENERATOR" -DCMAKE_MAKE_PROGRAM="$MAKE_PROGRAM" -DCMAKE_CXX_COMPILER="$CXX" \
    -DCMAKE_BUILD_TYPE=None -DCMAKE_PREFIX_PATH="$prefix"
  run "$name-build" "$CMAKE" --build "$build" -j 2
  # The compile commands name the package's headers, never this source tree's (the scratch
  # prefix may itself lie inside the source tree, under the build folder).
  local dir
  for dir in $(grep -ohE -- "(-I|-isystem )[^ ]+" "$build/build.ninja" | sed -E 's/^(-I|-isystem )//'); do
    case "$dir" in
      "$prefix"/*) ;;
      "$SOURCE_DIR"/*) fail "the $name build has the include path $dir into the source tree" ;;
    esac
  done
}

case "$step" in
  package)
    rm -rf "$SCRATCH"
    mkdir -p "$SCRATCH"
    run install "$CMAKE" --install "$BUILD_DIR" --prefix "$SCRATCH/stage"
    mv "$SCRATCH/stage" "$prefix"
    for f in bin/backplane lib/libbackplane.so lib/backplane/plugins/cpu.bpplugin.json \
      lib/backplane/plugins/libbackplane_cpu.so lib/libbackplane_ir.a \
      lib/libbackplane_codegen.a lib/libbackplane_kernels.a lib/libbackplane_runner.a \
      lib/cmake/Backplane/BackplaneConfig.cmake lib/cmake/Backplane/BackplaneConfigVersion.cmake \
      lib/cmake/Backplane/BackplaneTargets.cmake lib/cmake/Backplane/BackplanePlugin.cmake \
      lib/pkgconfig/backplane.pc include/backplane/c_api.h include/backplane/backplane.hpp \
      include/backplane/sdk/codegen.hpp include/backplane/ir/ir.hpp \
      include/backplane/codegen/c_family.hpp share/backplane/kernels/vector_add.bpir \
      share/backplane/examples/simaccel/entry.cc share/backplane/examples/host_app/main.cc \
      share/doc/backplane/LICENSE share/doc/backplane/README.md \
      share/doc/backplane/CHANGELOG.md \
      share/doc/backplane/conformance.md share/doc/backplane/security.md \
      bin/backplane-conformance; do
      [ -e "$prefix/$f" ] || fail "the install lacks $f"
    done
    # Relocatable: nothing in the package's files names where it was built or installed.
    if grep -rlE -- "$SOURCE_DIR|$SCRATCH/stage" "$prefix/lib/cmake" "$prefix/lib/pkgconfig"; then
      fail "the files above name the source, build or staging tree; use relative paths"
    fi

    run info "$prefix/bin/backplane" info
    expect info "^ +1 +$prefix/lib/backplane/plugins +install +ok" \
      "backplane info does not search the moved tree's plugin folder"
    expect info "cpu +loaded .*$prefix/lib/backplane/plugins/libbackplane_cpu.so" \
      "the cpu plugin was not loaded from the moved tree"
    # The conformance kit's help points to the installed documentation, not to a source tree.
    run conformance-help "$prefix/bin/backplane-conformance" --help
    expect conformance-help "$(cd "$prefix" && pwd -P)/share/doc/backplane/conformance.md" \
      "backplane-conformance --help does not point to the installed docs"
    run demo "$prefix/bin/backplane" demo --size small --repeat 1
    expect demo "^vector_add +cpu:0 +ok" "the demo did not pass vector_add on cpu:0"
    expect demo " passed, 0 failed" "the demo reported failures"

    export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
    [ "$(pkg-config --variable=plugindir backplane)" -ef "$prefix/lib/backplane/plugins" ] ||
      fail "pkg-config's plugindir is not the moved tree's plugin folder"
    # shellcheck disable=SC2046  # pkg-config's output is a list of flags
    run pkgconfig-cc "$CC" -std=c99 -o "$SCRATCH/pkgconfig_probe" \
      "$SOURCE_DIR/tests/install/pkgconfig_probe.c" $(pkg-config --cflags --libs backplane) \
      -Wl,-rpath,"$(pkg-config --variable=libdir backplane)"
    run pkgconfig-probe "$SCRATCH/pkgconfig_probe"
    ;;

  simaccel)
    configure_example simaccel
    run simaccel-install "$CMAKE" --install "$SCRATCH/simaccel-build" \
      --prefix "$SCRATCH/simaccel-prefix"
    plugins="$SCRATCH/simaccel-prefix/lib/backplane/plugins"
    [ -f "$plugins/simaccel.bpplugin.json" ] || fail "the plugin's install lacks its manifest"
    export BACKPLANE_PLUGIN_PATH="$plugins"

    run simaccel-info "$prefix/bin/backplane" info
    expect simaccel-info "simaccel +loaded" "the simaccel plugin did not load"
    expect simaccel-info "^  simaccel:0$" "backplane info does not list the device simaccel:0"
    expect simaccel-info "target.build.simaccel +simaccel" "target.build.simaccel is missing"

    run simaccel-demo "$prefix/bin/backplane" demo --size small --repeat 1
    for k in vector_add saxpy sum softmax matmul matmul_tiled transpose conv2d; do
      expect simaccel-demo "^$k +cpu:0 +ok" "the demo did not pass $k on cpu:0"
      expect simaccel-demo "^${k}_gpu +simaccel:0 +ok" "the demo did not pass ${k}_gpu on simaccel:0"
    done
    expect simaccel-demo " passed, 0 failed on [0-9]+ device" "the demo reported failures"

    # A module saved by one process runs in another (the loader), on a second device.
    run simaccel-build-module "$prefix/bin/backplane" build \
      "$prefix/share/backplane/kernels/matmul.bpir" --target simaccel --func matmul_tiled_gpu \
      -o "$SCRATCH/matmul_tiled_gpu.bpmod"
    SIMACCEL_DEVICES=2 run simaccel-run-module "$prefix/bin/backplane" run \
      "$SCRATCH/matmul_tiled_gpu.bpmod" --func matmul_tiled_gpu --device simaccel:1 \
      --dim m=40 --dim n=24 --dim k=33 --repeat 1
    expect simaccel-run-module "matmul_tiled_gpu on simaccel:1: ok" \
      "the saved module did not run on simaccel:1"
    ;;

  host_app)
    configure_example host_app
    app="$SCRATCH/host_app-build/host_app"
    kernels="$prefix/share/backplane/kernels"
    run host_app-c "$app" "$kernels/vector_add.bpir" vector_add 'c -opt-level=2'
    expect host_app-c "^vector_add on cpu:0: ok" "host_app did not pass vector_add on cpu:0"
    # The kernel catalog from a program outside <prefix>/bin, run from another folder: found
    # beside the moved libbackplane, never in the source tree the package was built from.
    (cd "$SCRATCH" && run host_app-catalog "$app" matmul.bpir matmul_gpu simaccel \
      --plugin-path "$SCRATCH/simaccel-prefix/lib/backplane/plugins")
    expect host_app-catalog "^kernels: $(cd "$prefix" && pwd -P)/share/backplane/kernels\$" \
      "host_app did not read the kernel catalog of the moved prefix"
    expect host_app-catalog "^matmul_gpu on simaccel:0: ok" \
      "host_app did not pass matmul_gpu from the catalog on simaccel:0"
    run host_app-simaccel "$app" "$kernels/softmax.bpir" softmax_gpu simaccel \
      --plugin-path "$SCRATCH/simaccel-prefix/lib/backplane/plugins"
    expect host_app-simaccel "^  simaccel:0 " "host_app did not list simaccel:0"
    expect host_app-simaccel "^softmax_gpu on simaccel:0: ok" \
      "host_app did not pass softmax_gpu on simaccel:0"
    ;;

  *)
    fail "unknown step '$step'"
    ;;
esac
echo "install.$step: ok"
