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
#   simaccel  configure sdk/apps/examples/simaccel (the copy the package installs) as a separate
#             CMake project against the moved prefix only (CMAKE_PREFIX_PATH; no include
#             path into this tree), build and
#             install it; it exports bp_plugin_init alone and the installed libbackplane the
#             C ABI alone (tests/abi/exported_symbols_test.sh); put it on
#             BACKPLANE_PLUGIN_PATH: `backplane info` lists simaccel:0,
#             `backplane demo --size small` passes every GPU kernel on simaccel:0 and every
#             CPU kernel on cpu:0, a module saved by one process runs in another, and the
#             example's own host-side test (tests/streams_events_test.cc: streams, events
#             and the stream registry through the host API) passes under its ctest.
#   host_app  the same for sdk/apps/examples/host_app, then runs it for a CPU Target and for
#             simaccel.
#   files     every file and link of the install matches a line of expected_files.txt (the
#             README's table of the install) and every line matches a file; each one that
#             does not is named.
#   components  find_package(Backplane COMPONENTS ...) from tests/install/components (a
#             project of its own, against the moved prefix): every library and every
#             installed plugin as a required component, with its imported target; optional
#             components this install lacks leave Backplane_<c>_FOUND false and fail
#             nothing; probe.cc, linked with the library components, runs vector_add on
#             cpu:0. Then a required component that is unknown, and a plugin that is not
#             installed (a copy of the prefix without the remote plugin's manifest), must
#             each fail the configure with a message naming it and saying what to do.
#
# usage: install_test.sh STEP   with these variables set (CMakeLists.txt passes them):
#   SOURCE_DIR BUILD_DIR SCRATCH CMAKE CTEST GENERATOR MAKE_PROGRAM CXX CC
#   PLUGINS      the plugins under plugins/ that this build has, space-separated
#   SKIP_REASON  when not empty, print it and exit 77 (ctest: skipped)
set -euo pipefail

step="${1:?usage: install_test.sh package|simaccel|host_app|files|components}"
if [ -n "${SKIP_REASON:-}" ]; then
  echo "install.$step skipped: $SKIP_REASON"
  exit 77
fi

prefix="$SCRATCH/prefix"  # the moved install tree
PLUGINS="${PLUGINS:-}"
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
# from the copy the package installs (share/backplane/examples/NAME, sdk/apps/examples/NAME here),
# where a third party starts from.
configure_example() {
  local name="$1" build="$SCRATCH/$1-build"
  rm -rf "$build"
  diff -rq "$SOURCE_DIR/sdk/apps/examples/$name" "$prefix/share/backplane/examples/$name" ||
    fail "the installed example $name differs from sdk/apps/examples/$name; run install.package"
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
    # A vendor's plugin, built with the installed backplane_add_plugin, exports its entry point
    # alone, and the installed libbackplane the C ABI alone (docs/abi.md, "Exported symbols").
    run simaccel-symbols bash "$SOURCE_DIR/tests/abi/exported_symbols_test.sh" \
      "$prefix/include/backplane/c_api.h" "$prefix/lib/libbackplane.so" "$plugins"
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

    # The example's host-side test, as a vendor runs it: ctest in the plugin's build folder.
    run simaccel-streams-events "$CTEST" --test-dir "$SCRATCH/simaccel-build" --verbose
    expect simaccel-streams-events "simaccel streams and events: ok" \
      "the example's streams and events test did not pass"
    ;;

  call_counter)
    # The example layer, built as a third party builds one, found through discovery.
    configure_example call_counter
    run call_counter-install "$CMAKE" --install "$SCRATCH/call_counter-build" \
      --prefix "$SCRATCH/call_counter-prefix"
    plugins="$SCRATCH/call_counter-prefix/lib/backplane/plugins"
    [ -f "$plugins/call_counter.bpplugin.json" ] || fail "the layer's install lacks its manifest"
    export BACKPLANE_PLUGIN_PATH="$plugins"
    BACKPLANE_LAYERS=call_counter run call_counter-info "$prefix/bin/backplane" info
    expect call_counter-info "call_counter +loaded" "the call_counter layer did not load"
    expect call_counter-info "layer.call_counter" "backplane info does not show layer.call_counter"
    expect call_counter-info "^  1\. call_counter$" "backplane info does not list the active layer"
    BACKPLANE_LAYERS=call_counter:out=stdout run call_counter-demo "$prefix/bin/backplane" demo \
      --size small --repeat 1
    expect call_counter-demo " passed, 0 failed on [0-9]+ device" "the demo failed under the layer"
    expect call_counter-demo "^call_counter: cpu alloc_data_space [1-9][0-9]* calls" \
      "the layer did not count the demo's allocations on cpu"
    expect call_counter-demo "^call_counter: [1-9][0-9]* module function calls" \
      "the layer did not count the demo's kernel calls"
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

  files)
    list="$SOURCE_DIR/tests/install/expected_files.txt"
    patterns=()
    while IFS= read -r line; do
      line="${line%%#*}"
      line="${line%"${line##*[! ]}"}"
      [ -n "$line" ] || continue
      if [[ "$line" == *"{plugin}"* ]]; then
        for p in $PLUGINS; do patterns+=("${line//\{plugin\}/$p}"); done
      else
        patterns+=("$line")
      fi
    done <"$list"
    mapfile -t files < <(cd "$prefix" && find . -mindepth 1 ! -type d | sed 's|^\./||' | LC_ALL=C sort)
    [ "${#files[@]}" -gt 0 ] || fail "the install in $prefix is empty; run install.package"
    errors=0
    declare -A used=()
    for f in "${files[@]}"; do
      hit=""
      for pat in "${patterns[@]}"; do
        # shellcheck disable=SC2053  # $pat is a pattern on purpose
        if [[ "$f" == $pat ]]; then
          hit=1
          used["$pat"]=1
        fi
      done
      if [ -z "$hit" ]; then
        echo "unexpected: $f" >&2
        errors=$((errors + 1))
      fi
    done
    for pat in "${patterns[@]}"; do
      if [ -z "${used[$pat]:-}" ]; then
        echo "missing: nothing in the install matches '$pat'" >&2
        errors=$((errors + 1))
      fi
    done
    if [ "$errors" -gt 0 ]; then
      fail "$errors difference(s) between the default install and $list (above). A file that
belongs in the install goes into that list and into the README's table (\"Installing\"); one
that does not (a test program, a helper) needs COMPONENT <name> EXCLUDE_FROM_ALL on its
install() rule before any artifact kind, as tests/install/CMakeLists.txt does for the GPU
bundle. A missing one: its install() rule was lost, or the list names what is no longer built."
    fi
    echo "${#files[@]} files, each listed in $list"
    ;;

  components)
    src="$SOURCE_DIR/tests/install/components"
    build="$SCRATCH/components-build"
    # Every plugin kind of this tree that this build lacks: asked for as optional.
    absent=(nosuchplugin)
    for p in cpu opencl vulkan cuda remote; do
      [[ " $PLUGINS " == *" $p "* ]] || absent+=("$p")
    done
    required="backplane;sdk;ir;codegen;launch;kernels;runner;cli;${PLUGINS// /;}"
    optional="$(IFS=';' && echo "${absent[*]}")"
    configure() {  # configure NAME PREFIX CMAKE_ARGS...
      local name="$1" at="$2"
      shift 2
      rm -rf "$build"
      "$CMAKE" -S "$src" -B "$build" -G "$GENERATOR" -DCMAKE_MAKE_PROGRAM="$MAKE_PROGRAM" \
        -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_BUILD_TYPE=None -DCMAKE_PREFIX_PATH="$at" "$@" \
        >"$SCRATCH/$name.log" 2>&1
    }
    echo "==> components: required $required; optional $optional"
    configure components-configure "$prefix" -DREQUIRED_COMPONENTS="$required" \
      -DOPTIONAL="$optional" -DEXPECT_MISSING="$optional" ||
      { cat "$SCRATCH/components-configure.log"; fail "find_package with every component failed"; }
    cat "$SCRATCH/components-configure.log"
    expect components-configure "component runner: found \(Backplane::runner\)" \
      "the runner component was not reported found"
    expect components-configure "component cpu: found \(Backplane::plugin_cpu\)" \
      "the cpu plugin's component was not reported found"
    expect components-configure "component nosuchplugin: not found, as expected" \
      "an optional component that is not there was not reported missing"
    run components-build "$CMAKE" --build "$build" -j 2
    run components-probe "$build/components_probe"
    expect components-probe "^components probe: ok$" "the probe did not pass"

    # A required component that does not exist: the configure fails, naming it.
    echo "==> components: required ir;bogus (must fail)"
    if configure components-bogus "$prefix" -DREQUIRED_COMPONENTS="ir;bogus"; then
      cat "$SCRATCH/components-bogus.log"
      fail "find_package(Backplane REQUIRED COMPONENTS ir bogus) succeeded"
    fi
    cat "$SCRATCH/components-bogus.log"
    expect components-bogus "Required components are missing:" "no message for the missing component"
    expect components-bogus "'bogus': no such component" "the message does not name 'bogus'"
    expect components-bogus "Fix the name in find_package" "the message does not say what to do"
    expect components-bogus "This install has: backplane sdk ir codegen launch kernels runner cli" \
      "the message does not list the components there are"

    # A plugin that was not built: one of this tree's optional plugins that the build lacks,
    # or else a copy of the prefix (links) without the cuda plugin's manifest.
    at="$prefix" missing=""
    for p in cuda opencl vulkan remote; do
      if [[ " $PLUGINS " != *" $p "* ]]; then
        missing="$p"
        break
      fi
    done
    if [ -z "$missing" ]; then
      missing=cuda at="$SCRATCH/prefix-without-cuda"
      rm -rf "$at"
      cp -as "$prefix" "$at"
      rm "$at/lib/backplane/plugins/cuda.bpplugin.json"
    fi
    echo "==> components: required ir;$missing where the $missing plugin is not installed (must fail)"
    if configure components-noplugin "$at" -DREQUIRED_COMPONENTS="ir;$missing"; then
      cat "$SCRATCH/components-noplugin.log"
      fail "find_package(Backplane REQUIRED COMPONENTS $missing) succeeded without the plugin"
    fi
    cat "$SCRATCH/components-noplugin.log"
    expect components-noplugin "'$missing': the $missing plugin is not installed here" \
      "the message does not name the $missing plugin"
    expect components-noplugin "Install that SDK, rebuild and reinstall Backplane, or ask for it with OPTIONAL_COMPONENTS" \
      "the message does not say what to do"
    # As optional, the same component only reads not found.
    configure components-noplugin-optional "$at" -DREQUIRED_COMPONENTS="ir" \
      -DOPTIONAL="$missing" -DEXPECT_MISSING="$missing" || {
      cat "$SCRATCH/components-noplugin-optional.log"
      fail "an optional missing plugin failed find_package"
    }
    expect components-noplugin-optional "component $missing: not found, as expected" \
      "the optional missing plugin was not reported missing"
    [ "$at" = "$prefix" ] || rm -rf "$at"
    ;;

  *)
    fail "unknown step '$step'"
    ;;
esac
echo "install.$step: ok"
