# SPDX-License-Identifier: Apache-2.0
"""python -m backplane demo: every catalog kernel on every device, against NumPy."""
import subprocess
import sys

import backplane as bp


def test_demo_passes_every_kernel_on_every_device(devices):
    r = subprocess.run([sys.executable, "-m", "backplane", "demo", "--size", "small",
                        "--repeat", "2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    for d in devices:
        for k in ("vector_add", "saxpy", "matmul_tiled", "softmax", "transpose", "sum"):
            name = k if d.type == "cpu" else k + "_gpu"
            if d.type == "cuda":  # the catalog's variants for CUDA devices
                name = {"vector_add_gpu": "vector_add4_gpu", "sum_gpu": "sum4_gpu",
                        "matmul_tiled_gpu": "matmul_reg_gpu"}.get(name, name)
            if d.type == "vulkan" and d.attr("device_kind") == "cpu":  # and for lavapipe
                name = {"matmul_tiled_gpu": "matmul_tiled4_gpu",
                        "softmax_gpu": "softmax_rows_gpu"}.get(name, name)
            assert any(line.split()[:3] == [name, str(d), "ok"] for line in r.stdout.splitlines()), (
                f"{name} on {d} did not pass:\n{r.stdout}")
    assert " 0 failed" in r.stdout


def test_demo_usage_errors():
    r = subprocess.run([sys.executable, "-m", "backplane", "frobnicate"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "unknown command" in r.stderr
