# SPDX-License-Identifier: Apache-2.0
"""The Python API: devices, Targets, builds, modules, calls, registry, streams, events, errors."""
import threading

import numpy as np
import pytest

import backplane as bp
from conftest import scale_add_source


def test_devices_include_cpu_and_have_attributes(devices):
    assert bp.Device("cpu:0") in devices
    for d in devices:
        assert d.exists
        attrs = d.attrs()
        assert attrs["exist"] == 1
        assert isinstance(d.name, str) and d.name
        assert attrs["device_name"] == d.name
        assert d.attr("device_kind") in ("cpu", "gpu", "accelerator", "other")
        assert str(d) == f"{d.type}:{d.index}"
        assert bp.Device(str(d)) == d and bp.Device(d.type, d.index) == d
        assert isinstance(d.properties(), dict)


def test_list_attributes_read_again_and_again_free_nothing_twice(devices):
    # bp_array_get lends an array's elements: the binding released each string of a list
    # attribute (isa_flags, extensions) once more than it owned, which corrupted the heap; with
    # NumPy loaded the process aborted ("corrupted double-linked list") a few reads later.
    for _ in range(50):
        for d in devices:
            attrs = d.attrs()
            for value in attrs.values():
                if isinstance(value, list):
                    assert all(isinstance(x, (str, int)) for x in value)
            d.properties()


def test_bad_devices_and_attributes_raise_with_the_reason():
    with pytest.raises(bp.NotFoundError, match="device type 'nope' is not known"):
        bp.Device("nope:0")
    with pytest.raises(bp.InvalidArgumentError, match="decimal ID"):
        bp.Device("cpu:x")
    with pytest.raises(bp.InvalidArgumentError, match="larger than 2147483647"):
        bp.Device("cpu:99999999999")
    with pytest.raises(bp.InvalidArgumentError, match="0 to 2147483647"):
        bp.Device("cpu", 2**40)
    with pytest.raises(bp.InvalidArgumentError, match="0 to 2147483647"):
        bp.Device("cpu", -1)
    assert bp.Device("cpu:0002147483647").index == 2147483647
    assert not bp.Device("cpu:7").exists
    with pytest.raises(bp.NotFoundError, match="attrs\\(\\) lists them"):
        bp.Device("cpu:0").attr("no_such_attribute")
    # The classes are Python's own kinds too.
    assert issubclass(bp.InvalidArgumentError, ValueError)
    assert issubclass(bp.NotFoundError, LookupError)
    assert issubclass(bp.UnsupportedError, NotImplementedError)


def test_targets_parse_and_come_from_devices(devices):
    t = bp.Target("c -num-cores=2")
    assert t.kind == "c"
    assert t.attrs()["num-cores"] == 2 and t.keys == ["cpu"]
    for d in devices:
        assert bp.Target.from_device(d).kind in ("c", "opencl", "vulkan", "cuda")
    with pytest.raises(bp.Error):
        bp.Target("no_such_kind -x=1")


def test_build_and_call_on_every_device_matches_numpy(devices, rng):
    n = 1000
    x = rng.uniform(-10, 10, n).astype(np.float32)
    y = rng.uniform(-10, 10, n).astype(np.float32)
    for d in devices:
        target = bp.Target.from_device(d)
        m = bp.build(scale_add_source(target), target)
        assert "scale_add" in m.functions
        tx, ty = bp.from_numpy(x, d), bp.from_numpy(y, d)
        out = bp.from_numpy(np.full(n, np.nan, np.float32), d)
        m["scale_add"](n, tx, ty, out)
        np.testing.assert_array_equal(out.numpy(), 2 * x + y, err_msg=str(d))
        # A GPU Target's module is host code importing the kernels' module, whose source is the
        # kernel's (GLSL, OpenCL C or CUDA C); a CPU module is the C itself, importing nothing.
        if target.kind == "c":
            assert m.imports == [] and "bp_func_scale_add" in m.source()
        elif target.kind in ("opencl", "vulkan", "cuda"):
            assert m.kind == "ir_host" and [i.kind for i in m.imports] == [target.kind]
            assert "scale_add" in m.imports[0].source()


def test_numpy_arrays_are_passed_to_cpu_functions_without_a_copy(rng):
    m = bp.build(scale_add_source(bp.Target("c")), bp.Target("c"))
    n = 777
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    m["scale_add"](n, x, y, out)  # out is written in place: a view, not a copy
    np.testing.assert_array_equal(out, 2 * x + y)


def test_build_from_a_file_and_save_and_load(tmp_path, devices, rng):
    src = tmp_path / "scale_add.bpir"
    for d in devices:
        target = bp.Target.from_device(d)
        src.write_text(scale_add_source(target))
        m = bp.build(str(src), target)
        path = tmp_path / f"m_{d.type}.bpmod"
        m.save(str(path))
        native = m.kind == "c"
        if native:
            # A module with native code loads only when asked to.
            with pytest.raises(bp.Error, match="native"):
                bp.load_module(str(path))
        loaded = bp.load_module(str(path), allow_native=native)
        again = bp.load_module(m.to_bytes(), allow_native=native)
        n = 300
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        for mod in (loaded, again):
            out = bp.empty([n], "float32", d)
            mod["scale_add"](n, bp.from_numpy(x, d), bp.from_numpy(y, d), out)
            np.testing.assert_array_equal(out.numpy(), 2 * x + y)
    with pytest.raises(bp.InvalidArgumentError, match="neither kernel IR text"):
        bp.build(str(tmp_path / "missing.bpir"), bp.Target("c"))


def test_build_errors_name_the_problem():
    with pytest.raises(bp.InvalidArgumentError, match="does not verify|parse|expected"):
        bp.build("# backplane-ir 1\nfunc broken(n: int32) {\n  for i in parallel(0, n) {\n", bp.Target("c"))


def test_call_errors_are_exceptions_not_crashes(rng):
    m = bp.build(scale_add_source(bp.Target("c")), bp.Target("c"))
    f = m["scale_add"]
    x = np.zeros(4, np.float32) + 1.5
    with pytest.raises(bp.Error):
        f(4, x, x)  # too few arguments
    with pytest.raises(bp.Error):
        f(8, x, x, x.copy())  # shape does not match n
    with pytest.raises(bp.TypeError_, match="argument 1 is a dict"):
        f(4, {}, x, x)
    with pytest.raises(bp.NotFoundError):
        m["no_such_function"]
    # A read-only array may not be written by a kernel.
    ro = np.ones(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(bp.InvalidArgumentError, match="read-only"):
        f(4, x, x, ro)


def test_registry_functions():
    names = bp.list_functions()
    assert any(n.startswith("device_api.cpu") for n in names)
    with pytest.raises(bp.NotFoundError):
        bp.get_function("no.such.function")


def test_python_functions_in_the_registry():
    calls = []

    def add(a, b):
        calls.append((a, b))
        return a + b

    def bad():
        raise ValueError("bad n")

    bp.register_function("pytest.add", add)
    try:
        f = bp.get_function("pytest.add")
        assert f(2, 3) == 5
        assert f(1.5, 2.25) == 3.75
        assert f("ab", "cd") == "abcd"
        # Any number of string arguments (each kept alive for the call).
        bp.register_function("pytest.cat", lambda *xs: "".join(xs))
        try:
            words = [f"w{k}" * (k + 20) for k in range(12)]
            assert bp.get_function("pytest.cat")(*words) == "".join(words)
        finally:
            bp.remove_function("pytest.cat")
        assert "pytest.add" in bp.list_functions()
        with pytest.raises(bp.AlreadyExistsError):
            bp.register_function("pytest.add", add)
        # Python exceptions come back as the matching kind, with the message.
        with pytest.raises(bp.TypeError_, match="raised TypeError"):
            f(1, "x")
        # An override replaces the registry's entry; a Function already got keeps its callable.
        bp.register_function("pytest.add", bad, allow_override=True)
        assert f(4, 5) == 9
        with pytest.raises(bp.InvalidArgumentError, match="raised ValueError: bad n"):
            bp.get_function("pytest.add")()
        bp.register_function("pytest.add", lambda: object(), allow_override=True)
        with pytest.raises(bp.TypeError_, match="returned a object"):
            bp.get_function("pytest.add")()
        # A tensor goes back and forth; threads call it in parallel.
        t = bp.from_numpy(np.arange(5, dtype=np.float32))
        bp.register_function("pytest.add", lambda x: x, allow_override=True)
        assert bp.get_function("pytest.add")(t).data_ptr == t.data_ptr
        bp.register_function("pytest.add", add, allow_override=True)
        f = bp.get_function("pytest.add")
        results = []
        threads = [threading.Thread(target=lambda k=k: results.append(f(k, k))) for k in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert sorted(results) == [2 * k for k in range(8)]
    finally:
        bp.remove_function("pytest.add")
    with pytest.raises(bp.NotFoundError):
        bp.get_function("pytest.add")
    assert calls[0] == (2, 3)


def test_streams_and_events_order_and_time_work(devices, rng):
    n = 1 << 16
    for d in devices:
        target = bp.Target.from_device(d)
        m = bp.build(scale_add_source(target), target)
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        tx, ty = bp.from_numpy(x, d), bp.from_numpy(y, d)
        out = bp.empty([n], "float32", d)
        s = bp.Stream(d)
        start, end = bp.Event(d), bp.Event(d)
        s.set_active()
        start.record(s)
        m["scale_add"](n, tx, ty, out)
        end.record(s)
        end.sync()
        assert end.done
        ms = end.elapsed_ms(start)
        assert 0.0 <= ms < 60000.0
        bp.Stream(d).set_active()  # any stream; then back to the default below
        np.testing.assert_array_equal(out.numpy(), 2 * x + y)
        never = bp.Event(d)
        assert never.done
        with pytest.raises(bp.InvalidArgumentError, match="never recorded"):
            never.elapsed_ms(start)


def test_tensors_copy_between_devices(devices, rng):
    a = rng.standard_normal((13, 7)).astype(np.float32)
    for d in devices:
        t = bp.from_numpy(a, d)
        assert t.shape == (13, 7) and t.dtype == "float32" and t.device == d
        np.testing.assert_array_equal(t.numpy(), a)
        back = t.to("cpu:0")
        np.testing.assert_array_equal(np.from_dlpack(back), a)
        with pytest.raises(bp.InvalidArgumentError, match="must match"):
            t.copy_from(np.zeros((7, 13), np.float32))
        # An empty array (NumPy gives it strides of 0) copies both ways.
        e = bp.from_numpy(np.zeros((4, 0), np.float32), d)
        assert e.shape == (4, 0) and e.numpy().shape == (4, 0)
    with pytest.raises(bp.InvalidArgumentError, match="not known"):
        bp.empty([3], "float33")
