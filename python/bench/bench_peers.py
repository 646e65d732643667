# SPDX-License-Identifier: Apache-2.0
"""The catalog's matmul and softmax against IREE on the same device, in one run (issue 21,
items 12 and 13).

    bash python/bench/run_peers.sh [--device cpu:0|vulkan:0] [--repeat 15]

run_peers.sh makes the venv .venv-peers with the Python package and IREE's compiler and
runtime from PyPI (iree-base-compiler, iree-base-runtime; about 100 MB), then runs this.

For each problem (matmul 1024x1024x1024, softmax over 4096x1024, float32), on one device:
  backplane  the catalog's kernels (CPU: matmul and matmul_tiled, softmax; GPU: their _gpu
             twins), built for Target.from_device, timed with events (the median of --repeat
             calls after one warm-up), each result checked against NumPy in float64;
  iree       the same computation as linalg in MLIR, compiled by IREE for the device
             (llvm-cpu for cpu:0 with the host's CPU features, vulkan-spirv for vulkan:0), run
             by IREE's runtime (local-task with one worker per core, or vulkan), timed around
             the call with the result read back (the median of --repeat calls), also checked.
The ratio printed is IREE's time over Backplane's: above 1, Backplane is faster.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

import backplane as bp
from backplane.demo import kernel_dir, split_functions

MATMUL_MLIR = """
func.func @matmul(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<{m}x{n}xf32>
  %c = linalg.fill ins(%zero : f32) outs(%init : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %r = linalg.matmul ins(%a, %b : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>)
                     outs(%c : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}
"""

SOFTMAX_MLIR = """
func.func @softmax(%x: tensor<{r}x{c}xf32>) -> tensor<{r}x{c}xf32> {{
  %init = tensor.empty() : tensor<{r}x{c}xf32>
  %y = linalg.softmax dimension(1) ins(%x : tensor<{r}x{c}xf32>)
                                   outs(%init : tensor<{r}x{c}xf32>) -> tensor<{r}x{c}xf32>
  return %y : tensor<{r}x{c}xf32>
}}
"""


def iree_function(mlir, name, device):
    import iree.compiler as ic
    import iree.runtime as rt
    if device.startswith("cpu"):
        backends, args, driver = ["llvm-cpu"], ["--iree-llvmcpu-target-cpu=host"], "local-task"
    else:
        backends, args, driver = ["vulkan-spirv"], [], "vulkan"
    vmfb = ic.compile_str(mlir, target_backends=backends, extra_args=args)
    config = rt.Config(driver)
    ctx = rt.SystemContext(config=config)
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
    return ctx.modules.module[name]


def to_host(arr):
    """IREE's result in a NumPy array. On lavapipe IREE's own to_host fails (it imports the
    NumPy array's memory, which Vulkan wants aligned to minImportedHostPointerAlignment, 4096),
    so there the result goes through a staging buffer, as IREE does where import is not offered
    (the runtime's private _buffer_view and _device: a benchmark's workaround)."""
    try:
        return arr.to_host()
    except ValueError:
        from iree.runtime import BufferUsage, HalFence, MemoryType
        src, dev = arr._buffer_view.get_buffer(), arr._device
        host = dev.allocator.allocate_buffer(
            memory_type=int(MemoryType.HOST_LOCAL | MemoryType.DEVICE_VISIBLE),
            allowed_usage=int(BufferUsage.TRANSFER_TARGET | BufferUsage.MAPPING_SCOPED),
            allocation_size=src.byte_length())
        sem = dev.create_semaphore(0)
        dev.queue_copy(src, host, wait_semaphores=HalFence.create_at(sem, 0),
                       signal_semaphores=HalFence.create_at(sem, 1))
        HalFence.create_at(sem, 1).wait()
        return np.array(host.map().asarray(arr.shape, np.dtype(np.float32)))


def time_iree(fn, inputs, repeat):
    to_host(fn(*inputs))  # warm-up: first-use allocations and pipeline creation
    times = []
    out = None
    for _ in range(repeat):
        start = time.perf_counter()
        out = to_host(fn(*inputs))
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), out


def time_backplane(fn, args, dev, repeat):
    fn(*args)  # warm-up
    times = []
    for _ in range(repeat):
        start, end = bp.Event(dev), bp.Event(dev)
        start.record()
        fn(*args)
        end.record()
        times.append(end.elapsed_ms(start))
    return statistics.median(times)


def rel_error(got, want):
    return float(np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu:0")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--size", type=int, default=1024, help="matmul's m = n = k")
    o = p.parse_args()
    dev = bp.Device(o.device)
    target = bp.Target.from_device(dev)
    gpu = target.kind != "c"
    rng = np.random.default_rng(2112)
    rows = []

    with open(os.path.join(kernel_dir(), "matmul.bpir"), encoding="utf-8") as f:
        mm = split_functions(f.read())
    with open(os.path.join(kernel_dir(), "softmax.bpir"), encoding="utf-8") as f:
        sm = split_functions(f.read())

    # matmul
    s = o.size
    a = rng.uniform(-1, 1, (s, s)).astype(np.float32)
    b = rng.uniform(-1, 1, (s, s)).astype(np.float32)
    want = a.astype(np.float64) @ b
    iree_fn = iree_function(MATMUL_MLIR.format(m=s, n=s, k=s), "matmul", o.device)
    theirs, out = time_iree(iree_fn, [a, b], o.repeat)
    err_iree = rel_error(out, want)
    for name in ["matmul_gpu", "matmul_tiled_gpu"] if gpu else ["matmul", "matmul_tiled"]:
        fn = bp.build(mm[name], target)[name]
        c = bp.from_numpy(np.full((s, s), np.nan, np.float32), dev)
        args = [s, s, s, bp.from_numpy(a, dev), bp.from_numpy(b, dev), c]
        ours = time_backplane(fn, args, dev, o.repeat)
        rows.append((f"{name} {s}^3", ours, theirs, rel_error(c.numpy(), want), err_iree,
                     2.0 * s * s * s))

    # softmax
    r, cols = 4096, 1024
    x = rng.uniform(-4, 4, (r, cols)).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    name = "softmax_gpu" if gpu else "softmax"
    fn = bp.build(sm[name], target)[name]
    y = bp.from_numpy(np.full((r, cols), np.nan, np.float32), dev)
    ours = time_backplane(fn, [r, cols, bp.from_numpy(x, dev), y], dev, o.repeat)
    err_ours = rel_error(y.numpy(), want)
    iree_fn = iree_function(SOFTMAX_MLIR.format(r=r, c=cols), "softmax", o.device)
    theirs, out = time_iree(iree_fn, [x], o.repeat)
    rows.append((f"{name} {r}x{cols}", ours, theirs, err_ours, rel_error(out, want), 0))

    import importlib.metadata
    print(f"device {o.device} ({target.kind}); IREE "
          f"{importlib.metadata.version('iree-base-compiler')}; median of {o.repeat}")
    print(f"{'problem':<24} {'backplane ms':>13} {'iree ms':>9} {'iree/bp':>8} "
          f"{'bp GFLOP/s':>11} {'rel.err bp':>11} {'rel.err iree':>12}")
    for what, ours, theirs, e1, e2, flops in rows:
        gf = f"{flops / ours / 1e6:11.1f}" if flops else f"{'':>11}"
        print(f"{what:<24} {ours:>13.3f} {theirs:>9.3f} {theirs / ours:>8.2f} {gf} "
              f"{e1:>11.1e} {e2:>12.1e}")
    bad = [w for w, *_, e1, e2, _f in rows if not (e1 < 1e-4 and e2 < 1e-4)]
    if bad:
        print("results off: " + ", ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
