# SPDX-License-Identifier: Apache-2.0
import os

import numpy as np
import pytest

import backplane as bp

HERE = os.path.dirname(os.path.abspath(__file__))

# out = 2x + y: a CPU variant (a parallel loop) and a GPU one (blocks of 64 threads).
SCALE_ADD_CPU = """# backplane-ir 1
func scale_add(n: int32, x: buffer<float32>[n], y: buffer<float32>[n], out: buffer<float32>[n]) {
  for i in parallel(0, n) {
    out[i] = 2.0 * x[i] + y[i]
  }
}
"""
SCALE_ADD_GPU = """# backplane-ir 1
func scale_add(n: int32, x: buffer<float32>[n], y: buffer<float32>[n], out: buffer<float32>[n]) {
  for bx in thread(blockIdx.x, 0, (n + 63) / 64) {
    for tx in thread(threadIdx.x, 0, 64) {
      if (bx * 64 + tx < n) {
        out[bx * 64 + tx] = 2.0 * x[bx * 64 + tx] + y[bx * 64 + tx]
      }
    }
  }
}
"""


def scale_add_source(target: bp.Target) -> str:
    return SCALE_ADD_CPU if target.kind == "c" else SCALE_ADD_GPU


@pytest.fixture(scope="session")
def devices():
    return bp.devices()


@pytest.fixture
def rng(request):
    # A fixed seed per test: deterministic, different for each test.
    return np.random.default_rng(sum(map(ord, request.node.name)))
