# SPDX-License-Identifier: Apache-2.0
"""Calls of module functions with NumPy arrays and tensors.

A writable numpy.ndarray reaches a kernel through the buffer protocol, read afresh on every
call; any other DLPack producer, and a read-only array, through a DLPack capsule. Each test
compares with a NumPy reference on random data, and the NumPy path with the same array behind
an object that speaks DLPack only (the capsule path): results and errors must be the same.
"""
import gc
import sys
import threading
import weakref

import numpy as np
import pytest

import backplane as bp

KERNELS = """# backplane-ir 1
func axpy(n: int32, x: buffer<float32>[n], y: buffer<float32>[n], out: buffer<float32>[n]) {
  for i in serial(0, n) {
    out[i] = 3.0 * x[i] + y[i]
  }
}
func scale_strided(n: int32, s: int32, x: buffer<float32>[n] strides [s], out: buffer<float32>[n]) {
  for i in serial(0, n) {
    out[i] = 2.0 * x[i]
  }
}
func add2d(m: int32, n: int32, a: buffer<float32>[m, n], b: buffer<float32>[m, n], out: buffer<float32>[m, n]) {
  for i in serial(0, m) {
    for j in serial(0, n) {
      out[i, j] = a[i, j] + b[i, j]
    }
  }
}
func copy_int(n: int32, x: buffer<int32>[n], out: buffer<int32>[n]) {
  for i in serial(0, n) {
    out[i] = x[i] + 1
  }
}
"""


class DLPackOnly:
    """The same array, speaking DLPack only (how JAX or PyTorch arrays arrive)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


@pytest.fixture(scope="module")
def mod():
    return bp.build(KERNELS, bp.Target("c"))


def outcome(fn, *args):
    """('ok', None) or (exception class, message) of fn(*args)."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 -- compared below
        return type(e), str(e)
    return "ok", None


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def test_same_arrays_again_and_mutated_in_place(mod, rng):
    f = mod["axpy"]
    n = 37
    x, y, out = rand(rng, n), rand(rng, n), np.zeros(n, np.float32)
    for _ in range(20):
        f(n, x, y, out)
        np.testing.assert_allclose(out, 3 * x + y, rtol=1e-6)
        # New values in the same arrays (same address, shape, dtype): the next call sees them.
        x[:] = rand(rng, n)
        y *= -2
        out[:] = np.nan
    f(n, x, y, out)
    np.testing.assert_allclose(out, 3 * x + y, rtol=1e-6)


def test_new_array_where_a_dead_one_was(mod, rng):
    f = mod["axpy"]
    n = 16
    y, out = rand(rng, n), np.zeros(n, np.float32)
    seen_ids, seen_ptrs, reused = set(), set(), False
    for _ in range(50):
        x = rand(rng, n)
        reused |= id(x) in seen_ids or x.ctypes.data in seen_ptrs
        seen_ids.add(id(x))
        seen_ptrs.add(x.ctypes.data)
        f(n, x, y, out)
        np.testing.assert_allclose(out, 3 * x + y, rtol=1e-6)
        del x
    assert reused, "no array was made at a dead one's id or address: the test proved nothing"
    # Another dtype, shape or flag at a dead array's place: checked afresh, refused as before.
    for make in (lambda: rand(rng, n, np.float64), lambda: rand(rng, n + 1),
                 lambda: rand(rng, 2 * n)[::2]):
        x = rand(rng, n)
        f(n, x, y, out)
        del x
        bad = make()
        got = outcome(f, n, bad, y, out)
        assert got[0] is not None and got[0] != "ok", got
        assert got == outcome(f, n, DLPackOnly(bad), y, out)
        del bad


def test_read_only_arrays(mod, rng):
    f = mod["axpy"]
    n = 8
    x, y = rand(rng, n), rand(rng, n)
    ro = np.zeros(n, np.float32)
    ro.flags.writeable = False
    # Into a parameter the kernel writes: the launch kit's error, as before (through DLPack).
    with pytest.raises(bp.InvalidArgumentError, match=r"argument 3 'out' is a read-only tensor"):
        f(n, x, y, ro)
    assert outcome(f, n, x, y, ro) == outcome(f, n, x, y, DLPackOnly(ro))
    assert not ro.any(), "a read-only array was written"
    # The same array made writable again: accepted, and written.
    ro.flags.writeable = True
    f(n, x, y, ro)
    np.testing.assert_allclose(ro, 3 * x + y, rtol=1e-6)
    # Read-only inputs are fine.
    xr = x.copy()
    xr.flags.writeable = False
    out = np.zeros(n, np.float32)
    f(n, xr, y, out)
    np.testing.assert_allclose(out, 3 * x + y, rtol=1e-6)
    # A writable view of a read-only base cannot exist; a read-only view of a writable one:
    view = x[:]
    view.flags.writeable = False
    with pytest.raises(bp.InvalidArgumentError, match="read-only"):
        f(n, y, y, view)


def test_strided_and_non_contiguous_arrays(mod, rng):
    scale, add2d = mod["scale_strided"], mod["add2d"]
    n = 11
    for step in (1, 2, 3):
        base = rand(rng, n * step)
        x = base[::step]
        out = np.zeros(n, np.float32)
        scale(n, step, x, out)
        np.testing.assert_allclose(out, 2 * x, rtol=1e-6)
        # A stride the parameter does not declare: refused the same way on both paths.
        got = outcome(scale, n, step + 1, x, out)
        assert got[0] is bp.InvalidArgumentError, got
        assert got == outcome(scale, n, step + 1, DLPackOnly(x), out)
    # Negative strides: whatever the kit says, both paths say it.
    x = rand(rng, n)[::-1]
    out = np.zeros(n, np.float32)
    got = outcome(scale, n, -1, x, out)
    out2 = np.zeros(n, np.float32)
    assert got == outcome(scale, n, -1, DLPackOnly(x), out2)
    if got[0] == "ok":
        np.testing.assert_allclose(out, 2 * x, rtol=1e-6)
        np.testing.assert_array_equal(out, out2)
    # 2-D: a transposed (Fortran-order) array into a compact parameter is refused; a
    # C-contiguous one and a row slice are accepted.
    m, k = 5, 7
    a, b = rand(rng, (m, k)), rand(rng, (m, k))
    out = np.zeros((m, k), np.float32)
    add2d(m, k, a, b, out)
    np.testing.assert_allclose(out, a + b, rtol=1e-6)
    at = rand(rng, (k, m)).T
    got = outcome(add2d, m, k, at, b, out)
    assert got[0] is bp.InvalidArgumentError and "strides" in got[1], got
    assert got == outcome(add2d, m, k, DLPackOnly(at), b, out)
    rows = rand(rng, (2 * m, k))[1::2]
    got = outcome(add2d, m, k, rows, b, out)
    assert got == outcome(add2d, m, k, DLPackOnly(rows), b, out)
    # Into an output that is a strided view: refused, nothing written.
    big = np.zeros((m, 2 * k), np.float32)
    got = outcome(add2d, m, k, a, b, big[:, ::2])
    assert got[0] is bp.InvalidArgumentError, got
    assert not big.any()


DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8,
          np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, ">f4", "<f8"]


@pytest.mark.parametrize("dtype", DTYPES, ids=[np.dtype(d).str for d in DTYPES])
def test_each_dtype_as_before(mod, rng, dtype):
    axpy, copy_int = mod["axpy"], mod["copy_int"]
    n = 9
    x = (rng.standard_normal(n) * 10).astype(dtype)
    for f, other in ((axpy, np.float32), (copy_int, np.int32)):
        args = [n, x] + ([rand(rng, n)] if f is axpy else []) + [np.zeros(n, other)]
        got = outcome(f, *args)
        want = outcome(f, *[DLPackOnly(a) if a is x else a for a in args])
        assert got == want
        if np.dtype(dtype) == np.dtype(other) and np.dtype(dtype).isnative:
            assert got == ("ok", None)
            ref = 3 * x + args[2] if f is axpy else x + 1
            np.testing.assert_allclose(args[-1], ref, rtol=1e-6)
        else:
            assert got[0] is not None and got[0] != "ok", got


def test_a_different_dtype_each_call(mod, rng):
    f = mod["axpy"]
    n = 6
    y, out = rand(rng, n), np.zeros(n, np.float32)
    for k in range(12):
        dtype = (np.float32, np.float64, np.int32)[k % 3]
        x = rand(rng, n, dtype)
        if dtype is np.float32:
            f(n, x, y, out)
            np.testing.assert_allclose(out, 3 * x + y, rtol=1e-6)
        else:
            with pytest.raises(bp.InvalidArgumentError,
                               match=f"has dtype {np.dtype(dtype).name}, expected float32"):
                f(n, x, y, out)


def test_arrays_and_tensors_mixed(mod, rng):
    f = mod["axpy"]
    n = 21
    x, y = rand(rng, n), rand(rng, n)
    tx = bp.from_numpy(x)
    out = bp.empty([n], "float32")
    for _ in range(3):
        f(n, tx, y, out)
        np.testing.assert_allclose(out.numpy(), 3 * x + y, rtol=1e-6)
        f(n, x, bp.from_dlpack(y), np.from_dlpack(out))
        np.testing.assert_allclose(out.numpy(), 3 * x + y, rtol=1e-6)
        y += 1


def test_calls_hold_no_reference(mod, rng):
    f = mod["axpy"]
    n = 10
    x, y, out = rand(rng, n), rand(rng, n), np.zeros(n, np.float32)
    ro = np.zeros(n, np.float32)
    ro.flags.writeable = False
    before = [sys.getrefcount(a) for a in (x, y, out, ro)]
    for _ in range(100):
        f(n, x, y, out)
        with pytest.raises(bp.InvalidArgumentError):
            f(n, x, y, ro)
        with pytest.raises(bp.InvalidArgumentError):
            f(n + 1, x, y, out)
    gc.collect()
    assert [sys.getrefcount(a) for a in (x, y, out, ro)] == before
    # An array passed once goes when its last reference does.
    z = rand(rng, n)
    alive = weakref.ref(z)
    f(n, z, y, out)
    del z
    gc.collect()
    assert alive() is None, "a call kept its array alive"
    # An array whose buffer a call holds cannot be resized during it; after the call, it can.
    w = np.zeros(n, np.float32)
    f(n, x, y, w)
    w.resize(2 * n, refcheck=False)


def test_calls_from_several_threads_stay_correct(mod):
    # With a second Python thread, calls release the GIL; with one, they may keep it.
    f = mod["axpy"]
    errors = []

    def worker(k):
        rng = np.random.default_rng(100 + k)
        for _ in range(200):
            n = int(rng.integers(1, 64))
            x, y, out = rand(rng, n), rand(rng, n), np.zeros(n, np.float32)
            f(n, x, y, out)
            if not np.allclose(out, 3 * x + y, rtol=1e-6):
                errors.append(f"thread {k}: wrong result for n={n}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    worker(99)
    for t in threads:
        t.join()
    worker(98)  # alone again
    assert not errors, errors


def test_keyword_arguments_are_refused(mod, rng):
    f = mod["axpy"]
    x = rand(rng, 4)
    with pytest.raises(TypeError, match="positional"):
        f(4, x, x, out=x.copy())


def test_a_kernel_calling_back_into_python(rng):
    # A Python function registered with Backplane, called by a kernel's call_packed while the
    # call runs (the GIL is then released around calls: see MayKeepGil in module.cc).
    ir = """# backplane-ir 1
func cb(n: int32, x: buffer<float32>[n], out: buffer<float32>[n]) {
  for i in serial(0, n) {
    call_packed("test.call.py_cb", i)
    out[i] = x[i] * 2.0
  }
}
"""
    seen = []
    bp.register_function("test.call.py_cb", lambda i: seen.append(i), allow_override=True)
    try:
        f = bp.build(ir, bp.Target("c"))["cb"]
        n = 13
        x, out = rand(rng, n), np.zeros(n, np.float32)
        done = []
        t = threading.Thread(target=lambda: (f(n, x, out), done.append(1)))
        t.start()
        t.join(timeout=30)
        assert done, "a call that calls back into Python from another thread hung"
        f(n, x, out)
        assert seen == list(range(n)) * 2
        np.testing.assert_allclose(out, 2 * x, rtol=1e-6)
    finally:
        bp.remove_function("test.call.py_cb")
