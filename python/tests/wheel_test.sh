#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The package users get: makes the sdist at the repository root, builds the wheel from the
# unpacked sdist, removes that build, installs the wheel into two new venvs and, in each, with
# no LD_LIBRARY_PATH, no BACKPLANE_* variable and the repository out of the way:
#   - runs the README's Python example (every device prints True; cpu:0 is one of them) and
#     python/README.md's,
#   - checks that the plugins come from that venv's site-packages and from nowhere else
#     (BACKPLANE_DEBUG=loader names every folder searched and every library found), so one
#     install never sees another's plugins, the build tree or the source tree,
#   - checks that backplane.kernel_dir() is the package's own catalog,
#   - checks that no file of the installed package names the folder it was built in.
#   bash python/tests/wheel_test.sh [PYTHON]
# PYTHON (default .venv/bin/python, which `bash cmake/bootstrap.sh python` makes) needs pip,
# scikit-build-core and nanobind (python/requirements.txt); the build goes through ccache when
# it is there. The venvs get numpy from the package index (or pip's cache).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
py="${1:-$root/.venv/bin/python}"
if ! "$py" -c "import scikit_build_core, nanobind" 2>/dev/null; then
  echo "wheel_test.sh: $py has no scikit-build-core or nanobind; pass an interpreter that has" \
    "them (pip install -r python/requirements.txt) or run bash cmake/bootstrap.sh python" >&2
  exit 2
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/backplane-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() {
  echo "wheel_test.sh: FAILED: $*" >&2
  exit 1
}

echo "==> the sdist (made at the repository root)"
(cd "$root" && "$py" -c "import sys; from scikit_build_core.build import build_sdist
print(build_sdist(sys.argv[1]))" "$work/dist") >/dev/null
sdist="$(ls "$work"/dist/backplane_runtime-*.tar.gz)"
tar -tzf "$sdist" | sed 's|^[^/]*/||' >"$work/sdist.txt"
for f in pyproject.toml CMakeLists.txt python/CMakeLists.txt python/pyproject.toml \
  python/src/module.cc python/backplane/__init__.py core/CMakeLists.txt plugins/cpu/CMakeLists.txt \
  sdk/apps/kernels/vector_add.bpir cmake/BackplanePlugin.cmake LICENSE; do
  grep -qx "$f" "$work/sdist.txt" || fail "the sdist $(basename "$sdist") has no $f"
done
if grep -q "^tests/\|^build/\|^\.venv/" "$work/sdist.txt"; then
  fail "the sdist carries tests/, build/ or .venv/: $(grep "^tests/\|^build/\|^\.venv/" \
    "$work/sdist.txt" | head -3 | tr '\n' ' ')"
fi
echo "    $(basename "$sdist"): $(wc -l <"$work/sdist.txt") files"

echo "==> the wheel, built from the unpacked sdist"
mkdir "$work/src"
tar -xzf "$sdist" -C "$work/src" --strip-components=1
if command -v ccache >/dev/null 2>&1; then
  # Relative to the unpacked tree, the paths are the repository's: its cached objects hit.
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$work/src"
fi
# The compilers and flags of cmake/bootstrap.sh's build of the package, whose objects then hit.
CC="${CC:-cc}" CXX="${CXX:-c++}" CCACHE_NOHASHDIR=1 "$py" -m pip wheel -q --disable-pip-version-check \
  --no-build-isolation --no-deps -C cmake.define.BACKPLANE_WERROR=ON "$work/src" -w "$work/wheels"
wheel="$(ls "$work"/wheels/backplane_runtime-*.whl)"
rm -rf "$work/src"
"$py" -m zipfile -l "$wheel" | awk 'NR > 1 {print $1}' >"$work/wheel.txt"
for f in backplane/__init__.py backplane/lib/libbackplane.so.1 \
  backplane/lib/backplane/plugins/libbackplane_cpu.so \
  backplane/lib/backplane/plugins/cpu.bpplugin.json \
  backplane/share/backplane/kernels/vector_add.bpir; do
  grep -qx "$f" "$work/wheel.txt" || fail "the wheel $(basename "$wheel") has no $f"
done
grep -q "^backplane/_backplane\..*\.so$" "$work/wheel.txt" || fail "the wheel has no extension"
if grep -v "^backplane/\|^backplane_runtime-.*\.dist-info/" "$work/wheel.txt" | grep -q .; then
  fail "the wheel has files outside the package: $(grep -v "^backplane/\|\.dist-info/" \
    "$work/wheel.txt" | head -3 | tr '\n' ' ')"
fi
echo "    $(basename "$wheel"): $(grep -c "/plugins/lib" "$work/wheel.txt") plugins:" \
  "$(grep -o "plugins/[a-z]*\.bpplugin\.json" "$work/wheel.txt" | sed 's|plugins/||;s|\..*||' |
    tr '\n' ' ')"

# The Python examples of README.md ("Python") and python/README.md ("Using it"), as files.
"$py" - "$root" "$work" <<'EOF'
import re, sys
for readme, section, out in (("README.md", "## Python", "example.py"),
                             ("python/README.md", "## Using it", "package_example.py")):
    text = open(f"{sys.argv[1]}/{readme}", encoding="utf-8").read()
    code = re.search(r"```python\n(.*?)```", text[text.index(section):], re.S).group(1)
    open(f"{sys.argv[2]}/{out}", "w", encoding="utf-8").write(code)
EOF

for v in a b; do
  venv="$work/venv-$v"
  echo "==> venv $v: the wheel, then the README's example"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel"
  site="$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['platlib'])")"
  site="$(cd "$site" && pwd -P)"
  pkg="$site/backplane"
  # Run from an empty folder, with nothing of this shell's search paths.
  mkdir "$work/run-$v"
  run=(env -u LD_LIBRARY_PATH -u PYTHONPATH -u BACKPLANE_PLUGIN_PATH -u BACKPLANE_PLUGIN_FILES
    -u BACKPLANE_KERNEL_DIR -u BACKPLANE_DISABLE_PLUGINS "$venv/bin/python")
  (cd "$work/run-$v" && BACKPLANE_DEBUG=loader "${run[@]}" "$work/example.py") \
    >"$work/out-$v.txt" 2>"$work/err-$v.txt" ||
    fail "the README example in venv $v: $(tail -5 "$work/err-$v.txt")"
  cat "$work/out-$v.txt" | sed 's/^/    /'
  grep -qx "cpu:0 True" "$work/out-$v.txt" || fail "venv $v: no 'cpu:0 True' from the example"
  if grep -vq " True$" "$work/out-$v.txt"; then fail "venv $v: a device did not match"; fi
  # Every folder searched and every library found is inside this venv's package.
  grep -o "searching folder [^ ]*\|discovered: library [^ ]*" "$work/err-$v.txt" |
    awk '{print $NF}' >"$work/paths-$v.txt"
  grep -q "discovered: library" "$work/err-$v.txt" || fail "venv $v: no plugin discovered"
  while read -r p; do
    case "$(realpath -m "$p")" in
      "$pkg"/lib/backplane/plugins*) ;;
      *) fail "venv $v: the loader looked outside its package ($pkg): $p" ;;
    esac
  done <"$work/paths-$v.txt"
  (cd "$work/run-$v" && "${run[@]}" "$work/package_example.py") >"$work/pkg-out-$v.txt" \
    2>&1 || fail "python/README.md's example in venv $v: $(tail -5 "$work/pkg-out-$v.txt")"
  echo "    plugins from $pkg/lib/backplane/plugins only:" \
    "$(grep -c "discovered: library" "$work/err-$v.txt") discovered"
  kdir="$(cd "$work/run-$v" && "${run[@]}" -c "import backplane; print(backplane.kernel_dir())")"
  [ "$(realpath "$kdir")" = "$pkg/share/backplane/kernels" ] ||
    fail "venv $v: kernel_dir() is $kdir, not the package's $pkg/share/backplane/kernels"
  [ "$(ls "$kdir"/*.bpir | wc -l)" = "$(ls "$root"/sdk/apps/kernels/*.bpir | wc -l)" ] ||
    fail "venv $v: $kdir does not hold every kernel of sdk/apps/kernels"
  readelf -d "$pkg"/_backplane.*.so | grep -q 'R.*PATH.*\[\$ORIGIN/lib\]' ||
    fail "venv $v: the extension's RUNPATH is not \$ORIGIN/lib"
  # No library's RUNPATH or constant data, and no text file, names the folder it was built in.
  while read -r f; do
    if file -b "$f" | grep -q "^ELF"; then
      text="$(readelf -d "$f" | grep PATH || true; readelf -p .rodata "$f" 2>/dev/null || true)"
    else
      text="$(cat "$f")"
    fi
    if grep -qF "$work/src" <<<"$text"; then fail "venv $v: $f names the build folder"; fi
  done < <(find "$pkg" -type f ! -name "*.pyc")
done
echo "==> wheel_test.sh: passed"
