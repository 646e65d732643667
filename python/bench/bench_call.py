# SPDX-License-Identifier: Apache-2.0
"""The cost of calling a module function from Python.

    .venv/bin/python python/bench/bench_call.py [--rounds 15] [--number 20000]

Each pair runs in this one process, alternating (call, baseline, call, baseline, ... with the
order swapped every round), each round timing --number calls of the bare statement
(`f(a, b, c)` on local names: no lambda around it). It reports the median per call of each
side, its spread (min-max over the rounds), the median of the rounds' ratios and the goal:
  tensors: a cpu module function (touch3, a 4-element add built for `c`) with 3
           backplane.Tensor arguments against a nanobind no-op taking the same 3 tensors
           (backplane._backplane._noop3); goal <= 2x.
  numpy:   the same function with 3 NumPy arrays against a nanobind no-op taking any 3
           objects (_noop3_any); goal <= 1 us per call.
  and, for the record: the C++ module call under the tensor call (a C++ loop,
  backplane._backplane._cpp_call_ns) and what is left for the binding, the same call while a second Python thread exists (the call then
  releases and retakes the GIL), the no-op releasing the GIL, an array that only speaks
  DLPack (taken over through a capsule per call), and from_dlpack / __dlpack__ of a cpu tensor
  at 1 and at 2^24 elements (no copy: the time must not grow with the size).
"""
import argparse
import os
import statistics
import threading
import timeit

# NumPy's OpenBLAS starts a thread per core that spins after its work: on a small machine it
# takes time from the measured loop. No BLAS runs here.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import backplane as bp  # noqa: E402

IR = """# backplane-ir 1
func touch3(a: buffer<float32>[4], b: buffer<float32>[4], c: buffer<float32>[4]) {
  for i in serial(0, 4) {
    c[i] = a[i] + b[i]
  }
}
"""


class DLPackOnly:
    """An array that speaks DLPack and nothing else (how JAX or PyTorch arrive)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def timer(fn, args, number):
    """A timeit.Timer of fn(*args) as a bare statement on local names."""
    names = ", ".join(f"x{i}" for i in range(len(args)))
    setup = f"f, {names}, = _fn_args" if args else "f = _fn_args[0]"
    return timeit.Timer(f"f({names})", setup=setup,
                        globals={"_fn_args": (fn, *args)}), number


def per_call_ns(t):
    timer_, number = t
    return timer_.timeit(number) / number * 1e9


def pair(name, call, base, rounds, goal_ratio=None, goal_ns=None):
    """Alternates call and base for `rounds` rounds; prints medians, spread, ratio, goal."""
    cs, bs, rs = [], [], []
    for r in range(rounds):
        if r % 2:
            b = per_call_ns(base)
            c = per_call_ns(call)
        else:
            c = per_call_ns(call)
            b = per_call_ns(base)
        cs.append(c)
        bs.append(b)
        rs.append(c / b)
    c, b, ratio = statistics.median(cs), statistics.median(bs), statistics.median(rs)
    goal = ""
    if goal_ratio is not None:
        goal = f"goal <= {goal_ratio}x: {'met' if ratio <= goal_ratio else 'NOT met'}"
    if goal_ns is not None:
        goal = f"goal <= {goal_ns:.0f} ns: {'met' if c <= goal_ns else 'NOT met'}"
    print(f"{name:<34} {c:7.0f} ns ({min(cs):.0f}-{max(cs):.0f})   baseline {b:5.0f} ns "
          f"({min(bs):.0f}-{max(bs):.0f})   ratio {ratio:5.2f} ({min(rs):.2f}-{max(rs):.2f})   "
          f"{goal}")
    return c, b, ratio


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--number", type=int, default=20000)
    o = p.parse_args()
    m = bp.build(IR, bp.Target("c"))
    f = m["touch3"]
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(4).astype(np.float32) for _ in range(3)]
    a, b, c = (bp.from_dlpack(x) for x in arrays)
    noop = bp._backplane._noop3
    # Older packages lack the helpers below: their lines are left out (to measure a "before").
    noop_any = getattr(bp._backplane, "_noop3_any", None)
    cpp_call_ns = getattr(bp._backplane, "_cpp_call_ns", None)
    nogil = bp._backplane._noop3_release_gil
    f(a, b, c)
    np.testing.assert_allclose(np.from_dlpack(c), arrays[0] + arrays[1])
    x, y, z = (a.copy() for a in arrays)
    f(x, y, z)
    np.testing.assert_allclose(z, x + y)
    n, rounds = o.number, o.rounds

    print(f"{rounds} alternating rounds of {n} calls each; per call: median (min-max)")
    call, base, _ = pair("call, 3 tensors vs _noop3", timer(f, (a, b, c), n),
                         timer(noop, (a, b, c), n), rounds, goal_ratio=2)
    # By elimination: the C++ call under it (a C++ loop, the arguments packed once), and what
    # is left for the binding beyond a no-op's own cost.
    if cpp_call_ns is not None:
        cpp = statistics.median(cpp_call_ns(f, (a, b, c), n) for _ in range(rounds))
        print(f"  of which the C++ module call {cpp:.0f} ns; the binding beyond the no-op "
              f"{call - cpp - base:.0f} ns; the goal with this C++ call needs the binding beyond "
              f"the no-op <= {2 * base - cpp - base:.0f} ns")
    if noop_any is None:
        noop_any = noop
    any_args = (x, y, z) if noop_any is not noop else (a, b, c)
    pair("call, 3 NumPy arrays vs _noop3_any", timer(f, (x, y, z), n // 2),
         timer(noop_any, any_args, n // 2), rounds, goal_ns=1000)
    pair("_noop3 releasing the GIL vs _noop3", timer(nogil, (a, b, c), n),
         timer(noop, (a, b, c), n), rounds)
    # A second Python thread: calls release the GIL around the kernel.
    stop = threading.Event()
    waiter = threading.Thread(target=stop.wait)
    waiter.start()
    try:
        pair("call, 3 tensors, 2 threads alive", timer(f, (a, b, c), n),
             timer(noop, (a, b, c), n), rounds)
    finally:
        stop.set()
        waiter.join()
    dx, dy, dz = (DLPackOnly(v) for v in (x, y, z))
    any_args = (dx, dy, dz) if noop_any is not noop else (a, b, c)
    pair("call, 3 DLPack-only arrays", timer(f, (dx, dy, dz), n // 4),
         timer(noop_any, any_args, n // 4), rounds)
    for size in (1, 1 << 24):
        arr = np.ones(size, np.float32)
        t = bp.from_dlpack(arr)
        imp = statistics.median(per_call_ns(timer(bp.from_dlpack, (arr,), n // 4))
                                for _ in range(5))
        exp = statistics.median(per_call_ns(timer(np.from_dlpack, (t,), n // 4))
                                for _ in range(5))
        print(f"n = {size:>9}: from_dlpack {imp:6.0f} ns, numpy.from_dlpack(tensor) {exp:6.0f} ns")


if __name__ == "__main__":
    main()
