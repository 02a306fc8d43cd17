"""Speed devices of ops/rowwise.py's row_max, row_sum and row_mean: maxima and sums along the last axis.

NumPy reduces a contiguous last axis one row at a time, and for the short rows a Transformer
reduces (10 to 30 attention scores, 128 to 512 features in a layer norm) the cost per row
dominates: on copy-reverse's attention scores a row max or row sum takes several times as long as
`np.exp` over the same numbers (docs/decisions/012-row-wise-devices.md). Every softmax subtracts its row maximum
and divides by its row sum, and a layer norm takes two row means forward and two backward, so these are on
the path of every layer.

`last_max` transposes rows of at most SHORT_ROW numbers into one contiguous block and combines its
rows by elementwise maxima; longer rows keep np.max. A maximum does not depend on the
order it is taken in, so the values are np.max's exactly, for every row wherever it sits in the
batch (tests/minitensor/fast/test_rowwise.py).

`last_sum` hands rows of at most SUM_ROW numbers to np.einsum, whose summing loop is vectorised
across a row instead of being called once per row. A sum does depend on its order,
so the values are np.sum's up to round-off, not bitwise; what matters more, and is tested, is that a
row's sum is a function of that row alone: the same bits whichever rows share the call, whether the
array was contiguous, and in a one-row call. Attention computed block by block, or one query at a
time with a cache, then sums each row exactly as the whole batch does. Longer rows keep np.sum:
there einsum's buffered loop splits rows, and its running sum is less accurate than np.sum's
pairwise one.
A matrix-vector product with a vector of ones is as fast but not usable: BLAS's order of additions
depends on how many rows share the call.

Both are CPU devices (NumPy's row loop is what they work around): on a device array (CuPy, the fake device), and
for dtypes other than float32 and float64, they hand over to the plain formulas (tests/minitensor/fast/test_rowwise.py
runs the two on the same rows).
"""

from __future__ import annotations

import numpy as np

from .. import fast
from ..devices import is_host
from ..ops import rowwise

SHORT_ROW = 64  # last_max transposes rows up to this length; beyond it np.max is as fast
SUM_ROW = 1024  # last_sum's einsum path takes rows up to this length (row-independent up to 4096, tested)


def last_max(a: np.ndarray, keepdims: bool = True) -> np.ndarray:
    """a.max(axis=-1, keepdims=keepdims); for short float rows through their transpose (exactly equal)."""
    n = a.shape[-1] if a.ndim else 0
    if not (is_host(a) and a.dtype in (np.float32, np.float64) and a.size and 0 < n <= SHORT_ROW):
        return rowwise.row_max(a, keepdims)
    columns = np.ascontiguousarray(a.reshape(-1, n).T)  # (n, rows): row r's numbers are column r
    m = np.maximum.reduce(columns, axis=0).reshape(a.shape[:-1])
    return m[..., None] if keepdims else m


def last_sum(a: np.ndarray, keepdims: bool = True) -> np.ndarray:
    """a.sum(axis=-1, keepdims=keepdims); for float rows of at most SUM_ROW numbers by np.einsum (the same
    up to round-off, and each row's sum independent of the rows beside it)."""
    n = a.shape[-1] if a.ndim else 0
    if not (is_host(a) and a.dtype in (np.float32, np.float64) and a.size and n <= SUM_ROW):
        return rowwise.row_sum(a, keepdims)
    rows = np.ascontiguousarray(a).reshape(-1, n)  # (rows, n): one layout, so one order of additions per row
    s = np.einsum("rn->r", rows).reshape(a.shape[:-1])
    return s[..., None] if keepdims else s


def last_mean(a: np.ndarray, keepdims: bool = True) -> np.ndarray:
    """a.mean(axis=-1, keepdims=keepdims) as np.mean computes it (the row sum over n), the sum by last_sum."""
    if not (a.dtype in (np.float32, np.float64) and a.ndim and a.shape[-1]):
        return rowwise.row_mean(a, keepdims)
    return last_sum(a, keepdims) / a.dtype.type(a.shape[-1])


fast.device("row_max", last_max, evidence="docs/decisions/012-row-wise-devices.md")
fast.device("row_sum", last_sum, evidence="docs/decisions/012-row-wise-devices.md")
fast.device("row_mean", last_mean, evidence="docs/decisions/012-row-wise-devices.md")
