# SPDX-License-Identifier: Apache-2.0
"""DLPack exchange: NumPy (and PyTorch where installed), without copies on the CPU.

JAX has its own file, test_jax.py.
"""
import gc
import weakref

import numpy as np
import pytest

import backplane as bp
from conftest import scale_add_source


def test_numpy_to_backplane_and_back_share_memory(rng):
    a = rng.standard_normal(1000).astype(np.float32)
    t = bp.from_dlpack(a)
    assert t.device == bp.Device("cpu:0") and t.shape == (1000,) and t.dtype == "float32"
    assert t.data_ptr == a.ctypes.data, "from_dlpack copied"
    v = np.from_dlpack(t)
    assert v.ctypes.data == a.ctypes.data, "__dlpack__ copied"
    # A kernel writing the tensor writes the NumPy array.
    m = bp.build(scale_add_source(bp.Target("c")), bp.Target("c"))
    x = rng.standard_normal(1000).astype(np.float32)
    m["scale_add"](1000, x, x, t)
    np.testing.assert_array_equal(a, 3 * x)
    np.testing.assert_array_equal(v, 3 * x)


def test_exchange_is_o1_in_the_size():
    # No copy at any size: the data pointer is the producer's for 1 and for 2^24 elements.
    for n in (1, 1 << 24):
        a = np.arange(n, dtype=np.float32)
        t = bp.from_dlpack(a)
        assert t.data_ptr == a.ctypes.data
        assert np.from_dlpack(t).ctypes.data == a.ctypes.data


def test_the_tensor_keeps_the_producers_memory_alive(rng):
    a = rng.standard_normal(4096).astype(np.float64)
    want = a.copy()
    alive = weakref.ref(a)
    t = bp.from_dlpack(a)
    del a
    gc.collect()
    assert alive() is not None, "the producer's array went while the tensor used it"
    np.testing.assert_array_equal(np.from_dlpack(t), want)
    del t
    gc.collect()
    assert alive() is None, "the tensor never released the producer's array (its deleter)"


def test_read_only_arrays_stay_read_only(rng):
    a = rng.standard_normal(16).astype(np.float32)
    a.flags.writeable = False
    t = bp.from_dlpack(a)
    assert t.read_only
    with pytest.raises(bp.InvalidArgumentError, match="read-only"):
        t.copy_from(np.ones(16, np.float32))
    # Exported again (DLPack 1.x keeps the flag): NumPy sees a read-only array.
    assert not np.from_dlpack(t).flags.writeable


def test_dlpack_protocol_arguments(rng):
    a = rng.standard_normal((3, 5)).astype(np.float32)
    t = bp.from_numpy(a)
    assert t.__dlpack_device__() == (1, 0)
    cap = t.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(cap)
    legacy = t.__dlpack__()
    assert "dltensor" in repr(legacy) and "versioned" not in repr(legacy)
    copied = np.from_dlpack(t, copy=True)
    assert copied.ctypes.data != t.data_ptr
    np.testing.assert_array_equal(copied, a)
    # A capsule nobody consumed frees its tensor when it goes (no leak, no crash).
    del cap, legacy
    gc.collect()
    with pytest.raises(bp.TypeError_, match="no __dlpack__"):
        bp.from_dlpack([1, 2, 3])


def test_device_tensors_copy_to_and_from_numpy_explicitly(devices, rng):
    a = rng.standard_normal(257).astype(np.float32)
    for d in devices:
        if d.type == "cpu":
            continue
        t = bp.from_numpy(a, d)
        assert t.__dlpack_device__() == (d.type_id, d.index)
        np.testing.assert_array_equal(t.numpy(), a)
        # NumPy cannot view device memory: a copy to the CPU is asked for explicitly.
        host = np.from_dlpack(t, device="cpu", copy=True) if tuple(map(int, np.__version__.split(".")[:2])) >= (2, 1) else t.numpy()
        np.testing.assert_array_equal(host, a)
        with pytest.raises(BufferError):
            t.__dlpack__(dl_device=(1, 0), copy=False)
        moved = bp.from_dlpack(a, device=d)
        np.testing.assert_array_equal(moved.numpy(), a)


def test_pytorch_cpu_exchanges_without_a_copy(rng):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rng.standard_normal(500).astype(np.float32))
    t = bp.from_dlpack(x)
    assert t.data_ptr == x.data_ptr()
    back = torch.from_dlpack(t)
    assert back.data_ptr() == x.data_ptr()
