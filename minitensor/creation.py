"""Creation functions with PyTorch's names: tensor, as_tensor, from_numpy, zeros, ones, empty, full,
arange, linspace, eye, randn, rand, randint, randperm and the *_like forms.

Floating factories use the default dtype (dtypes.get_default_dtype) unless given one; random ones
draw from minitensor's one seeded generator (random.py). Every result is a new leaf tensor.

`device=` on every factory, as in torch (None: the CPU; for the *_like forms and as_tensor of a tensor, the
input's device). Random factories, arange and linspace compute on the host and copy the result over, so one
seed gives the same numbers on every device, bit for bit; zeros, ones, full, empty and eye are made by the
device's own library (devices.new_array).
"""

from __future__ import annotations

import numbers

import numpy as np

from . import devices
from .arguments import as_array, size_args
from .dtypes import SUPPORTED, bool_, float16, float32, float_dtype, get_default_dtype, int64
from .random import generator as _stream
from .tensor import Tensor


def _new(arr, requires_grad: bool, device=None) -> Tensor:
    """A leaf around `arr`, copied to `device` first when one is named (a host array, computed on the host)."""
    t = Tensor.wrap(arr if device is None else devices.to_device(arr, device))
    if requires_grad:
        t.requires_grad_(True)
    return t


def _made(device, name: str, *args, **kwargs):
    """xp.<name>(*args, **kwargs) by the library of `device` (the CPU's, NumPy, when None)."""
    return getattr(np, name)(*args, **kwargs) if device is None else devices.new_array(device, name, *args, **kwargs)


def _shape(size: tuple, op: str) -> tuple:
    """A factory's sizes, f(2, 3) or f((2, 3)): non-negative integers (a float size is a TypeError)."""
    shape = size_args(size, op)
    if any(s < 0 for s in shape):
        raise ValueError(f"{op}: sizes must be non-negative, got {shape}")
    return shape


def tensor(data, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    """A new leaf tensor holding a copy of `data` (Python numbers/lists, arrays or tensors), on `device`
    (None: the CPU, or the device of a tensor or device array given as data)."""
    src = data._data if isinstance(data, Tensor) else data
    if devices.is_array(src) and not devices.is_host(src):  # a device array: copied where it is
        arr = src.astype(np.dtype(dtype) if dtype is not None else src.dtype, copy=True)
    else:
        arr = np.array(as_array(src, dtype), copy=True)
        if dtype is not None:
            arr = arr.astype(np.dtype(dtype), copy=False)
    if arr.dtype not in SUPPORTED:
        raise TypeError(f"tensor: unsupported dtype {arr.dtype}")
    return _new(arr, requires_grad, device)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like tensor() but shares memory with a NumPy array (or a tensor) when the dtype and device already match."""
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype) if dtype is not None or device is not None else data
    arr = as_array(data, dtype)
    return _new(arr if dtype is None else arr.astype(np.dtype(dtype), copy=False), False, device)


def from_numpy(arr: np.ndarray) -> Tensor:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray, got {type(arr).__name__}")
    return Tensor.wrap(as_array(arr))


def zeros(*size, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _new(_made(device, "zeros", _shape(size, "zeros"), float_dtype(dtype)), requires_grad)


def ones(*size, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _new(_made(device, "ones", _shape(size, "ones"), float_dtype(dtype)), requires_grad)


def empty(*size, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _new(_made(device, "empty", _shape(size, "empty"), float_dtype(dtype)), requires_grad)


def full(size, fill_value, dtype=None, requires_grad=False, device=None) -> Tensor:
    if dtype is None:
        if isinstance(fill_value, bool):
            dtype = bool_
        else:
            dtype = int64 if isinstance(fill_value, numbers.Integral) else get_default_dtype()
    shape = _shape(tuple(size) if isinstance(size, (tuple, list)) else (size,), "full")
    return _new(_made(device, "full", shape, fill_value, np.dtype(dtype)), requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad=False, device=None) -> Tensor:
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(isinstance(v, numbers.Integral) for v in (start, end, step))
        dtype = int64 if ints else get_default_dtype()
    return _new(np.arange(start, end, step).astype(np.dtype(dtype)), requires_grad, device)


def linspace(start, end, steps, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _new(np.linspace(start, end, steps).astype(float_dtype(dtype)), requires_grad, device)


def eye(n, m=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    n, m = _shape((n, n if m is None else m), "eye")
    return _new(_made(device, "eye", n, m, dtype=float_dtype(dtype)), requires_grad)


def _draw(op: str, method: str, size: tuple, dtype, gen=None) -> np.ndarray:
    """A standard_normal or random draw in dtype (NumPy draws float16 as float32, then casts), on the host."""
    dt = float_dtype(dtype)
    arr = getattr(_stream(op, gen), method)(_shape(size, op), dtype=float32 if dt == float16 else dt)
    return arr.astype(dt, copy=False)


def randn(*size, generator=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _new(_draw("randn", "standard_normal", size, dtype, generator), requires_grad, device)


def rand(*size, generator=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _new(_draw("rand", "random", size, dtype, generator), requires_grad, device)


def randint(*args, low=None, high=None, size=None, generator=None, dtype=None, requires_grad=False, device=None):
    """Integers drawn uniformly from [low, high), in torch's forms: randint(high, size), randint(low, high, size),
    any of them by keyword (low defaults to 0)."""
    if len(args) > 3:
        raise TypeError(f"randint: expected randint(high, size) or randint(low, high, size), got {len(args)} arguments")
    if len(args) == 3 or (len(args) == 2 and high is None and size is not None):
        low, high, *rest = args
        size = rest[0] if rest else size
    elif len(args) == 2:
        high, size = args
    elif len(args) == 1:
        (high,) = args
    low = 0 if low is None else low
    if high is None or size is None:
        raise TypeError("randint: high and size are required, e.g. randint(10, (3, 4)) or randint(0, 10, (3, 4))")
    for name, value in (("low", low), ("high", high)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise TypeError(f"randint: {name} must be an int, got {value!r}")
    if high <= low:
        raise ValueError(f"randint: expected low < high, got low={low}, high={high}")
    shape = _shape(tuple(size) if isinstance(size, (tuple, list)) else (size,), "randint")
    arr = _stream("randint", generator).integers(low, high, size=shape)
    return _new(arr.astype(np.dtype(dtype or int64)), requires_grad, device)


def randperm(n, *, generator=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    (n,) = _shape((n,), "randperm")
    arr = _stream("randperm", generator).permutation(n)
    return _new(arr.astype(np.dtype(dtype or int64)), requires_grad, device)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    """Numbers drawn from N(mean, std^2), drawn on the host: torch.normal's forms (float, float, size), and the tensor
    ones, a mean or std tensor (or both, broadcasting) giving one draw per element, in the tensor's dtype and device.
    Deviation, flagged: the tensor forms' result is a constant (torch's records a gradient toward mean and std, which
    is zero: the same contribution, but mean.grad stays None here where torch's is zeros)."""
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if not tensors:
        if not isinstance(mean, numbers.Real) or not isinstance(std, numbers.Real) or size is None:
            raise TypeError(
                f"normal: expected normal(mean: float, std: float, size) or a mean or std tensor, got mean={mean!r}, "
                f"std={std!r}, size={size!r}"
            )
        if std < 0:
            raise ValueError(f"normal: std must be non-negative, got {std}")
        dt = float_dtype(dtype)
        shape = _shape(tuple(size) if isinstance(size, (tuple, list)) else (size,), "normal")
        arr = _stream("normal", generator).normal(mean, std, shape).astype(dt, copy=False)
        return _new(arr, requires_grad, device)
    if size is not None:
        raise TypeError("normal: size is given with numbers for mean and std, not with a mean or std tensor")
    for t in tensors:
        if t.dtype.kind != "f":
            raise TypeError(f"normal: a mean or std tensor must be floating, got {t.dtype}")
    m, s = (devices.to_host(t._data) if isinstance(t, Tensor) else float(t) for t in (mean, std))
    if np.any(np.asarray(s) < 0) or np.isnan(s).any():
        raise ValueError("normal: std must be non-negative")
    try:
        shape = np.broadcast_shapes(np.shape(m), np.shape(s))
    except ValueError:
        raise ValueError(
            f"normal: mean of shape {np.shape(m)} and std of shape {np.shape(s)} do not broadcast"
        ) from None
    arr = _stream("normal", generator).normal(m, s, shape).astype(tensors[0].dtype, copy=False)
    return _new(arr, requires_grad, tensors[0].device if device is None else device)


def _like_device(t, device):
    """A *_like factory's device: the input's unless one is named."""
    return t.device if device is None else device


def zeros_like(t, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _new(_made(_like_device(t, device), "zeros", t.shape, dtype or t.dtype), requires_grad)


def ones_like(t, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _new(_made(_like_device(t, device), "ones", t.shape, dtype or t.dtype), requires_grad)


def full_like(t, fill_value, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _new(_made(_like_device(t, device), "full", t.shape, fill_value, dtype or t.dtype), requires_grad)


def empty_like(t, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _new(_made(_like_device(t, device), "empty", t.shape, dtype or t.dtype), requires_grad)


def randn_like(t, dtype=None, requires_grad=False, device=None) -> Tensor:
    arr = _draw("randn_like", "standard_normal", tuple(t.shape), dtype or t.dtype)
    return _new(arr, requires_grad, _like_device(t, device))


def rand_like(t, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _new(_draw("rand_like", "random", tuple(t.shape), dtype or t.dtype), requires_grad, _like_device(t, device))
