"""Speed device: maxima along the last axis of a float array.

NumPy reduces a contiguous last axis one row at a time, and for the short rows a Transformer's
attention reduces (10 to 30 scores) the cost per row dominates: on copy-reverse's attention scores,
(32, 8, 22, 22) float32 at one thread, `w.max(axis=-1)` takes 270 us, against 45 us for `np.exp(w)`
over the same numbers. Every softmax subtracts its row maximum first, so this is on the path of
each attention layer, forward and decoding.

`last_max` transposes rows of at most SHORT_ROW numbers into one contiguous block and combines its
rows by elementwise maxima (68 us there); longer rows keep np.max. A maximum does not depend on the
order it is taken in, so the values are np.max's exactly, for every row wherever it sits in the
batch (tests/test_rowwise.py).

Sums are left to NumPy on purpose: a matrix-vector product with a vector of ones is 3 to 5 times
faster on such rows, but BLAS's order of additions depends on how many rows share the call, so a
row's sum would change (by round-off) with the batch around it.
"""

from __future__ import annotations

import numpy as np

SHORT_ROW = 64  # last_max transposes rows up to this length; beyond it np.max is as fast


def last_max(a: np.ndarray, keepdims: bool = True) -> np.ndarray:
    """a.max(axis=-1, keepdims=keepdims); for short float rows through their transpose (exactly equal)."""
    n = a.shape[-1] if a.ndim else 0
    if not (a.dtype in (np.float32, np.float64) and a.size and n <= SHORT_ROW):
        floor = {"initial": -np.inf} if a.dtype.kind == "f" else {}  # a 0-size last axis is fine
        return np.max(a, axis=-1, keepdims=keepdims, **floor)
    columns = np.ascontiguousarray(a.reshape(-1, n).T)  # (n, rows): row r's numbers are column r
    m = np.maximum.reduce(columns, axis=0).reshape(a.shape[:-1])
    return m[..., None] if keepdims else m


def is_last(axis, ndim: int) -> bool:
    """Whether NumPy's `axis` (an int or a 1-tuple, negatives allowed) is the last axis of an ndim array."""
    if isinstance(axis, tuple):
        if len(axis) != 1:
            return False
        (axis,) = axis
    return ndim > 0 and isinstance(axis, (int, np.integer)) and int(axis) % ndim == ndim - 1
