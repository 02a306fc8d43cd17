"""Speed devices: maxima and sums along the last axis of a float array.

NumPy reduces a contiguous last axis one row at a time, and for the short rows a Transformer
reduces (10 to 30 attention scores, 128 to 512 features in a layer norm) the cost per row
dominates: on copy-reverse's attention scores a row max or row sum takes several times as long as
`np.exp` over the same numbers (docs/decisions/012-row-wise-devices.md). Every softmax subtracts its row maximum
and divides by its row sum, and a layer norm takes two row means forward and two backward, so these are on
the path of every layer.

`last_max` transposes rows of at most SHORT_ROW numbers into one contiguous block and combines its
rows by elementwise maxima; longer rows keep np.max. A maximum does not depend on the
order it is taken in, so the values are np.max's exactly, for every row wherever it sits in the
batch (tests/minitensor/ops/test_rowwise.py).

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

`sum_` and `mean_` take np.sum's arguments and use last_sum / last_mean over the last axis (a float16 array is
summed in float32 and rounded once, as PyTorch does): the softmax family calls them, and so does every
first-order backward, as ArrayOps.sum and ArrayOps.mean (namespace.py). Each device stands beside its plain
formula (reductions.total, reductions.mean, np.max), and tests/minitensor/test_speed_devices.py and
tests/minitensor/ops/test_rowwise.py run the two on the same rows.

Both are CPU devices (NumPy's row loop is what they work around): on a device array (CuPy, the fake device) they
step aside for the plain formulas, np.max and reductions.total (`devices.is_host`).

`in_row_blocks_ok` says when a row-wise fused op (softmax, log_softmax, cross_entropy, gelu) takes its blocked
speed device (pool.in_row_blocks) instead of its plain formula: a large, contiguous float array on the host.
"""

from __future__ import annotations

import numpy as np

from ..devices import is_host
from . import reductions

SHORT_ROW = 64  # last_max transposes rows up to this length; beyond it np.max is as fast
SUM_ROW = 1024  # last_sum's einsum path takes rows up to this length (row-independent up to 4096, tested)


def last_max(a: np.ndarray, keepdims: bool = True) -> np.ndarray:
    """a.max(axis=-1, keepdims=keepdims); for short float rows through their transpose (exactly equal)."""
    n = a.shape[-1] if a.ndim else 0
    if not is_host(a):  # the plain formula on a device (a 0-size last axis of floats gives -inf, as below)
        if n == 0 and a.dtype.kind == "f":
            return np.full_like(a, -np.inf, shape=a.shape[:-1] + ((1,) if keepdims else ()))
        return a.max(axis=-1, keepdims=keepdims)
    if not (a.dtype in (np.float32, np.float64) and a.size and n <= SHORT_ROW):
        floor = {"initial": -np.inf} if a.dtype.kind == "f" else {}  # a 0-size last axis is fine
        return np.max(a, axis=-1, keepdims=keepdims, **floor)
    columns = np.ascontiguousarray(a.reshape(-1, n).T)  # (n, rows): row r's numbers are column r
    m = np.maximum.reduce(columns, axis=0).reshape(a.shape[:-1])
    return m[..., None] if keepdims else m


def last_sum(a: np.ndarray, keepdims: bool = True) -> np.ndarray:
    """a.sum(axis=-1, keepdims=keepdims); for float rows of at most SUM_ROW numbers by np.einsum (the same
    up to round-off, and each row's sum independent of the rows beside it)."""
    n = a.shape[-1] if a.ndim else 0
    if not (is_host(a) and a.dtype in (np.float32, np.float64) and a.size and n <= SUM_ROW):
        return reductions.total(a, axis=-1, keepdims=keepdims)  # float16 summed in float32, as PyTorch
    rows = np.ascontiguousarray(a).reshape(-1, n)  # (rows, n): one layout, so one order of additions per row
    s = np.einsum("rn->r", rows).reshape(a.shape[:-1])
    return s[..., None] if keepdims else s


def last_mean(a: np.ndarray, keepdims: bool = True) -> np.ndarray:
    """a.mean(axis=-1, keepdims=keepdims) as np.mean computes it (the row sum over n), the sum by last_sum."""
    if not (a.dtype in (np.float32, np.float64) and a.ndim and a.shape[-1]):
        return reductions.mean(a, axis=-1, keepdims=keepdims)
    return last_sum(a, keepdims) / a.dtype.type(a.shape[-1])


def sum_(a, axis=None, keepdims=False):
    """reductions.total (np.sum, float16 in float32); over the last axis by last_sum (the same up to round-off)."""
    return last_sum(a, keepdims) if is_last(axis, np.ndim(a)) else reductions.total(a, axis=axis, keepdims=keepdims)


def mean_(a, axis=None, keepdims=False):
    """reductions.mean; over the last axis by last_mean."""
    return last_mean(a, keepdims) if is_last(axis, np.ndim(a)) else reductions.mean(a, axis=axis, keepdims=keepdims)


# Below 1M entries the plain formula: blocks bought nothing for a softmax or layer norm of 2^18 entries (4 MiB
# with its temporaries: the L2 and L3 already hold it; docs/decisions/015-optimizer-blocks.md)
ROW_DEVICE_MIN_NUMEL = 1 << 20


def in_row_blocks_ok(a, dim=-1, *others) -> bool:
    """Whether a (and each of `others`, of a's shape) may take a row-blocked speed device along `dim`: host
    arrays (on a device, the plain formula: the blocks serve the CPU's cache), float32 or float64, C-contiguous
    (so that a block of rows is a plain slice), at least ROW_DEVICE_MIN_NUMEL entries, `dim` the last axis."""
    return (
        is_host(a)
        and a.dtype in (np.float32, np.float64)
        and a.size >= ROW_DEVICE_MIN_NUMEL
        and is_last(dim, a.ndim)
        and all(is_host(o) and o.shape == a.shape and o.dtype == a.dtype for o in others)
        and all(t.flags.c_contiguous for t in (a, *others))
    )


def is_last(axis, ndim: int) -> bool:
    """Whether NumPy's `axis` (an int or a 1-tuple, negatives allowed) is the last axis of an ndim array."""
    if isinstance(axis, tuple):
        if len(axis) != 1:
            return False
        (axis,) = axis
    return ndim > 0 and isinstance(axis, (int, np.integer)) and int(axis) % ndim == ndim - 1
