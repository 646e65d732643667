# SPDX-License-Identifier: Apache-2.0
"""The cost of calling a module function from Python (issue 19's performance goals).

    .venv/bin/python python/bench/bench_call.py [--repeat 7] [--number 20000]

Pairs measured in the same process, each as the median of --repeat runs of --number calls:
  call:   a cpu module function with 3 tensor arguments (backplane.Tensor) against a nanobind
          no-op function taking the same 3 tensors (backplane._backplane._noop3); goal <= 2x.
          Also the no-op releasing and retaking the GIL, as a call does.
  numpy:  the same function with 3 NumPy arrays (taken over through DLPack on every call).
  dlpack: from_dlpack and __dlpack__ of a cpu tensor at 1 and at 2^24 elements (no copy:
          the time must not grow with the size).
"""
import argparse
import statistics
import timeit

import numpy as np

import backplane as bp

IR = """# backplane-ir 1
func touch3(a: buffer<float32>[4], b: buffer<float32>[4], c: buffer<float32>[4]) {
  for i in serial(0, 4) {
    c[i] = a[i] + b[i]
  }
}
"""


def per_call_ns(stmt, number, repeat):
    times = timeit.repeat(stmt, number=number, repeat=repeat)
    return statistics.median(times) / number * 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--number", type=int, default=20000)
    o = p.parse_args()
    m = bp.build(IR, bp.Target("c"))
    f = m["touch3"]
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(4).astype(np.float32) for _ in range(3)]
    a, b, c = (bp.from_dlpack(x) for x in arrays)
    noop = bp._backplane._noop3
    f(a, b, c)
    np.testing.assert_allclose(np.from_dlpack(c), arrays[0] + arrays[1])

    call = per_call_ns(lambda: f(a, b, c), o.number, o.repeat)
    base = per_call_ns(lambda: noop(a, b, c), o.number, o.repeat)
    nogil = bp._backplane._noop3_release_gil
    base_gil = per_call_ns(lambda: nogil(a, b, c), o.number, o.repeat)
    x, y, z = arrays
    numpy_call = per_call_ns(lambda: f(x, y, z), o.number // 4, o.repeat)
    print(f"call, 3 tensors:          {call:8.0f} ns   nanobind no-op, 3 tensors: {base:6.0f} ns"
          f"   ratio {call / base:.2f} (goal <= 2)")
    print(f"the no-op releasing the GIL: {base_gil:5.0f} ns")
    print(f"call, 3 NumPy arrays:     {numpy_call:8.0f} ns   ratio to the no-op {numpy_call / base:.2f}")
    for n in (1, 1 << 24):
        arr = np.ones(n, np.float32)
        t = bp.from_dlpack(arr)
        imp = per_call_ns(lambda: bp.from_dlpack(arr), o.number // 4, o.repeat)
        exp = per_call_ns(lambda: np.from_dlpack(t), o.number // 4, o.repeat)
        print(f"n = {n:>9}: from_dlpack {imp:6.0f} ns, numpy.from_dlpack(tensor) {exp:6.0f} ns")


if __name__ == "__main__":
    main()
