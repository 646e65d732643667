#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The catalog's kernels against IREE on the same device (python/bench/bench_peers.py says
# what is measured). Sets up what it needs: the Python package's venv (.venv, through
# `bash cmake/bootstrap.sh python`), and IREE's compiler and runtime from PyPI into .peers-site
# (git-ignored, about 100 MB; the versions issue 21 measured against), then runs the benchmark
# with them on the path. Not part of the tests: it downloads and takes minutes.
#
#   bash python/bench/run_peers.sh [--device cpu:0|vulkan:0] [--repeat N] [--size N]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import backplane" 2>/dev/null; then
  bash cmake/bootstrap.sh python
fi
iree_version=3.13.0
if ! PYTHONPATH=.peers-site .venv/bin/python -c "import iree.compiler, iree.runtime" 2>/dev/null; then
  echo "==> installing IREE $iree_version (iree-base-compiler, iree-base-runtime) into .peers-site"
  .venv/bin/python -m pip install -q --target .peers-site \
    "iree-base-compiler==$iree_version" "iree-base-runtime==$iree_version"
fi
PYTHONPATH="$root/.peers-site" exec .venv/bin/python python/bench/bench_peers.py "$@"
