# SPDX-License-Identifier: Apache-2.0
"""The catalog's kernels against a peer (IREE or Apache TVM) on the same device, in one run.

    bash python/bench/run_peers.sh [--peer iree|tvm] [--device cpu:0|vulkan:0] [--repeat 15]
                                   [--rounds 3]

Each side runs in a process of its own (--side), in rounds of (peer, Backplane): a runtime's
worker threads and device objects then never slow the other (on lavapipe, an IREE Vulkan device
in the process halved Backplane's softmax speed), and each round's ratio compares two runs a
minute apart on this drifting machine; the ratio printed is the median of the rounds'.

run_peers.sh puts the peer from PyPI into .peers-site (IREE: iree-base-compiler and
iree-base-runtime, about 100 MB; TVM: apache-tvm, about 100 MB), then runs this with the
Python package's venv. One peer a process: each brings its own LLVM.

For each problem, float32, on one device: every kernel of the catalog (matmul 1024x1024x1024,
softmax over 4096x1024, vector_add and saxpy over 2^22 elements, sum of 2^22 elements,
transpose of 2048x2048, conv2d of 1x64x56x56 by 64x64x3x3 with padding 1; --only picks some):
  backplane  the catalog's kernels (CPU: matmul and matmul_tiled, softmax, ...; GPU: their _gpu
             twins, with the block the tools give where the block is a parameter: the device's
             warp width, 8 threads on lavapipe), built for Target.from_device as the catalog
             ships it (no fast-math flag: a kernel that wants a fused a * b + c writes fma, as
             matmul_tiled does; --target sets another; --no-naive leaves out the naive
             matmuls); the first call's result is checked against NumPy in float64, then --repeat calls are timed
             with events (the median);
  iree       the same computation as linalg in MLIR, compiled by IREE for the device
             (llvm-cpu for cpu:0 with the host's CPU features, vulkan-spirv for vulkan:0), run
             by IREE's runtime (local-task with one worker per core, or vulkan) on inputs that
             are on the device already (iree.runtime.asdevicearray), timed around the call,
             which returns when the result is computed (the median of --repeat calls); the first
             call's result is read back and checked. (Before 2026-11-27 IREE's time included
             importing the inputs and reading the result back.)
  tvm        (CPU only; matmul, softmax, transpose and conv2d) the same computation in TVM's
             tensor expressions with the hand schedules of TVM's own tutorials, untuned: matmul
             as "How to optimize GEMM on CPU" ends (b packed in 64-column panels, 64 x 64 blocks
             of c in parallel, k split by 4 and unrolled, the block's columns vectorized, c
             through a write cache), softmax as topi.nn.softmax with its four stages computed
             per row, rows in parallel, the elementwise stages vectorized; transpose as
             topi.transpose in 16 x 16 tiles, rows of tiles in parallel, a tile's rows
             vectorized; conv2d as topi.nn.conv2d_nchw with the GEMM schedule carried over (16
             output channels by 8 or 16 columns of a row in a write cache, channels unrolled,
             columns vectorized, (batch, channel block, row) in parallel, the padded input a
             parallel stage of its own); built by tvm.compile for llvm with the host's CPU
             (llvm_get_system_cpu) and the device's cores, timed around the call and a sync.
The ratio printed is the peer's time over Backplane's: above 1, Backplane is faster.

NumPy's OpenBLAS runs single-threaded here (OPENBLAS_NUM_THREADS=1, set before NumPy is
imported, in this process and the sides): after the float64 references' matrix products its
worker threads keep spinning on sched_yield, and on this 2-core machine that made the next
kernel in the process 2 to 3 times slower, Backplane's and IREE's alike (transpose: 6 ms
instead of 2; docs/performance.md).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402  (after OPENBLAS_NUM_THREADS)

import backplane as bp  # noqa: E402
from backplane.demo import choose_variant  # noqa: E402
from backplane.demo import grid_blocks, kernel_dir, split_functions  # noqa: E402

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


VECTOR_ADD_MLIR = """
func.func @vector_add(%a: tensor<{n}xf32>, %b: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %init = tensor.empty() : tensor<{n}xf32>
  %c = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>,
                                         affine_map<(i) -> (i)>],
                        iterator_types = ["parallel"]}}
      ins(%a, %b : tensor<{n}xf32>, tensor<{n}xf32>) outs(%init : tensor<{n}xf32>) {{
    ^bb0(%ai: f32, %bi: f32, %o: f32):
      %s = arith.addf %ai, %bi : f32
      linalg.yield %s : f32
  }} -> tensor<{n}xf32>
  return %c : tensor<{n}xf32>
}}
"""

SAXPY_MLIR = """
func.func @saxpy(%alpha: f32, %x: tensor<{n}xf32>, %y: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %init = tensor.empty() : tensor<{n}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>,
                                         affine_map<(i) -> (i)>],
                        iterator_types = ["parallel"]}}
      ins(%x, %y : tensor<{n}xf32>, tensor<{n}xf32>) outs(%init : tensor<{n}xf32>) {{
    ^bb0(%xi: f32, %yi: f32, %o: f32):
      %m = arith.mulf %alpha, %xi : f32
      %s = arith.addf %m, %yi : f32
      linalg.yield %s : f32
  }} -> tensor<{n}xf32>
  return %r : tensor<{n}xf32>
}}
"""

SUM_MLIR = """
func.func @sum(%x: tensor<{n}xf32>) -> tensor<f32> {{
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%init : tensor<f32>) -> tensor<f32>
  %r = linalg.reduce ins(%x : tensor<{n}xf32>) outs(%z : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {{
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }}
  return %r : tensor<f32>
}}
"""

TRANSPOSE_MLIR = """
func.func @transpose(%a: tensor<{m}x{n}xf32>) -> tensor<{n}x{m}xf32> {{
  %init = tensor.empty() : tensor<{n}x{m}xf32>
  %t = linalg.transpose ins(%a : tensor<{m}x{n}xf32>) outs(%init : tensor<{n}x{m}xf32>)
                        permutation = [1, 0]
  return %t : tensor<{n}x{m}xf32>
}}
"""

CONV2D_MLIR = """
func.func @conv2d(%x: tensor<{b}x{ci}x{h}x{w}xf32>, %f: tensor<{co}x{ci}x{kh}x{kw}xf32>)
    -> tensor<{b}x{co}x{h}x{w}xf32> {{
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, {pad}, {pad}] high[0, 0, {pad}, {pad}] {{
    ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
      tensor.yield %zero : f32
  }} : tensor<{b}x{ci}x{h}x{w}xf32> to tensor<{b}x{ci}x{hp}x{wp}xf32>
  %init = tensor.empty() : tensor<{b}x{co}x{h}x{w}xf32>
  %z = linalg.fill ins(%zero : f32) outs(%init : tensor<{b}x{co}x{h}x{w}xf32>)
      -> tensor<{b}x{co}x{h}x{w}xf32>
  %y = linalg.conv_2d_nchw_fchw {{dilations = dense<1> : tensor<2xi64>,
                                  strides = dense<1> : tensor<2xi64>}}
      ins(%p, %f : tensor<{b}x{ci}x{hp}x{wp}xf32>, tensor<{co}x{ci}x{kh}x{kw}xf32>)
      outs(%z : tensor<{b}x{co}x{h}x{w}xf32>) -> tensor<{b}x{co}x{h}x{w}xf32>
  return %y : tensor<{b}x{co}x{h}x{w}xf32>
}}
"""


def iree_mlir(problem, inputs):
    """The problem as linalg in MLIR, for the shapes of its inputs."""
    if problem == "matmul":
        a, b = inputs
        return MATMUL_MLIR.format(m=a.shape[0], n=b.shape[1], k=a.shape[1])
    if problem == "softmax":
        return SOFTMAX_MLIR.format(r=inputs[0].shape[0], c=inputs[0].shape[1])
    if problem == "vector_add":
        return VECTOR_ADD_MLIR.format(n=inputs[0].size)
    if problem == "saxpy":
        return SAXPY_MLIR.format(n=inputs[1].size)
    if problem == "sum":
        return SUM_MLIR.format(n=inputs[0].size)
    if problem == "transpose":
        return TRANSPOSE_MLIR.format(m=inputs[0].shape[0], n=inputs[0].shape[1])
    x, f = inputs
    b, ci, h, w = x.shape
    co, _, kh, kw = f.shape
    pad = CONV_PAD
    return CONV2D_MLIR.format(b=b, ci=ci, h=h, w=w, co=co, kh=kh, kw=kw, pad=pad, hp=h + 2 * pad,
                              wp=w + 2 * pad)


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
    return ctx.modules.module[name], config


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


def time_iree(fn, config, inputs, repeat):
    """The median time of a call on inputs already on the device (IREE's call returns when the
    result is computed), and the first call's result, read back."""
    import iree.runtime as rt
    # A scalar as a Python float: IREE takes a NumPy scalar for an array.
    args = [rt.asdevicearray(config.device, v) if isinstance(v, np.ndarray) else float(v)
            for v in inputs]
    out = to_host(fn(*args))  # also the warm-up: first-use allocations, pipeline creation
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
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


def tvm_transpose(m, n, cores):
    """topi.transpose of an m x n matrix with the schedule of TVM's CPU tutorials: the output
    split into 16 x 16 tiles, the rows of tiles in parallel, a tile's rows vectorized."""
    import tvm
    from tvm import s_tir, te, topi
    a_t = te.placeholder((m, n), "float32", name="A")
    sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func(
        [a_t, topi.transpose(a_t, (1, 0))])}))
    i, j = sch.get_loops(sch.get_sblock("T_transpose"))
    io, ii = sch.split(i, [None, 16])
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(io, jo, ii, ji)
    sch.parallel(io)
    sch.vectorize(ji)
    return tvm_function(sch.mod, cores)


def tvm_conv2d(x_shape, f_shape, pad, cores):
    """topi.nn.conv2d_nchw (stride 1, zero padding `pad`) with the schedule of TVM's GEMM
    tutorial carried over: a block of 16 output channels by vw columns of a row accumulated in a
    write cache (channels unrolled, columns vectorized), the input channels and taps outside
    it, (batch, channel block, row) in parallel; the padded input a stage of its own, its
    (batch, channel) planes in parallel."""
    import tvm
    from tvm import s_tir, te, topi
    x_t = te.placeholder(x_shape, "float32", name="X")
    f_t = te.placeholder(f_shape, "float32", name="F")
    y_t = topi.nn.conv2d_nchw(x_t, f_t, 1, pad, 1)
    sch = s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([x_t, f_t, y_t])}))
    conv = sch.get_sblock(y_t.op.name)
    cache = sch.cache_write(conv, 0, "global")
    b, co, oh, ow, rc, ry, rx = sch.get_loops(conv)
    w = x_shape[3]
    vw = 16 if w % 16 == 0 else 8 if w % 8 == 0 else 1
    coo, coi = sch.split(co, [None, 16])
    owo, owi = sch.split(ow, [None, vw])
    sch.reorder(b, coo, oh, owo, rc, ry, rx, coi, owi)
    sch.reverse_compute_at(cache, owo)
    sch.unroll(coi)
    sch.vectorize(owi)
    sch.parallel(sch.fuse(b, coo, oh))
    sch.decompose_reduction(conv, rc)
    sch.vectorize(sch.get_loops(cache)[-1])
    pad_stage = y_t.op.input_tensors[0].op.name
    pb, pc, _ph, _pw = sch.get_loops(sch.get_sblock(pad_stage))
    sch.parallel(sch.fuse(pb, pc))
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


def time_backplane(fn, args, dev, repeat, result):
    """The first call's result (`result()` after it: a kernel that updates its output in place,
    saxpy, is checked after one call), and the median time of `repeat` calls after it."""
    fn(*args)  # also the warm-up
    out = result()
    times = []
    for _ in range(repeat):
        start, end = bp.Event(dev), bp.Event(dev)
        start.record()
        fn(*args)
        end.record()
        times.append(end.elapsed_ms(start))
    return statistics.median(times), out


def rel_error(got, want):
    got = np.asarray(got, np.float64).reshape(np.shape(want))
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


# The largest relative error (2-norm) a result may have: float32 work on random inputs lands
# far below; sum adds 2^22 floats, which a float32 accumulation (IREE's) rounds more.
TOLERANCE = {"sum": 1e-3}
CONV_PAD = 1


def backplane_target(o):
    """--target, else the catalog's Target for the device as it ships (Target.from_device): no
    fast-math flag is added, so a * b + c is fused only where a kernel writes fma."""
    if o.target:
        return bp.Target(o.target)
    return bp.Target.from_device(bp.Device(o.device))


PROBLEMS = ["matmul", "softmax", "vector_add", "saxpy", "sum", "transpose", "conv2d"]


def problems(o):
    """The inputs and float64 references of the problems --only picks, the same in every
    process (a fixed seed): {problem: (inputs, reference)}."""
    rng = np.random.default_rng(2112)
    f32, f64 = np.float32, np.float64
    out = {}
    s = o.size
    a = rng.uniform(-1, 1, (s, s)).astype(f32)
    b = rng.uniform(-1, 1, (s, s)).astype(f32)
    out["matmul"] = ((a, b), a.astype(f64) @ b)
    r, cols = 4096, 1024
    x = rng.uniform(-4, 4, (r, cols)).astype(f32)
    e = np.exp(x.astype(f64) - x.max(axis=1, keepdims=True))
    out["softmax"] = ((x,), e / e.sum(axis=1, keepdims=True))
    n = 1 << 22
    va, vb = rng.uniform(-1, 1, n).astype(f32), rng.uniform(-1, 1, n).astype(f32)
    out["vector_add"] = ((va, vb), va.astype(f64) + vb)
    alpha = f32(0.75)
    out["saxpy"] = ((alpha, va, vb), f64(alpha) * va + vb)
    xs = rng.uniform(0, 1, n).astype(f32)
    out["sum"] = ((xs,), np.array(xs.astype(f64).sum()))
    t = rng.uniform(-1, 1, (2048, 2048)).astype(f32)
    out["transpose"] = ((t,), t.T.astype(f64))
    cx = rng.uniform(-1, 1, (1, 64, 56, 56)).astype(f32)
    cf = rng.uniform(-1, 1, (64, 64, 3, 3)).astype(f32)
    padded = np.pad(cx.astype(f64), ((0, 0), (0, 0), (CONV_PAD, CONV_PAD), (CONV_PAD, CONV_PAD)))
    win = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    out["conv2d"] = ((cx, cf), np.einsum("bchwrs,ocrs->bohw", win, cf.astype(f64), optimize=True))
    return {k: v for k, v in out.items() if k in o.only}


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
            if problem == "matmul":
                make = tvm_matmul(shape[0], cores)
            elif problem == "softmax":
                make = tvm_softmax(shape[0], shape[1], cores)
            elif problem == "transpose":
                make = tvm_transpose(inputs[0].shape[0], inputs[0].shape[1], cores)
            elif problem == "conv2d":
                make = tvm_conv2d(inputs[0].shape, inputs[1].shape, CONV_PAD, cores)
            else:
                continue  # no tutorial schedule to take (the table shows "-")
            ms, got = time_tvm(make, list(inputs), shape, o.repeat)
        else:
            fn, config = iree_function(iree_mlir(problem, inputs), problem, o.device)
            ms, got = time_iree(fn, config, list(inputs), o.repeat)
        out[problem] = (ms, rel_error(got, want))
    return out


def run_backplane(o):
    """Backplane's times and errors: {kernel: (ms, rel. error, problem)}, and the Target."""
    dev = bp.Device(o.device)
    target = backplane_target(o)
    gpu = target.kind != "c"
    files = {}

    def kernel(file, name):
        if file not in files:
            with open(os.path.join(kernel_dir(), file), encoding="utf-8") as f:
                files[file] = split_functions(f.read())
        return bp.build(files[file][name], target)[name]

    def on_device(v):
        return bp.from_numpy(v, dev) if isinstance(v, np.ndarray) else v

    def poisoned(shape):
        return bp.from_numpy(np.full(shape, np.nan, np.float32), dev)

    # A GPU kernel's block (Case::block_param), as the tools give it (runner::DimsForDevice):
    # the device's warp (SIMD) width, 8 on lavapipe; matmul_tiled_gpu 4 warps where the warp is
    # a GPU's (32 lanes or more).
    warp = dev.attr("warp_size") or 32
    out = {}
    gpu_suffix = "_gpu" if gpu else ""
    for problem, (inputs, want) in problems(o).items():
        if problem == "matmul":
            a, b = inputs
            m, k = a.shape
            n = b.shape[1]
            # The tiled GPU matmul as the catalog runs it on this device: its variant
            # (matmul_tiled4_gpu on lavapipe; catalog.cc, "Variants").
            names = (["matmul_gpu", choose_variant("matmul_tiled_gpu", dev)] if gpu
                     else ["matmul", "matmul_tiled"])
            for name in names[1:] if o.no_naive else names:
                threads = name in ("matmul_tiled_gpu", "matmul_tiled4_gpu")
                block = [warp * 4 if warp >= 32 else warp] if threads else []
                c = poisoned((m, n))
                args = [m, n, k] + block + [on_device(a), on_device(b), c]
                ms, got = time_backplane(kernel("matmul.bpir", name), args, dev, o.repeat, c.numpy)
                out[f"{name} {s3(m, n, k)}"] = (ms, rel_error(got, want), problem)
            continue
        name = problem + gpu_suffix
        if problem == "softmax":
            name = choose_variant(name, dev) if gpu else name  # softmax_rows_gpu on lavapipe
            (x,) = inputs
            r, cols = x.shape
            y = poisoned((r, cols))
            args = [r, cols] + ([warp] if gpu else []) + [on_device(x), y]
            what, result = f"{name} {r}x{cols}", y.numpy
        elif problem == "vector_add":
            va, vb = inputs
            c = poisoned(va.shape)
            args = [va.size, on_device(va), on_device(vb), c]
            what, result = f"{name} {va.size}", c.numpy
        elif problem == "saxpy":
            alpha, x, y0 = inputs
            y = on_device(y0.copy())
            args = [x.size, float(alpha), on_device(x), y]
            what, result = f"{name} {x.size}", y.numpy
        elif problem == "sum":
            (x,) = inputs
            total = poisoned((1,))
            args = [x.size] + ([grid_blocks(dev)] if gpu else []) + [on_device(x), total]
            what, result = f"{name} {x.size}", total.numpy
        elif problem == "transpose":
            (a,) = inputs
            m, n = a.shape
            t = poisoned((n, m))
            args = [m, n, on_device(a), t]
            what, result = f"{name} {m}x{n}", t.numpy
        else:  # conv2d
            x, f = inputs
            batch, c_in, h, w = x.shape
            c_out, _, kh, kw = f.shape
            y = poisoned((batch, c_out, h, w))
            args = [batch, c_in, c_out, h, w, kh, kw, CONV_PAD, on_device(x), on_device(f), y]
            what, result = f"{name} {c_in}x{h}x{w}", y.numpy
        ms, got = time_backplane(kernel(problem + ".bpir", name), args, dev, o.repeat, result)
        out[what] = (ms, rel_error(got, want), problem)
    return out, str(target)


def s3(m, n, k):
    return f"{m}^3" if m == n == k else f"{m}x{n}x{k}"


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu:0")
    p.add_argument("--peer", choices=["iree", "tvm"], default="iree")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--size", type=int, default=1024, help="matmul's m = n = k")
    p.add_argument("--only", default=",".join(PROBLEMS),
                   help="the problems, comma-separated (default: all: " + ",".join(PROBLEMS) +
                        ")")
    p.add_argument("--target", default=None,
                   help="the Target to build for (default: Target.from_device of --device, "
                        "the catalog's Target as it ships)")
    p.add_argument("--no-naive", action="store_true",
                   help="leave out the naive matmul and matmul_gpu (the catalog's reference "
                        "kernels: seconds a call at 1024^3)")
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
    o.only = [x for x in o.only.split(",") if x]
    unknown = [x for x in o.only if x not in PROBLEMS]
    if unknown or not o.only:
        print(f"--only: unknown problem(s) {', '.join(unknown) or '(none given)'}; choose from "
              f"{', '.join(PROBLEMS)}", file=sys.stderr)
        return 2
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
        e1 = max(mine["results"][what][1] for _, mine in rounds)
        ours_ms = statistics.median(ours)
        flops = 2.0 * o.size ** 3 if problem == "matmul" else 0
        gf = f"{flops / ours_ms / 1e6:11.1f}" if flops else f"{'':>11}"
        tol = TOLERANCE.get(problem, 1e-4)
        if problem not in rounds[0][0]:  # the peer has no version of it (TVM: no schedule)
            print(f"{what:<24} {ours_ms:>13.3f} {'-':>9} {'-':>8} {gf} {e1:>11.1e} {'-':>12}")
            if not e1 < tol:
                bad.append(what)
            continue
        peer = [theirs[problem][0] for theirs, _ in rounds]
        ratios = [p / b for p, b in zip(peer, ours)]
        e2 = max(theirs[problem][1] for theirs, _ in rounds)
        peer_ms = statistics.median(peer)
        print(f"{what:<24} {ours_ms:>13.3f} {peer_ms:>9.3f} {statistics.median(ratios):>8.2f} "
              f"{gf} {e1:>11.1e} {e2:>12.1e}  " + " ".join(f"{r:.2f}" for r in ratios))
        if not (e1 < tol and e2 < tol):
            bad.append(what)
    if bad:
        print("results off: " + ", ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
