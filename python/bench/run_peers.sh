#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The catalog's kernels against IREE or Apache TVM on the same device (python/bench/bench_peers.py
# says what is measured). Sets up what it needs: the Python package's venv (.venv, through
# `bash cmake/bootstrap.sh python`), and the peer from PyPI (IREE's compiler and runtime into
# .peers-site, TVM into .peers-site-tvm; git-ignored, about 100 MB each; the versions
# docs/performance.md measured against), then runs the benchmark with them on the path. Not part of the tests: it
# downloads and takes minutes.
#
#   bash python/bench/run_peers.sh [--peer iree|tvm] [--device cpu:0|vulkan:0] [--repeat N]
#                                  [--size N] [--target T] [--rounds N] [--only P,P,...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import backplane" 2>/dev/null; then
  bash cmake/bootstrap.sh python
fi
peer=iree
for ((i = 1; i <= $#; ++i)); do
  case "${!i}" in
    --peer=*) peer="${!i#--peer=}" ;;
    --peer) j=$((i + 1)); peer="${!j:-}" ;;
  esac
done
iree_version=3.13.0
tvm_version=0.27.0.post1
if [ "$peer" = iree ] &&
  ! PYTHONPATH=.peers-site .venv/bin/python -c "import iree.compiler, iree.runtime" 2>/dev/null; then
  echo "==> installing IREE $iree_version (iree-base-compiler, iree-base-runtime) into .peers-site"
  .venv/bin/python -m pip install -q --target .peers-site \
    "iree-base-compiler==$iree_version" "iree-base-runtime==$iree_version"
fi
# TVM in a folder of its own: it brings a numpy of its own, which must not shadow IREE's run.
if [ "$peer" = tvm ]; then
  if ! PYTHONPATH=.peers-site-tvm .venv/bin/python -c "import tvm" 2>/dev/null; then
    echo "==> installing Apache TVM $tvm_version (apache-tvm) into .peers-site-tvm"
    .venv/bin/python -m pip install -q --target .peers-site-tvm "apache-tvm==$tvm_version"
  fi
  PYTHONPATH="$root/.peers-site-tvm" exec .venv/bin/python python/bench/bench_peers.py "$@"
fi
PYTHONPATH="$root/.peers-site" exec .venv/bin/python python/bench/bench_peers.py "$@"
