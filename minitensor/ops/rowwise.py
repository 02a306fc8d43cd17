"""Maxima, sums and means along the last axis: the plain formulas that every softmax and layer norm reduces by.

Every softmax subtracts its row maximum and divides by its row sum, and a layer norm takes two row means forward
and two backward. The formulas are NumPy's (np.max, reductions.total, reductions.mean, float16 summed in float32
as PyTorch does); each is a slot (`fast.use.row_max`, `row_sum`, `row_mean`) that minitensor/fast/rowwise.py
fills with a faster way for the short rows of a Transformer.

`sum_` and `mean_` take np.sum's arguments and reduce the last axis by those slots: the softmax family calls
them, and so does every first-order backward, as ArrayOps.sum and ArrayOps.mean (namespace.py).
"""

from __future__ import annotations

import numpy as np

from .. import fast
from . import reductions


def row_max(a, keepdims: bool = True):
    """a.max(axis=-1, keepdims=keepdims); a 0-size last axis of floats gives -inf (np.max's initial=, which CuPy's
    max lacks)."""
    if a.dtype.kind == "f" and a.ndim and a.shape[-1] == 0:
        return np.full_like(a, -np.inf, shape=a.shape[:-1] + ((1,) if keepdims else ()))
    return a.max(axis=-1, keepdims=keepdims)


def row_sum(a, keepdims: bool = True):
    """a.sum(axis=-1, keepdims=keepdims) (float16 summed in float32 and rounded once)."""
    return reductions.total(a, axis=-1, keepdims=keepdims)


def row_mean(a, keepdims: bool = True):
    """a.mean(axis=-1, keepdims=keepdims) (float16 summed in float32 and rounded once)."""
    return reductions.mean(a, axis=-1, keepdims=keepdims)


fast.formula("row_max", row_max)
fast.formula("row_sum", row_sum)
fast.formula("row_mean", row_mean)


def sum_(a, axis=None, keepdims=False):
    """reductions.total (np.sum, float16 in float32); over the last axis by fast.use.row_sum."""
    if is_last(axis, np.ndim(a)):
        return fast.use.row_sum(a, keepdims)
    return reductions.total(a, axis=axis, keepdims=keepdims)


def mean_(a, axis=None, keepdims=False):
    """reductions.mean; over the last axis by fast.use.row_mean."""
    if is_last(axis, np.ndim(a)):
        return fast.use.row_mean(a, keepdims)
    return reductions.mean(a, axis=axis, keepdims=keepdims)


def is_last(axis, ndim: int) -> bool:
    """Whether NumPy's `axis` (an int or a 1-tuple, negatives allowed) is the last axis of an ndim array."""
    if isinstance(axis, tuple):
        if len(axis) != 1:
            return False
        (axis,) = axis
    return ndim > 0 and isinstance(axis, (int, np.integer)) and int(axis) % ndim == ndim - 1
