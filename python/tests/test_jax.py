# SPDX-License-Identifier: Apache-2.0
"""JAX's CPU arrays and Backplane tensors share memory both ways through DLPack.

Skipped where JAX is not installed. Sharing is shown by the data pointers
(``unsafe_buffer_pointer``) and by writing through one side and reading through the other;
what cannot be shared (device memory, strides JAX does not take) is refused, saying why.
"""
import ctypes
import gc

import numpy as np
import pytest

import backplane as bp
from conftest import scale_add_source

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

# JAX's CPU dtypes (float64 needs jax_enable_x64, which the tests leave as it is).
DTYPES = ["float32", "float16", "bfloat16", "int8", "int16", "int32", "uint8", "uint32", "bool"]


def _random(rng, shape, dtype):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype in ("float32", "float16"):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == "bfloat16":
        return rng.standard_normal(shape).astype(np.float32)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


def _scale_add():
    c = bp.Target("c")
    return bp.build(scale_add_source(c), c)


@pytest.mark.parametrize("dtype", DTYPES)
def test_jax_array_to_backplane_shares_its_buffer(rng, dtype):
    want = _random(rng, (3, 5, 7), dtype)
    x = jnp.asarray(want, dtype=dtype)
    t = bp.from_dlpack(x)
    assert t.device == bp.Device("cpu:0")
    assert t.shape == (3, 5, 7) and t.dtype == str(x.dtype)
    assert t.data_ptr == x.unsafe_buffer_pointer(), "bp.from_dlpack copied JAX's buffer"
    # Read through the tensor: the bytes at its data pointer are JAX's values, and so is
    # NumPy's view of it (itself without a copy; NumPy has no bfloat16).
    assert t.nbytes == x.nbytes
    assert ctypes.string_at(t.data_ptr, t.nbytes) == np.asarray(x).tobytes()
    if dtype != "bfloat16":
        view = np.from_dlpack(t)
        assert view.ctypes.data == x.unsafe_buffer_pointer()
        np.testing.assert_array_equal(view, want)
    # And back to JAX, still the same buffer.
    back = jnp.from_dlpack(t)
    assert back.unsafe_buffer_pointer() == x.unsafe_buffer_pointer()


def test_a_kernel_reads_jax_arrays_in_place(rng):
    # The inputs are JAX's buffers, read by a Backplane kernel with no copy in between: the
    # result is the float64 reference's, rounded once.
    xs = rng.standard_normal(4097).astype(np.float32)
    ys = rng.standard_normal(4097).astype(np.float32)
    x, y = jnp.asarray(xs), jnp.asarray(ys)
    tx, ty = bp.from_dlpack(x), bp.from_dlpack(y)
    assert (tx.data_ptr, ty.data_ptr) == (x.unsafe_buffer_pointer(), y.unsafe_buffer_pointer())
    out = bp.empty([4097], "float32")
    _scale_add()["scale_add"](4097, tx, ty, out)
    want = (2.0 * xs.astype(np.float64) + ys.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(out.numpy(), want)


def test_backplane_tensor_to_jax_shares_its_memory(rng):
    out = bp.empty([64, 33], "float32")
    for from_dlpack in (jnp.from_dlpack, jax.dlpack.from_dlpack):
        y = from_dlpack(out)
        assert y.shape == (64, 33) and y.dtype == jnp.float32
        assert y.unsafe_buffer_pointer() == out.data_ptr, f"{from_dlpack.__module__} copied"
        # Write through Backplane after JAX took the tensor: JAX reads the new values.
        for _ in range(2):
            values = rng.standard_normal((64, 33)).astype(np.float32)
            out.copy_from(values)
            np.testing.assert_array_equal(np.asarray(y), values)
            # A JAX computation over the shared buffer, against float64 NumPy.
            np.testing.assert_allclose(
                float(jnp.sum(y * 2.0)), 2.0 * values.astype(np.float64).sum(), rtol=1e-5
            )


def test_a_kernel_writes_what_jax_reads(rng):
    n = 1000
    xs = rng.standard_normal(n).astype(np.float32)
    x = jnp.asarray(xs)
    out = bp.empty([n], "float32")
    y = jnp.from_dlpack(out)  # JAX holds the tensor before the kernel writes it
    _scale_add()["scale_add"](n, bp.from_dlpack(x), bp.from_dlpack(x), out)
    assert y.unsafe_buffer_pointer() == out.data_ptr
    np.testing.assert_array_equal(np.asarray(y), (3.0 * xs.astype(np.float64)).astype(np.float32))


def test_each_side_keeps_the_other_sides_memory_alive(rng):
    values = rng.standard_normal(4096).astype(np.float32)
    x = jnp.asarray(values)
    t = bp.from_dlpack(x)
    del x
    gc.collect()
    np.testing.assert_array_equal(np.from_dlpack(t), values)

    out = bp.empty([4096], "float32")
    out.copy_from(values)
    y = jnp.from_dlpack(out)
    del out
    gc.collect()
    np.testing.assert_array_equal(np.asarray(y), values)


def test_device_tensors_are_refused_and_copied_explicitly(devices, rng):
    others = [d for d in devices if d.type != "cpu"]
    if not others:
        pytest.skip("no device here besides cpu:0")
    values = rng.standard_normal(100).astype(np.float32)
    for d in others:
        t = bp.from_numpy(values, d)
        # JAX's CPU backend cannot view another device's memory: it says so, naming the type.
        with pytest.raises(TypeError, match=f"unsupported device type.*{t.__dlpack_device__()[0]}"):
            jnp.from_dlpack(t)
        # The copy to the host is asked for: then JAX shares the host tensor.
        host = t.to(bp.Device("cpu:0"))
        y = jnp.from_dlpack(host)
        assert y.unsafe_buffer_pointer() == host.data_ptr
        np.testing.assert_array_equal(np.asarray(y), values)
        # A JAX array onto the device is a copy: copy=False refuses it, naming both devices.
        x = jnp.asarray(values)
        with pytest.raises(bp.InvalidArgumentError, match=f"cpu:0, not {d}.*copy=False"):
            bp.from_dlpack(x, device=d, copy=False)
        moved = bp.from_dlpack(x, device=d)
        assert moved.device == d
        np.testing.assert_array_equal(moved.numpy(), values)


def test_strided_tensors_are_refused_by_jax_and_by_kernels(rng):
    base = rng.standard_normal(64).astype(np.float32)
    strided = bp.from_dlpack(base[::2])  # Backplane keeps the strides (no copy)
    assert strided.data_ptr == base.ctypes.data
    np.testing.assert_array_equal(strided.numpy(), base[::2])
    # JAX takes compact buffers (or transpositions) only, and says so.
    with pytest.raises(Exception, match="strid"):
        jnp.from_dlpack(strided)
    # A kernel whose parameter is compact refuses it, naming the argument and the strides.
    x = jnp.asarray(rng.standard_normal(32).astype(np.float32))
    with pytest.raises(bp.InvalidArgumentError, match="'out' has strides \\[2\\].*contiguous"):
        _scale_add()["scale_add"](32, bp.from_dlpack(x), bp.from_dlpack(x), strided)
    np.testing.assert_array_equal(base[::2], strided.numpy())  # nothing was written
