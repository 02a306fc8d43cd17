"""Dtypes and type promotion, with PyTorch's names and rules.

Promotion follows PyTorch: among the operands, dimensioned tensors outrank zero-dim tensors,
which outrank Python scalars; a lower-ranked operand changes the result dtype only when it is of a
higher category (bool < integer < float). So float32 tensor * 2.5 stays float32, int64 tensor * 2.5
becomes the default float dtype, and float32 + float64 tensors give float64.

This module knows tensors only as objects with a `dtype` and an `ndim` (a Tensor or an ndarray),
so it sits below tensor.py.
"""

from __future__ import annotations

import functools
import numbers

import numpy as np

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
float16 = np.dtype(np.float16)
int64 = np.dtype(np.int64)
int32 = np.dtype(np.int32)
int16 = np.dtype(np.int16)
int8 = np.dtype(np.int8)
uint8 = np.dtype(np.uint8)
bool_ = np.dtype(np.bool_)
long, double, half, short = int64, float64, float16, int16  # torch's other names (float and int: minitensor/__init__)
SUPPORTED = frozenset({float16, float32, float64, int64, int32, int16, int8, uint8, bool_})

_default_dtype = float32


def set_default_dtype(dtype) -> None:
    """Set the dtype of floating tensors made from Python numbers and of the float factories."""
    global _default_dtype
    dtype = np.dtype(dtype)
    if dtype not in (float32, float64):
        raise TypeError(f"set_default_dtype: only float32 and float64 are supported, got {dtype}")
    _default_dtype = dtype


def get_default_dtype() -> np.dtype:
    return _default_dtype


def float_dtype(dtype=None) -> np.dtype:
    """`dtype`, or the default float dtype when None (the factories' rule)."""
    return _default_dtype if dtype is None else np.dtype(dtype)


def _category(dt: np.dtype) -> int:
    return 2 if dt.kind == "f" else (0 if dt.kind == "b" else 1)


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """torch.promote_types: int with float gives the float (NumPy would widen to float64)."""
    ca, cb = _category(a), _category(b)
    if ca == cb:
        return np.promote_types(a, b)
    return a if ca > cb else b


def result_type(*operands) -> np.dtype:
    """The dtype PyTorch gives an elementwise op on these tensors and Python scalars."""
    ranks = ([], [], [])  # dimensioned tensors, zero-dim tensors, Python scalars
    for o in operands:
        if isinstance(o, (bool, np.bool_)):
            ranks[2].append(bool_)
        elif isinstance(o, numbers.Integral):
            ranks[2].append(int64)
        elif isinstance(o, numbers.Real):
            ranks[2].append(_default_dtype)
        elif hasattr(o, "dtype") and hasattr(o, "ndim"):
            ranks[0 if o.ndim else 1].append(np.dtype(o.dtype))
        else:
            raise TypeError(f"unsupported operand of type {type(o).__name__}")
    result = None
    for group in ranks:
        if group:
            dt = functools.reduce(promote_types, group)
            if result is None or _category(dt) > _category(result):
                result = dt
    return result


# torch's legacy tensor type names (x.type(), torch.LongTensor), one per dtype
TENSOR_TYPES = {
    float32: "FloatTensor",
    float64: "DoubleTensor",
    float16: "HalfTensor",
    int64: "LongTensor",
    int32: "IntTensor",
    int16: "ShortTensor",
    int8: "CharTensor",
    uint8: "ByteTensor",
    bool_: "BoolTensor",
}
