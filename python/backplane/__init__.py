# SPDX-License-Identifier: Apache-2.0
"""Backplane from Python: devices, Targets, kernel builds, modules, tensors, streams and events.

    import backplane as bp, numpy as np
    for dev in bp.devices():
        mod = bp.build(open("vector_add.bpir").read(), bp.Target.from_device(dev))
        a = bp.from_numpy(np.random.rand(1000).astype(np.float32), dev)
        ...

Tensors speak DLPack both ways: ``numpy.from_dlpack(t)`` views a cpu tensor without a copy,
``backplane.from_dlpack(x)`` takes any producer's tensor without a copy. Device tensors copy to
and from NumPy explicitly (``from_numpy``, ``Tensor.numpy()``). Errors raise a subclass of
``backplane.Error`` per error kind, carrying Backplane's message. docs/host-guide.md has the
whole guide.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Tuple, Union

from . import _backplane
from ._backplane import (  # noqa: F401  (re-exported)
    NATIVE_BUFFER,
    NATIVE_BUFFER_OFFSET,
    NATIVE_CONTEXT,
    NATIVE_DEVICE,
    NATIVE_MEMORY,
    NATIVE_MEMORY_OFFSET,
    NATIVE_PLATFORM,
    NATIVE_QUEUE,
    NATIVE_QUEUE_FAMILY,
    Device,
    Event,
    Function,
    Module,
    Stream,
    Target,
    Tensor,
    abi_version,
    active_layers,
    build,
    devices,
    empty,
    enable_layers,
    get_function,
    list_functions,
    native_handle,
    register_function,
    remove_function,
)

__all__ = [
    "Device", "Event", "Function", "Module", "Stream", "Target", "Tensor",
    "abi_version", "active_layers", "build", "devices", "empty", "enable_layers", "from_dlpack",
    "from_numpy", "get_function", "kernel_dir", "list_functions", "load_module", "native_handle",
    "register_function", "remove_function",
    "Error", "InvalidArgumentError", "NotFoundError", "AlreadyExistsError", "OutOfMemoryError",
    "UnsupportedError", "VersionMismatchError", "PluginError", "DeviceError", "TypeError_",
    "InternalError",
]


def kernel_dir() -> str:
    """The folder of the reference kernels (the catalog's ``*.bpir`` files).

    ``$BACKPLANE_KERNEL_DIR`` when it is set; else the package's own copy
    (``backplane/share/backplane/kernels``, what a wheel carries); else, for a package built over
    an installed Backplane (``Backplane_DIR``), that install's ``share/backplane/kernels``.
    """
    env = os.environ.get("BACKPLANE_KERNEL_DIR")
    if env:
        return env
    package = os.path.dirname(os.path.abspath(__file__))
    here = os.path.join(package, "share", "backplane", "kernels")
    if os.path.isdir(here):
        return here
    if _backplane._install_kernel_dir:
        return _backplane._install_kernel_dir
    raise FileNotFoundError(
        f"backplane.kernel_dir(): the package has no kernel folder ({here} is missing) and was "
        "not built over an installed Backplane; reinstall the package (pip install "
        "backplane-runtime or ./python), or set BACKPLANE_KERNEL_DIR to a folder of *.bpir files")


# ---- errors: one class per bp_error_kind_t --------------------------------------------------

class Error(RuntimeError):
    """An error Backplane reported; ``kind`` is its bp_error_kind_t name."""

    kind = "BP_ERR_INTERNAL"


class InvalidArgumentError(Error, ValueError):
    """A caller passed a bad value (null, out of range, a tensor of the wrong shape, ...)."""

    kind = "BP_ERR_INVALID_ARGUMENT"


class NotFoundError(Error, LookupError):
    """A name, device type or device that does not exist."""

    kind = "BP_ERR_NOT_FOUND"


class AlreadyExistsError(Error):
    """Registering a name that is taken."""

    kind = "BP_ERR_ALREADY_EXISTS"


class OutOfMemoryError(Error, MemoryError):
    """Host or device memory exhausted."""

    kind = "BP_ERR_OUT_OF_MEMORY"


class UnsupportedError(Error, NotImplementedError):
    """The operation is not provided by this backend."""

    kind = "BP_ERR_UNSUPPORTED"


class VersionMismatchError(Error):
    """ABI negotiation failed."""

    kind = "BP_ERR_VERSION_MISMATCH"


class PluginError(Error):
    """A plugin failed to load or initialise, or broke its contract."""

    kind = "BP_ERR_PLUGIN"


class DeviceError(Error):
    """The device or its driver reported a failure."""

    kind = "BP_ERR_DEVICE"


class TypeError_(Error, TypeError):
    """A value had another type than expected (BP_ERR_TYPE)."""

    kind = "BP_ERR_TYPE"


class InternalError(Error):
    """A bug: an invariant did not hold."""

    kind = "BP_ERR_INTERNAL"


# Index: the bp_status_t value (0 is BP_OK: the base class for an unknown kind).
_backplane._set_error_classes([
    Error, InvalidArgumentError, NotFoundError, AlreadyExistsError, OutOfMemoryError,
    UnsupportedError, VersionMismatchError, PluginError, DeviceError, TypeError_, InternalError,
])


# ---- DLPack ---------------------------------------------------------------------------------

def from_dlpack(x: Any, *, device: Union[Device, str, None] = None,
                copy: Optional[bool] = None) -> Tensor:
    """A Backplane tensor of any DLPack producer's array (NumPy, JAX, PyTorch, CuPy, ...).

    Without a copy by default: the tensor refers to the producer's memory and keeps it alive.
    ``device`` (another device than the producer's) or ``copy=True`` copies; ``copy=False``
    refuses to. A producer's read-only flag is kept: kernels may not write such a tensor.
    """
    if isinstance(x, Tensor):
        t = x
    else:
        if not hasattr(x, "__dlpack__"):
            raise TypeError_(
                f"from_dlpack: a {type(x).__name__} has no __dlpack__; pass an array of a "
                "DLPack producer (NumPy, JAX, PyTorch, CuPy) or a backplane.Tensor")
        try:
            capsule = x.__dlpack__(max_version=(1, 0))
        except TypeError:  # a producer older than the 2023 array API: DLPack 0.x only
            capsule = x.__dlpack__()
        t = _backplane._from_capsule(capsule)
    if device is not None:
        dev = device if isinstance(device, Device) else Device(device)
        if dev != t.device:
            if copy is False:
                raise InvalidArgumentError(
                    f"from_dlpack: the array is on {t.device}, not {dev}, and copy=False")
            return t.to(dev)
    if copy:
        return t.to(t.device)
    return t


def _dlpack(self: Tensor, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
            dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None):
    """The tensor as a DLPack capsule (the Python array API's ``__dlpack__``)."""
    t = self
    if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
        if copy is False:
            raise BufferError(
                f"__dlpack__: the tensor is on {self.device}; dl_device={tuple(dl_device)} needs "
                "a copy, and copy=False")
        if int(dl_device[0]) != 1:
            raise BufferError(
                f"__dlpack__: dl_device={tuple(dl_device)}: a copy can be exported to the CPU "
                "(device type 1) only; copy with Tensor.to(device) first")
        t = self.to("cpu:0")
    elif copy:
        t = self.to(self.device)
    versioned = max_version is not None and int(max_version[0]) >= 1
    return t._to_capsule(versioned)


def _dlpack_device(self: Tensor) -> Tuple[int, int]:
    """(device type, device id) as DLPack numbers them."""
    return (self.device.type_id, self.device.index)


def _numpy(self: Tensor):
    """A NumPy copy of the tensor (from any device)."""
    import numpy as np

    host = self if self.device.type == "cpu" else self.to("cpu:0")
    return np.array(np.from_dlpack(host), copy=True)


def _copy_from(self: Tensor, src: Any) -> None:
    """Copies ``src`` (a Tensor, or any array with __dlpack__, e.g. NumPy) into this tensor."""
    if not isinstance(src, Tensor):
        import numpy as np

        if not hasattr(src, "__dlpack__"):
            src = np.asarray(src)
        if isinstance(src, np.ndarray):
            src = np.ascontiguousarray(src)
        src = from_dlpack(src)
    if src.shape != self.shape or src.dtype != self.dtype:
        raise InvalidArgumentError(
            f"copy_from: the source is {src.dtype}{list(src.shape)}, the tensor "
            f"{self.dtype}{list(self.shape)}; they must match")
    self._copy_from_tensor(src)


def _target_attrs(self: Target) -> dict:
    """Every attribute of the Target, by name (its JSON as a dict)."""
    import json

    return json.loads(self.json)


Target.attrs = _target_attrs
Tensor.__dlpack__ = _dlpack
Tensor.__dlpack_device__ = _dlpack_device
Tensor.numpy = _numpy
Tensor.copy_from = _copy_from
_backplane._set_from_dlpack(from_dlpack)


def from_numpy(array: Any, device: Union[Device, str] = "cpu:0") -> Tensor:
    """A new tensor on ``device`` holding a copy of ``array`` (anything numpy.asarray takes)."""
    import numpy as np

    a = np.ascontiguousarray(np.asarray(array))
    t = empty(list(a.shape), a.dtype.name, device)
    t.copy_from(a)
    return t


def load_module(source: Union[str, bytes, "os.PathLike[str]"], *,
                allow_native: bool = False) -> Module:
    """A module from ``Module.save``'s file (a path) or ``Module.to_bytes``'s bytes.

    A module with native code (the cpu plugin's shared libraries) loads only with
    ``allow_native=True``: pass it for files you built or trust (docs/security.md).
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        with open(source, "rb") as f:
            data = f.read()
    return _backplane._load_module_bytes(data, allow_native)

