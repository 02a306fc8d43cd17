"""Devices: torch.device, torch.cuda, which array library owns an array, and the Tensor's device methods.

A Tensor's device is read from its array's type, never stored beside it: a NumPy array is on the CPU,
a CuPy array (or the fake device's, fakecuda.py) on CUDA. `array_module(arr)` is the library to call
for anything that must land beside `arr`; `is_host(arr)` guards the CPU-only speed devices.

"cuda" means CuPy when it is installed and sees a GPU. With MINITENSOR_FAKE_CUDA=1 in the environment
(or `use_fake_cuda()`), "cuda" is the strict NumPy-backed fake instead: how CI runs the engine on a
device without one.
"""

from __future__ import annotations

import builtins
import os

import numpy as np

from . import fakecuda

_FAKE = {"on": os.environ.get("MINITENSOR_FAKE_CUDA", "") not in ("", "0")}


def use_fake_cuda(on: bool = True) -> bool:
    """Make "cuda" the fake device (fakecuda.py), or stop; returns the previous setting. For tests."""
    previous, _FAKE["on"] = _FAKE["on"], builtins.bool(on)
    return previous


def fake_cuda_enabled() -> bool:
    return _FAKE["on"]


def _cupy():
    """CuPy when it is installed and a GPU answers, else None."""
    try:
        import cupy  # optional: the [gpu] extra; importing it costs a second)
    except ImportError:
        return None
    try:
        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # (CuPy raises its own CUDARuntimeError when no driver answers)
        return None


def array_module(arr):
    """The array library that owns `arr`: numpy for a host array or number, else the array's own
    (cupy, or fakecuda). What a formula calls to make a new array that meets `arr`."""
    t = type(arr)
    if t is np.ndarray or isinstance(arr, (np.ndarray, np.generic, builtins.int, builtins.float, builtins.bool)):
        return np
    if t is fakecuda.FakeArray:
        return fakecuda
    module = t.__module__.partition(".")[0]
    if module == "cupy":
        return _cupy_module()
    raise TypeError(f"array_module: expected a NumPy or CuPy array, got {t.__name__}")


def _cupy_module():
    import cupy  # (only reached holding a CuPy array, so it is already loaded)

    return cupy


def is_host(arr) -> builtins.bool:
    """True for a NumPy array: where the CPU-only speed devices (threads, einsum tricks) may run."""
    return isinstance(arr, (np.ndarray, np.generic))


class device(str):
    """torch.device. A str subclass, so `x.to(x.device)`, `x.device == "cpu"` and `str(x.device)` work
    as in PyTorch; `.type` and `.index` as torch.device has them. minitensor's only device is "cpu"."""

    def __new__(cls, type: str = "cpu", index: int | None = None):
        if not isinstance(type, str) or not type.partition(":")[0].isidentifier():
            raise ValueError(f"device: expected a string such as 'cpu' or 'cuda:0', got {type!r}")
        name, _, idx = type.partition(":")
        if idx and not idx.isdigit():
            raise ValueError(f"device: the index in {type!r} must be a non-negative integer")
        if idx and index is not None:
            raise ValueError(f"device: {type!r} already names an index; do not pass index={index} too")
        index = int(idx) if idx else index
        self = super().__new__(cls, name if index is None else f"{name}:{index}")
        self.type, self.index = name, index
        return self

    def __repr__(self) -> str:
        return f"device(type={self.type!r}" + ("" if self.index is None else f", index={self.index}") + ")"


CPU = device("cpu")


class _Cuda:
    """mt.cuda: there is no GPU here, so the usual `"cuda" if torch.cuda.is_available() else "cpu"`
    picks the CPU and the code runs unchanged."""

    @staticmethod
    def is_available() -> builtins.bool:
        return False

    @staticmethod
    def device_count() -> int:
        return 0


cuda = _Cuda()


class DeviceMethods:
    """The Tensor's device methods (a mixin Tensor inherits): the device is always the CPU."""

    __slots__ = ()

    @property
    def device(self) -> device:
        return CPU

    @property
    def is_cuda(self) -> bool:
        return False

    def cpu(self):
        return self

    def cuda(self, device=None, non_blocking=False):
        raise RuntimeError(
            "cuda(): minitensor runs on the CPU only (mt.cuda.is_available() is False); "
            "keep the tensor where it is, or use .to('cpu')"
        )
