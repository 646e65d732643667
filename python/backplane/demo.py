# SPDX-License-Identifier: Apache-2.0
"""``python -m backplane demo``: every reference kernel on every device, checked against NumPy.

For each device here, each kernel of the catalog (share/backplane/kernels/*.bpir) is built for
the device's Target (the CPU variants for a CPU target, the ``_gpu`` ones for the others), run
on random inputs and compared with a float64 NumPy reference (a kernel with variants runs the
one the catalog chooses for the device, as ``backplane demo`` does: docs/host-guide.md,
"Variants of a GPU kernel"); the table shows the function that ran and the time of one
call (the median of ``--repeat`` calls, timed with events) and whether it matched. The exit
status is 1 when a kernel failed, 0 otherwise.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from typing import Callable, Dict, List, Tuple

import numpy as np

import backplane as bp


def kernel_dir() -> str:
    """Where the reference kernels are: ``backplane.kernel_dir()``."""
    return bp.kernel_dir()


def split_functions(ir_text: str) -> Dict[str, str]:
    """The IR text of each function of a file (its header line kept), by name."""
    # The file's own version line: version 1 reads `-x` as `0 - x` (docs/ir.md, "Versions").
    version = re.search(r"(?m)^# backplane-ir (\d+)\s*$", ir_text)
    header = f"# backplane-ir {version.group(1) if version else 1}\n"
    parts = re.split(r"(?m)^(?=func )", ir_text)
    out = {}
    for part in parts[1:]:
        name = re.match(r"func (\w+)", part).group(1)
        out[name] = header + part
    return out


# name -> (make inputs, run, reference, outputs to compare, tolerance)
Case = Tuple[Callable, Callable, float]


def _cases(rng: np.random.Generator, small: bool):
    n = 1000 if small else 1 << 20
    mm = 64 if small else 256
    rows, cols = (16, 100) if small else (256, 1024)

    def f32(*shape):
        return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)

    cases = {}

    a, b = f32(n), f32(n)
    cases["vector_add"] = ((n, a, b, np.full(n, np.nan, np.float32)), lambda ins: ins[1].astype(np.float64) + ins[2], 3, 1e-6)
    x, y = f32(n), f32(n)
    cases["saxpy"] = ((n, 1.75, x, y), lambda ins: 1.75 * ins[2].astype(np.float64) + ins[3], 3, 1e-6)
    a2, b2 = f32(mm, mm + 3), f32(mm + 3, mm + 5)
    c2 = np.full((mm, mm + 5), np.nan, np.float32)
    cases["matmul_tiled"] = ((mm, mm + 5, mm + 3, a2, b2, c2), lambda ins: ins[3].astype(np.float64) @ ins[4], 5, 1e-4)
    xs = f32(rows, cols)

    def softmax_ref(ins):
        v = ins[2].astype(np.float64)
        e = np.exp(v - v.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    cases["softmax"] = ((rows, cols, xs, np.full((rows, cols), np.nan, np.float32)), softmax_ref, 3, 1e-5)
    at = f32(rows, cols)
    cases["transpose"] = ((rows, cols, at, np.full((cols, rows), np.nan, np.float32)), lambda ins: ins[2].T.astype(np.float64), 3, 0.0)
    xsum = f32(n)
    cases["sum"] = ((n, xsum, np.full(1, np.nan, np.float32)), lambda ins: np.array([ins[1].astype(np.float64).sum()]), 2, 1e-4)
    return cases


_FILES = {"vector_add": "vector_add", "saxpy": "saxpy", "matmul_tiled": "matmul",
          "softmax": "softmax", "transpose": "transpose", "sum": "sum"}


# The catalog's variants (sdk/apps/kernels/src/catalog.cc, kernels::Case::variants): GPU function ->
# (variant function, whether a device takes it), the first that a device takes replacing it.
_VARIANTS = {
    "vector_add_gpu": [("vector_add4_gpu", lambda dev: dev.type == "cuda")],
    "sum_gpu": [("sum4_gpu", lambda dev: dev.type == "cuda")],
    "softmax_gpu": [("softmax_rows_gpu",
                     lambda dev: dev.type == "vulkan" and dev.attr("device_kind") == "cpu")],
    "matmul_tiled_gpu": [("matmul_reg_gpu", lambda dev: dev.type == "cuda"),
                         ("matmul_tiled4_gpu",
                          lambda dev: dev.type == "vulkan" and dev.attr("device_kind") == "cpu")],
}


def choose_variant(name: str, dev: bp.Device) -> str:
    """The function the catalog runs for kernel function `name` on `dev`."""
    for func, selects in _VARIANTS.get(name, []):
        if selects(dev):
            return func
    return name


def grid_blocks(dev: bp.Device) -> int:
    """The blocks of a grid-wide kernel (sum_gpu's `blocks`, Case::grid_param), as
    runner::DimsForDevice gives them: 8 a multiprocessor on a GPU (a warp of 32 lanes or
    more; 1024 where it reports no count), one a compute unit on another device (64 where
    it reports none)."""
    warp = dev.attr("warp_size") or 0
    units = min(dev.attr("multi_processor_count") or 0, 1 << 16)
    if warp >= 32:
        return 8 * units if units > 0 else 1024
    return units if units > 0 else 64


def run(devices: List[bp.Device], kernels: List[str], small: bool, repeat: int,
        out=sys.stdout) -> int:
    rng = np.random.default_rng(1901)
    failed = 0
    passed = 0
    print(f"{'kernel':<20} {'device':<11} {'result':<7} {'time':>10}  detail", file=out)
    for dev in devices:
        target = bp.Target.from_device(dev)
        gpu = target.kind != "c"
        for kernel in kernels:
            name = choose_variant(kernel + ("_gpu" if gpu else ""), dev)
            with open(os.path.join(kernel_dir(), _FILES[kernel] + ".bpir"), encoding="utf-8") as f:
                funcs = split_functions(f.read())
            args, reference, out_index, tol = _cases(rng, small)[kernel]
            detail = ""
            ms = float("nan")
            try:
                module = bp.build(funcs[name], target)
                tensors = [bp.from_numpy(a, dev) if isinstance(a, np.ndarray) else a for a in args]
                fn = module[name]
                at = out_index
                block_param_at = {"softmax_gpu": 2, "softmax_rows_gpu": 2, "matmul_tiled_gpu": 3,
                                  "matmul_tiled4_gpu": 3}.get(name)
                if block_param_at is not None:
                    # Its threads a block are a parameter: the device's warp (SIMD) width,
                    # 4 warps for matmul_tiled_gpu where the warp is a GPU's (32 lanes or
                    # more), as runner::DimsForDevice gives (Case::block_warps).
                    block = dev.attr("warp_size") or 32
                    if name in ("matmul_tiled_gpu", "matmul_tiled4_gpu") and block >= 32:
                        block *= 4
                    tensors.insert(block_param_at, block)
                    at += 1
                if name in ("sum_gpu", "sum4_gpu"):
                    tensors.insert(1, grid_blocks(dev))
                    at += 1
                times = []
                for _ in range(repeat):
                    if kernel == "saxpy":  # in place: start from the inputs every time
                        tensors[3].copy_from(args[3])
                    start, end = bp.Event(dev), bp.Event(dev)
                    start.record()
                    fn(*tensors)
                    end.record()
                    times.append(end.elapsed_ms(start))
                ms = statistics.median(times)
                got = tensors[at].numpy().astype(np.float64)
                want = reference(args)
                err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
                ok = bool(np.isfinite(got).all()) and err <= tol
                detail = f"rel. error {err:.2e} (tolerance {tol:g})"
            except bp.Error as e:
                ok = False
                detail = f"{type(e).__name__}: {str(e).splitlines()[0]}"
            passed += ok
            failed += not ok
            print(f"{name:<20} {str(dev):<11} {'ok' if ok else 'FAILED':<7} {ms:>8.3f}ms  {detail}",
                  file=out)
    print(f"{passed} passed, {failed} failed", file=out)
    return 1 if failed else 0


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m backplane demo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", choices=["small", "demo"], default="demo",
                   help="input sizes (small: quick; demo: larger, default)")
    p.add_argument("-k", "--kernel", action="append", choices=sorted(_FILES),
                   help="run only this kernel (repeatable)")
    p.add_argument("-d", "--device", action="append",
                   help="run only on this device, e.g. opencl:0 (repeatable)")
    p.add_argument("--repeat", type=int, default=5, help="timed calls per kernel (default 5)")
    o = p.parse_args(argv)
    devices = [bp.Device(d) for d in o.device] if o.device else bp.devices()
    return run(devices, o.kernel or sorted(_FILES), o.size == "small", max(1, o.repeat))
