"""Creation functions with PyTorch's names: tensor, as_tensor, from_numpy, zeros, ones, empty, full,
arange, linspace, eye, randn, rand, randint, randperm and the *_like forms.

Floating factories use the default dtype (dtypes.get_default_dtype) unless given one; random ones
draw from minitensor's one seeded generator (random.py). Every result is a new leaf tensor.
"""

from __future__ import annotations

import numbers

import numpy as np

from .arguments import as_array, size_args
from .dtypes import SUPPORTED, bool_, float16, float32, float_dtype, get_default_dtype, int64
from .random import generator
from .tensor import Tensor


def _new(arr: np.ndarray, requires_grad: bool) -> Tensor:
    t = Tensor.wrap(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _shape(size: tuple, op: str) -> tuple:
    """A factory's sizes, f(2, 3) or f((2, 3)): non-negative integers (a float size is a TypeError)."""
    shape = size_args(size, op)
    if any(s < 0 for s in shape):
        raise ValueError(f"{op}: sizes must be non-negative, got {shape}")
    return shape


def tensor(data, dtype=None, requires_grad: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of `data` (Python numbers/lists, arrays or tensors)."""
    src = data.data if isinstance(data, Tensor) else data
    arr = np.array(as_array(src, dtype), copy=True)
    if dtype is not None:
        arr = arr.astype(np.dtype(dtype), copy=False)
    if arr.dtype not in SUPPORTED:
        raise TypeError(f"tensor: unsupported dtype {arr.dtype}")
    return _new(arr, requires_grad)


def as_tensor(data, dtype=None) -> Tensor:
    """Like tensor() but shares memory with a NumPy array when the dtype already matches."""
    if isinstance(data, Tensor):
        return data.to(dtype) if dtype is not None else data
    arr = as_array(data, dtype)
    return Tensor.wrap(arr if dtype is None else arr.astype(np.dtype(dtype), copy=False))


def from_numpy(arr: np.ndarray) -> Tensor:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray, got {type(arr).__name__}")
    return Tensor.wrap(as_array(arr))


def zeros(*size, dtype=None, requires_grad=False) -> Tensor:
    return _new(np.zeros(_shape(size, "zeros"), float_dtype(dtype)), requires_grad)


def ones(*size, dtype=None, requires_grad=False) -> Tensor:
    return _new(np.ones(_shape(size, "ones"), float_dtype(dtype)), requires_grad)


def empty(*size, dtype=None, requires_grad=False) -> Tensor:
    return _new(np.empty(_shape(size, "empty"), float_dtype(dtype)), requires_grad)


def full(size, fill_value, dtype=None, requires_grad=False) -> Tensor:
    if dtype is None:
        if isinstance(fill_value, bool):
            dtype = bool_
        else:
            dtype = int64 if isinstance(fill_value, numbers.Integral) else get_default_dtype()
    shape = _shape(tuple(size) if isinstance(size, (tuple, list)) else (size,), "full")
    return _new(np.full(shape, fill_value, np.dtype(dtype)), requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(isinstance(v, numbers.Integral) for v in (start, end, step))
        dtype = int64 if ints else get_default_dtype()
    return _new(np.arange(start, end, step).astype(np.dtype(dtype)), requires_grad)


def linspace(start, end, steps, dtype=None) -> Tensor:
    return Tensor.wrap(np.linspace(start, end, steps).astype(float_dtype(dtype)))


def eye(n, m=None, dtype=None, requires_grad=False) -> Tensor:
    n, m = _shape((n, n if m is None else m), "eye")
    return _new(np.eye(n, m, dtype=float_dtype(dtype)), requires_grad)


def _draw(op: str, method: str, size: tuple, dtype) -> np.ndarray:
    """A standard_normal or random draw in dtype (NumPy draws float16 as float32, then casts)."""
    dt = float_dtype(dtype)
    arr = getattr(generator(), method)(_shape(size, op), dtype=float32 if dt == float16 else dt)
    return arr.astype(dt, copy=False)


def randn(*size, dtype=None, requires_grad=False) -> Tensor:
    return _new(_draw("randn", "standard_normal", size, dtype), requires_grad)


def rand(*size, dtype=None, requires_grad=False) -> Tensor:
    return _new(_draw("rand", "random", size, dtype), requires_grad)


def randint(low, high=None, size=None, dtype=None) -> Tensor:
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint: size is required, e.g. randint(0, 10, (3, 4))")
    shape = _shape(tuple(size) if isinstance(size, (tuple, list)) else (size,), "randint")
    return Tensor.wrap(generator().integers(low, high, size=shape).astype(np.dtype(dtype or int64)))


def randperm(n, dtype=None) -> Tensor:
    (n,) = _shape((n,), "randperm")
    return Tensor.wrap(generator().permutation(n).astype(np.dtype(dtype or int64)))


def zeros_like(t, dtype=None, requires_grad=False) -> Tensor:
    return _new(np.zeros(t.shape, dtype or t.dtype), requires_grad)


def ones_like(t, dtype=None, requires_grad=False) -> Tensor:
    return _new(np.ones(t.shape, dtype or t.dtype), requires_grad)


def full_like(t, fill_value, dtype=None, requires_grad=False) -> Tensor:
    return _new(np.full(t.shape, fill_value, dtype or t.dtype), requires_grad)


def empty_like(t, dtype=None, requires_grad=False) -> Tensor:
    return _new(np.empty(t.shape, dtype or t.dtype), requires_grad)


def randn_like(t, dtype=None, requires_grad=False) -> Tensor:
    return randn(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def rand_like(t, dtype=None, requires_grad=False) -> Tensor:
    return rand(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)
