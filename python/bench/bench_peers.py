# SPDX-License-Identifier: Apache-2.0
"""The catalog's matmul and softmax against a peer (IREE or Apache TVM) on the same device, in
one run (issue 21, items 12 and 13).

    bash python/bench/run_peers.sh [--peer iree|tvm] [--device cpu:0|vulkan:0] [--repeat 15]
                                   [--rounds 3]

Each side runs in a process of its own (--side), in rounds of (peer, Backplane): a runtime's
worker threads and device objects then never slow the other (on lavapipe, an IREE Vulkan device
in the process halved Backplane's softmax speed), and each round's ratio compares two runs a
minute apart on this drifting machine; the ratio printed is the median of the rounds'.

run_peers.sh puts the peer from PyPI into .peers-site (IREE: iree-base-compiler and
iree-base-runtime, about 100 MB; TVM: apache-tvm, about 100 MB), then runs this with the
Python package's venv. One peer a process: each brings its own LLVM.

For each problem (matmul 1024x1024x1024, softmax over 4096x1024, float32), on one device:
  backplane  the catalog's kernels (CPU: matmul and matmul_tiled, softmax; GPU: their _gpu
             twins, with blocks of the device's warp width where the block is a parameter:
             8 threads on lavapipe), built for Target.from_device (on a CPU with fast-math-contract, as IREE
             fuses a * b + c too; --target sets another), timed with events (the median of --repeat
             calls after one warm-up), each result checked against NumPy in float64;
  iree       the same computation as linalg in MLIR, compiled by IREE for the device
             (llvm-cpu for cpu:0 with the host's CPU features, vulkan-spirv for vulkan:0), run
             by IREE's runtime (local-task with one worker per core, or vulkan), timed around
             the call with the result read back (the median of --repeat calls), also checked.
  tvm        (CPU only) the same computation in TVM's tensor expressions with the hand
             schedules of TVM's own tutorials, untuned: matmul as "How to optimize GEMM on CPU"
             ends (b packed in 64-column panels, 64 x 64 blocks of c in parallel, k split by 4
             and unrolled, the block's columns vectorized, c through a write cache), softmax
             as topi.nn.softmax with its four stages computed per row, rows in parallel, the
             elementwise stages vectorized; built by tvm.compile for llvm with the host's CPU
             (llvm_get_system_cpu) and the device's cores, timed around the call and a sync.
The ratio printed is the peer's time over Backplane's: above 1, Backplane is faster.
"""
import argparse
import json
import os
import statistics
import subprocess
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


def tvm_matmul(s, cores):
    """TVM's GEMM tutorial schedule for c = a * b (s x s, s a multiple of 64): a function of
    (a, b) numpy arrays returning (call, result) for the timing loop."""
    import tvm
    from tvm import s_tir, te
    bn = 64
    a_t = te.placeholder((s, s), "float32", name="A")
    b_t = te.placeholder((s, s), "float32", name="B")
    packed = te.compute((s // bn, s, bn), lambda x, y, z: b_t[y, x * bn + z], name="packedB")
    k = te.reduce_axis((0, s), name="k")
    c_t = te.compute((s, s), lambda x, y: te.sum(
        a_t[x, k] * packed[y // bn, k, tvm.tirx.indexmod(y, bn)], axis=k), name="C")
    sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([a_t, b_t, c_t])}))
    c = sch.get_sblock("C")
    cache = sch.cache_write(c, 0, "global")
    x, y, kk = sch.get_loops(c)
    xo, xi = sch.split(x, [None, bn])
    yo, yi = sch.split(y, [None, bn])
    sch.reorder(xo, yo, xi, yi)
    sch.reverse_compute_at(cache, yo)
    ko, ki = sch.split(kk, [None, 4])
    sch.reorder(ko, xi, ki, yi)
    sch.unroll(ki)
    sch.vectorize(yi)
    sch.parallel(sch.fuse(xo, yo))
    sch.decompose_reduction(c, ko)
    sch.vectorize(sch.get_loops(cache)[-1])
    px, _py, pz = sch.get_loops(sch.get_sblock("packedB"))
    sch.vectorize(pz)
    sch.parallel(px)
    return tvm_function(sch.mod, cores)


def tvm_softmax(r, cols, cores):
    import tvm
    from tvm import s_tir, te, topi
    x_t = te.placeholder((r, cols), "float32", name="X")
    sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func(
        [x_t, topi.nn.softmax(x_t, axis=1)])}))
    i0, i1 = sch.get_loops(sch.get_sblock("T_softmax_norm"))
    for stage in ["T_softmax_expsum", "T_softmax_exp", "T_softmax_maxelem"]:
        sch.compute_at(sch.get_sblock(stage), i0)
    sch.parallel(i0)
    sch.vectorize(i1)
    sch.vectorize(sch.get_loops(sch.get_sblock("T_softmax_exp"))[-1])
    return tvm_function(sch.mod, cores)


def tvm_function(mod, cores):
    """Builds `mod` for this CPU; returns a function of numpy inputs and the output's shape that
    gives (call, result): call runs it once and waits, result reads the output."""
    import tvm
    cpu = tvm.target.codegen.llvm_get_system_cpu()
    lib = tvm.compile(mod, target=tvm.target.Target(
        {"kind": "llvm", "mcpu": cpu, "num-cores": cores}))
    dev = tvm.cpu(0)

    def prepare(inputs, out_shape):
        args = [tvm.runtime.tensor(v, dev) for v in inputs]
        args.append(tvm.runtime.tensor(np.full(out_shape, np.nan, np.float32), dev))

        def call():
            lib["main"](*args)
            dev.sync()
        return call, lambda: args[-1].numpy()
    return prepare


def time_tvm(prepare, inputs, out_shape, repeat):
    call, result = prepare(inputs, out_shape)
    call()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), result()


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


def backplane_target(o):
    if o.target:
        return bp.Target(o.target)
    attrs = json.loads(str(bp.Target.from_device(bp.Device(o.device))))
    if attrs["kind"] == "c":
        attrs["fast-math-contract"] = True
    return bp.Target(json.dumps(attrs))


def problems(o):
    """The inputs and float64 references, the same in every process (a fixed seed)."""
    rng = np.random.default_rng(2112)
    s = o.size
    a = rng.uniform(-1, 1, (s, s)).astype(np.float32)
    b = rng.uniform(-1, 1, (s, s)).astype(np.float32)
    r, cols = 4096, 1024
    x = rng.uniform(-4, 4, (r, cols)).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return {"matmul": ((a, b), a.astype(np.float64) @ b),
            "softmax": ((x,), e / e.sum(axis=1, keepdims=True))}


def run_peer(o):
    """The peer's times and errors: {problem: (ms, rel. error)}."""
    gpu = not o.device.startswith("cpu")
    cores = os.cpu_count()
    if not gpu and not o.target:
        cores = json.loads(str(backplane_target(o))).get("num-cores", cores)
    out = {}
    for problem, (inputs, want) in problems(o).items():
        shape = want.shape
        if o.peer == "tvm":
            make = tvm_matmul(shape[0], cores) if problem == "matmul" else tvm_softmax(
                shape[0], shape[1], cores)
            ms, got = time_tvm(make, list(inputs), shape, o.repeat)
        else:
            mlir = (MATMUL_MLIR.format(m=shape[0], n=shape[1], k=inputs[0].shape[1])
                    if problem == "matmul" else SOFTMAX_MLIR.format(r=shape[0], c=shape[1]))
            ms, got = time_iree(iree_function(mlir, problem, o.device), list(inputs), o.repeat)
        out[problem] = (ms, rel_error(got, want))
    return out


def run_backplane(o):
    """Backplane's times and errors: {kernel: (ms, rel. error, problem)}, and the Target."""
    dev = bp.Device(o.device)
    target = backplane_target(o)
    gpu = target.kind != "c"
    with open(os.path.join(kernel_dir(), "matmul.bpir"), encoding="utf-8") as f:
        mm = split_functions(f.read())
    with open(os.path.join(kernel_dir(), "softmax.bpir"), encoding="utf-8") as f:
        sm = split_functions(f.read())
    # A GPU kernel's block (Case::block_param): the device's warp (SIMD) width, 8 on lavapipe.
    block = [dev.attr("warp_size") or 32] if gpu else []
    cases = problems(o)
    out = {}
    (a, b), want = cases["matmul"]
    s = o.size
    for name in ["matmul_gpu", "matmul_tiled_gpu"] if gpu else ["matmul", "matmul_tiled"]:
        fn = bp.build(mm[name], target)[name]
        c = bp.from_numpy(np.full((s, s), np.nan, np.float32), dev)
        extra = block if name == "matmul_tiled_gpu" else []
        args = [s, s, s] + extra + [bp.from_numpy(a, dev), bp.from_numpy(b, dev), c]
        ms = time_backplane(fn, args, dev, o.repeat)
        out[f"{name} {s}^3"] = (ms, rel_error(c.numpy(), want), "matmul")
    (x,), want = cases["softmax"]
    r, cols = x.shape
    name = "softmax_gpu" if gpu else "softmax"
    fn = bp.build(sm[name], target)[name]
    y = bp.from_numpy(np.full((r, cols), np.nan, np.float32), dev)
    ms = time_backplane(fn, [r, cols] + block + [bp.from_numpy(x, dev), y], dev, o.repeat)
    out[f"{name} {r}x{cols}"] = (ms, rel_error(y.numpy(), want), "softmax")
    return out, str(target)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu:0")
    p.add_argument("--peer", choices=["iree", "tvm"], default="iree")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--size", type=int, default=1024, help="matmul's m = n = k")
    p.add_argument("--target", default=None,
                   help="the Target to build for (default: Target.from_device of --device, "
                        "with fast-math-contract on a CPU, as IREE contracts a * b + c to fma)")
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds of (peer, Backplane) processes; the ratio reported is the median "
                        "of the rounds' ratios")
    p.add_argument("--side", choices=["both", "backplane", "peer"], default="both",
                   help="both (default): the peer, then Backplane, each in a process of its own "
                        "on the same device (a runtime's threads and device objects never slow "
                        "the other: on lavapipe, an IREE Vulkan device in the same process "
                        "halved Backplane's softmax speed); backplane or peer: one side here, "
                        "its results as one JSON line")
    o = p.parse_args()
    if o.peer == "tvm" and not o.device.startswith("cpu"):
        print("--peer tvm: only on cpu:0 (the PyPI build of TVM has no Vulkan runtime)",
              file=sys.stderr)
        return 2
    if o.side == "peer":
        print(json.dumps(run_peer(o)))
        return 0
    if o.side == "backplane":
        ours, target = run_backplane(o)
        print(json.dumps({"results": ours, "target": target}))
        return 0

    def side(name):
        # --side last: argparse keeps the last, so a --side both given here cannot recurse.
        cmd = [sys.executable, os.path.abspath(__file__)] + sys.argv[1:] + ["--side", name]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    # Rounds of (peer, Backplane): this shared machine's speed drifts by 2x within minutes, so
    # each round's ratio compares two runs a minute apart, and the median ratio is reported.
    rounds = []
    for _ in range(o.rounds):
        theirs = side("peer")
        rounds.append((theirs, side("backplane")))
    import importlib.metadata
    package = "iree-base-compiler" if o.peer == "iree" else "apache-tvm"
    print(f"device {o.device}, target {rounds[0][1]['target']}; {o.peer} {package} "
          f"{importlib.metadata.version(package)}; each side in its own process, median of "
          f"{o.repeat} calls; {o.rounds} rounds (peer, then Backplane), medians over the rounds")
    print(f"{'problem':<24} {'backplane ms':>13} {o.peer + ' ms':>9} {o.peer + '/bp':>8} "
          f"{'bp GFLOP/s':>11} {'rel.err bp':>11} {'rel.err ' + o.peer:>12}  "
          f"{o.peer}/bp by round")
    bad = []
    for what, (_, _, problem) in rounds[0][1]["results"].items():
        ours = [mine["results"][what][0] for _, mine in rounds]
        peer = [theirs[problem][0] for theirs, _ in rounds]
        ratios = [p / b for p, b in zip(peer, ours)]
        e1 = max(mine["results"][what][1] for _, mine in rounds)
        e2 = max(theirs[problem][1] for theirs, _ in rounds)
        ours_ms, peer_ms = statistics.median(ours), statistics.median(peer)
        flops = 2.0 * o.size ** 3 if problem == "matmul" else 0
        gf = f"{flops / ours_ms / 1e6:11.1f}" if flops else f"{'':>11}"
        print(f"{what:<24} {ours_ms:>13.3f} {peer_ms:>9.3f} {statistics.median(ratios):>8.2f} "
              f"{gf} {e1:>11.1e} {e2:>12.1e}  " + " ".join(f"{r:.2f}" for r in ratios))
        if not (e1 < 1e-4 and e2 < 1e-4):
            bad.append(what)
    if bad:
        print("results off: " + ", ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
