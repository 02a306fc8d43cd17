"""Devices: torch.device, torch.cuda, which array library owns an array, and the two transfers.

A Tensor's device is read from its array's type, never stored beside it: a NumPy array is on the CPU,
a CuPy array (or the fake device's, fakecuda.py) on CUDA. `array_module(arr)` is the library to call
for anything that must land beside `arr`; `is_host(arr)` guards the CPU-only speed devices;
`is_array(x)` is the engine's "is this an array" test that a device array passes too.

"cuda" means CuPy when it is installed and sees a GPU. With MINITENSOR_FAKE_CUDA=1 in the environment
(or `use_fake_cuda()`), "cuda" is the strict NumPy-backed fake instead: how CI runs the engine on a
device without one. `module_for(device)` answers which library a device name means, and is where a
device that is not there is refused, with one message naming the remedies.

Moving data: `to_device(arr, device)` and `to_host(arr)` are the only transfers; the differentiable one
a user calls is `Tensor.to` (ops/device.py's ToDevice). An op whose operands live on different devices
is refused by `same_device`, which Function.apply calls (torch's message), except for a 0-d CPU tensor,
which moves to the others' device as in torch.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sys

import numpy as np

from . import fakecuda
from .core import points
from .features import switch

_FAKE = {"on": os.environ.get("MINITENSOR_FAKE_CUDA", "") not in ("", "0")}


def use_fake_cuda(on: bool = True) -> bool:
    """Make "cuda" the fake device (fakecuda.py), or stop; returns the previous setting. For tests."""
    previous, _FAKE["on"] = _FAKE["on"], builtins.bool(on)
    if on:
        _attach()
    return previous


def fake_cuda_enabled() -> bool:
    return _FAKE["on"]


# ---------------------------------------------------------------------------------------- CuPy, if any
_CUPY: dict = {}  # "module": cupy when it imports and a GPU answers, else None; "why": the reason it is None


def _cupy():
    """CuPy when it is installed and a GPU answers, else None (the reason kept for the error message)."""
    if "module" not in _CUPY:
        try:
            import cupy  # optional: the [gpu] extra; imported on first use of "cuda" (it costs a second)
        except ImportError:
            _CUPY.update(module=None, why="CuPy is not installed")
            return None
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:  # (CuPy raises its own CUDARuntimeError when no driver answers)
            _CUPY.update(module=None, why=f"CuPy is installed but no GPU answers ({type(e).__name__}: {e})")
            return None
        _CUPY.update(module=cupy if count > 0 else None, why="CuPy is installed but sees no GPU")
        _attach()
    return _CUPY["module"]


def _cupy_ndarray():
    """cupy.ndarray if CuPy was imported by anyone, else None (then no array can be a CuPy array)."""
    cupy = sys.modules.get("cupy")
    if cupy is not None and points.devices is None:
        _attach()
    return None if cupy is None else cupy.ndarray


def _cuda_backend():
    """The library "cuda" means now: the fake when it is on, else CuPy with a GPU, else None."""
    return fakecuda if _FAKE["on"] else _cupy()


# ---------------------------------------------------------------------------------------- arrays
def array_module(arr):
    """The array library that owns `arr`: numpy for a host array or number, else the array's own
    (cupy, or fakecuda). What a formula calls to make a new array that meets `arr`."""
    t = type(arr)
    if t is np.ndarray or isinstance(arr, (np.ndarray, np.generic, builtins.int, builtins.float, builtins.bool)):
        return np
    if t is fakecuda.FakeArray:
        return fakecuda
    cupy_ndarray = _cupy_ndarray()
    if cupy_ndarray is not None and isinstance(arr, cupy_ndarray):
        return sys.modules["cupy"]
    raise TypeError(f"array_module: expected a NumPy or CuPy array, got {t.__name__}")


def is_host(arr) -> builtins.bool:
    """True for a NumPy array: where the CPU-only speed devices (threads, einsum tricks) may run."""
    return isinstance(arr, (np.ndarray, np.generic))


def is_array(x) -> builtins.bool:
    """True for an array of any device: an np.ndarray, a FakeArray or a CuPy array. The test the engine's
    `isinstance(x, np.ndarray)` checks become, so that a device array is not taken for something else."""
    if isinstance(x, np.ndarray) or type(x) is fakecuda.FakeArray:
        return True
    cupy_ndarray = _cupy_ndarray()
    return cupy_ndarray is not None and isinstance(x, cupy_ndarray)


def device_of(arr) -> device:
    """The device an array lives on, read from its type: cpu, or cuda:<index>."""
    if isinstance(arr, (np.ndarray, np.generic)):
        return CPU
    if type(arr) is fakecuda.FakeArray:
        return CUDA0
    if is_array(arr):
        return CUDA0 if arr.device.id == 0 else device("cuda", arr.device.id)
    raise TypeError(f"device_of: expected a NumPy or CuPy array, got {type(arr).__name__}")


# ---------------------------------------------------------------------------------------- device names
class device(str):
    """torch.device. A str subclass, so `x.to(x.device)`, `x.device == "cpu"` and `str(x.device)` work
    as in PyTorch; `.type` and `.index` as torch.device has them. As in torch, naming a device checks
    only its spelling: whether it is there is asked when data goes to it (module_for)."""

    def __new__(cls, type: str | int = "cpu", index: int | None = None):
        if isinstance(type, device) and index is None:
            return type
        if isinstance(type, builtins.int) and not isinstance(type, builtins.bool) and index is None:
            type, index = "cuda", type  # torch.device(1) is cuda:1
        if not isinstance(type, str) or not type.partition(":")[0].isidentifier():
            raise ValueError(f"device: expected a string such as 'cpu' or 'cuda:0', got {type!r}")
        name, _, idx = type.partition(":")
        if idx and not idx.isdigit():
            raise ValueError(f"device: the index in {type!r} must be a non-negative integer")
        if idx and index is not None:
            raise ValueError(f"device: {type!r} already names an index; do not pass index={index} too")
        if index is not None and (not isinstance(index, builtins.int) or index < 0):
            raise ValueError(f"device: the index must be a non-negative integer, got {index!r}")
        index = builtins.int(idx) if idx else index
        self = super().__new__(cls, name if index is None else f"{name}:{index}")
        self.type, self.index = name, index
        return self

    def __repr__(self) -> str:
        return f"device(type={self.type!r}" + ("" if self.index is None else f", index={self.index}") + ")"


CPU = device("cpu")
CUDA0 = device("cuda", 0)


def _no_cuda_message(what) -> str:
    _cupy()  # (sets the reason CuPy gives none)
    return (
        f"{what}: CUDA is not available here: {_CUPY['why']}, and the fake device is off. On a GPU machine install "
        f"CuPy with `pip install '.[gpu]'` (the wheel for its CUDA version); without a GPU, MINITENSOR_FAKE_CUDA=1 "
        f"(or mt.devices.use_fake_cuda()) makes 'cuda' the NumPy-backed fake device; or use device='cpu'"
    )


def resolve(dev, what: str = "device") -> device:
    """`dev` (a name, a device, an int) as the device data goes to, checked against what exists: 'cuda'
    is cuda:<current device>, an index past the last GPU or a device type other than cpu and cuda is
    refused. What every factory's device= and Tensor.to call first."""
    dev = device(dev)
    if dev.type == "cpu":
        return CPU
    if dev.type != "cuda":
        raise RuntimeError(f"{what}: minitensor runs on 'cpu' and 'cuda' only, got device {str(dev)!r}")
    if _cuda_backend() is None:
        raise RuntimeError(_no_cuda_message(f"{what} {str(dev)!r}"))
    count = cuda.device_count()
    index = cuda.current_device() if dev.index is None else dev.index
    if index >= count:
        raise RuntimeError(
            f"{what} {str(dev)!r}: CUDA device index {index} is out of range: this machine has {count} CUDA "
            f"device{'s' if count != 1 else ''} (cuda:0{f' to cuda:{count - 1}' if count > 1 else ''})"
        )
    return CUDA0 if index == 0 else device("cuda", index)


def module_for(dev):
    """The array library of a device: numpy for cpu, else cupy or the fake (resolve's checks first)."""
    return np if resolve(dev).type == "cpu" else _cuda_backend()


def on(dev):
    """A context in which the device library makes its arrays on `dev` (cupy.cuda.Device(i)); nothing to do
    for the CPU and the fake's one device."""
    dev = resolve(dev)
    if dev.type == "cpu" or _FAKE["on"]:
        return contextlib.nullcontext()
    return _cuda_backend().cuda.Device(dev.index)


def new_array(dev, name: str, *args, **kwargs):
    """`xp.<name>(*args, **kwargs)` (zeros, ones, full, empty, eye) made on `dev` by its library."""
    with on(dev):
        return getattr(module_for(dev), name)(*args, **kwargs)


# ---------------------------------------------------------------------------------------- transfers
def to_host(arr) -> np.ndarray:
    """A NumPy copy of a device array (one host sync; the fake counts it), or a host array as it is."""
    if isinstance(arr, np.ndarray):
        return arr
    if isinstance(arr, np.generic):
        return np.asarray(arr)
    return arr.get()  # cupy.ndarray.get and FakeArray.get: the explicit device-to-host copy


def to_device(arr, dev, xp=None):
    """`arr` on device `dev` (an array already there is returned as it is): a host array is copied over, a
    device array copied to the host or to another GPU. xp: the device's library, when the caller holds it
    (ToDevice's backward, sending a gradient back to where its input was): the device is then not looked up."""
    dev = resolve(dev) if xp is None else device(dev)
    if device_of(arr) == dev:
        return arr
    if dev.type == "cpu":
        return to_host(arr)
    xp = module_for(dev) if xp is None else xp
    place = contextlib.nullcontext() if xp is fakecuda else xp.cuda.Device(dev.index)
    with place:  # a device array bound for another GPU goes by the host: simple, and rare
        return xp.asarray(arr if is_host(arr) else to_host(arr))


def same_device(tensors, arrays, op):
    """The tensors of one op call, refused when their arrays live on different devices (torch's message).
    A 0-d CPU tensor among device tensors is allowed, as in torch: it is moved to their device by
    `Tensor.to` (differentiable), and `arrays` updated in place. Called by Function.apply on every call:
    the common case, one array type throughout, costs a loop of `type(...) is` tests."""
    first = type(arrays[0])
    for a in arrays:
        if type(a) is not first:
            return _mixed(tensors, arrays, op)
    return tensors


def _mixed(tensors, arrays, op):
    """same_device's slow path: arrays of different types (an np.ndarray beside a NumPy scalar counts as one
    device, the CPU); 0-d CPU tensors move to the one other device; anything else is torch's error."""
    where = [device_of(a) for a in arrays]
    others = {d for d, a in zip(where, arrays) if not (d == CPU and a.ndim == 0)}
    if len(set(where)) == 1 or not others:
        return tensors
    if len(others) == 1 and CPU not in others:
        (target,) = others
        tensors = tuple(t.to(target) if d != target else t for t, d in zip(tensors, where))
        arrays[:] = [t._data for t in tensors]
        return tensors
    first, second = where[0], next(d for d in where if d != where[0])
    name = getattr(op, "__name__", op)
    raise RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two devices, {first} and {second}! "
        f"(the operands of {name}; move one with .to({str(first)!r}) or .to({str(second)!r}))"
    )


# ---------------------------------------------------------------------------------------- the engine's device check
class DeviceCheck:
    """What the engine asks of devices once an array can live off the CPU (core/points.py's `devices`): until
    then every array is a NumPy array and the core skips these checks."""

    device_of = staticmethod(device_of)
    array_module = staticmethod(array_module)
    same_device = staticmethod(same_device)

    @staticmethod
    def root_array(output, gradient, create_graph, who: str, index: int):
        """The array of a backward's starting gradient, on the output's device: a number or a list made there, a
        0-d gradient from another device moved (torch's validate_outputs), any other refused. Also the Tensor
        moved differentiably, under create_graph (else None)."""
        if hasattr(gradient, "version_counter") or is_array(gradient):
            g = gradient._data if hasattr(gradient, "version_counter") else gradient
        else:  # a number or a list: it has no device of its own
            g = array_module(output._data).asarray(gradient)
        if type(g) is type(output._data) or device_of(g) == output.device:
            return g, None
        if g.ndim != 0:
            raise RuntimeError(
                f"{who}: invalid gradient at index {index} - expected device {output.device} but got "
                f"{device_of(g)} (move it with .to({str(output.device)!r}))"
            )
        if create_graph and hasattr(gradient, "version_counter"):
            moved = gradient.to(output.device)  # a differentiable move: the result depends on the gradient
            return moved._data, moved
        return to_device(g, output.device), None

    @staticmethod
    def gradient_to(gi, dev, who: str, i: int):
        """A backward's gradient for an input on `dev`: as it is when there; a 0-d one moved, as torch's engine
        moves it (validate_outputs); any other refused, naming both devices."""
        arr = gi._data if hasattr(gi, "version_counter") else gi
        if (type(arr) is np.ndarray and dev is CPU) or device_of(arr) == dev:
            return gi
        if arr.ndim != 0:
            raise RuntimeError(
                f"{who} returned an invalid gradient at index {i} - expected device {dev} but got {device_of(arr)}"
            )
        return gi.to(dev) if hasattr(gi, "version_counter") else to_device(arr, dev)


def _attach() -> None:
    """An array may live off the CPU from now on: the engine checks devices (points.devices, features.py)."""
    points.devices = DeviceCheck
    switch("devices", True)


if _FAKE["on"]:  # MINITENSOR_FAKE_CUDA=1 in the environment
    _attach()


# ---------------------------------------------------------------------------------------- mt.cuda
class _Cuda:
    """mt.cuda, as torch.cuda: the usual `"cuda" if torch.cuda.is_available() else "cpu"` picks the GPU
    when CuPy sees one (or the fake device is on), else the CPU, and the code runs unchanged."""

    @staticmethod
    def is_available() -> builtins.bool:
        return _cuda_backend() is not None

    @staticmethod
    def device_count() -> builtins.int:
        backend = _cuda_backend()
        if backend is None:
            return 0
        return 1 if backend is fakecuda else backend.cuda.runtime.getDeviceCount()

    @staticmethod
    def current_device() -> builtins.int:
        backend = _cuda_backend()
        if backend is None:
            raise RuntimeError(_no_cuda_message("cuda.current_device()"))
        return 0 if backend is fakecuda else backend.cuda.runtime.getDevice()

    @staticmethod
    def synchronize(device=None) -> None:
        """Wait for the GPU's queued work (what a timer must do before reading the clock); the fake runs
        everything at once, so there it returns at once (and counts no host sync: no value is read)."""
        backend = _cuda_backend()
        if backend is None:
            raise RuntimeError(_no_cuda_message("cuda.synchronize()"))
        if backend is not fakecuda:
            with on("cuda" if device is None else device):
                backend.cuda.runtime.deviceSynchronize()

    @staticmethod
    def manual_seed(seed: builtins.int) -> None:
        """Accepted, as torch's: every random number (also one for a device tensor) is drawn on the host from the
        one stream that mt.manual_seed seeds (random.py), so there is no device stream to seed."""
        _check_cuda_seed("cuda.manual_seed", seed)

    @staticmethod
    def manual_seed_all(seed: builtins.int) -> None:
        """As manual_seed: accepted, the host stream being the only one."""
        _check_cuda_seed("cuda.manual_seed_all", seed)

    @staticmethod
    def set_device(dev) -> None:
        """Make `device` (an index, "cuda:i" or a device) the current GPU; without one it raises, as torch does."""
        if not isinstance(dev, builtins.int) and device(dev).type != "cuda":
            raise ValueError(f"cuda.set_device: expected a cuda device, got {dev!r}")
        backend = _cuda_backend()
        if backend is None:
            raise RuntimeError(_no_cuda_message("cuda.set_device()"))
        index = dev if isinstance(dev, builtins.int) else resolve(dev, "cuda.set_device").index
        if backend is fakecuda:
            if index != 0:
                raise ValueError(f"cuda.set_device: the fake device has one GPU, index 0; got {index}")
            return
        backend.cuda.Device(index).use()

    @staticmethod
    def empty_cache() -> None:
        """Give the memory pool's unused blocks back to the GPU (CuPy's pool); without a GPU nothing, as torch."""
        backend = _cuda_backend()
        if backend is not None and backend is not fakecuda:
            backend.get_default_memory_pool().free_all_blocks()


def _check_cuda_seed(op: str, seed) -> None:
    if not isinstance(seed, (builtins.int, np.integer)) or isinstance(seed, builtins.bool):
        raise TypeError(f"{op} expects an int, got {type(seed).__name__}")


cuda = _Cuda()


class DeviceMethods:
    """The Tensor's device methods (a mixin Tensor inherits); the move itself is Tensor.to."""

    __slots__ = ()

    @property
    def device(self) -> device:
        return CPU if type(self._data) is np.ndarray else device_of(self._data)

    @property
    def is_cuda(self) -> builtins.bool:
        return self.device.type == "cuda"

    def cpu(self):
        """This tensor on the CPU (itself if it is there); differentiable."""
        return self.to(CPU)

    def cuda(self, device=None, non_blocking=False):
        """This tensor on a CUDA device (the current one unless `device` names one); differentiable.
        non_blocking changes nothing: every copy here completes before the call returns."""
        if device is None:
            dev = "cuda"
        elif isinstance(device, builtins.int) and not isinstance(device, builtins.bool):
            dev = f"cuda:{device}"
        else:
            dev = device
        target = resolve(dev, "cuda()")
        if target.type != "cuda":
            raise ValueError(f"cuda(): expected a CUDA device, got {str(target)!r}")
        return self.to(target)
