"""Argument checks shared by the layers' constructors: a positive int size, a floating dtype."""

from __future__ import annotations

import numbers

import numpy as np

from ...dtypes import get_default_dtype

__all__ = ["check_positive_int", "default_float_dtype"]


def default_float_dtype(dtype, where: str) -> np.dtype:
    if dtype is None:
        return np.dtype(get_default_dtype())
    dt = np.dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"{where}: dtype must be floating point, got {dt}")
    return dt


def check_positive_int(where: str, name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{where}: {name} must be an int, got {type(v).__name__} {v!r}")
    if v <= 0:
        raise ValueError(f"{where}: {name} must be positive, got {v}")
    return int(v)
