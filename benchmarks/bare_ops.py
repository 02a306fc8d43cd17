"""The op table's fused ops on bare NumPy arrays, forward and backward, in the fewest whole-array passes we found.

The target is GELU, layer norm, softmax, log_softmax and cross-entropy at most 1.5x PyTorch's forward+backward.
PyTorch runs each as one or two vectorised kernels that read and write every number once; NumPy runs a formula as a
chain of ufunc calls, each a pass over the whole array. The formulas below are each op with nothing between them
and NumPy (no Tensor, no graph, no checks), every intermediate written in place where NumPy allows, row sums by
np.einsum (one read, no temporary), the forward's intermediates kept for the backward instead of recomputed. Their
time is a floor for any NumPy formula of as many passes: benchmarks/fused_floor.py times it beside PyTorch and the
engine. The passes are counted in each docstring (w: a pass that writes an array of the input's size; r: one that
only reads, a row sum). The values equal PyTorch's to float32 precision (tests/benchmarks/test_fused_floor.py).

NumPy has no erf: the exact GELU takes the engine's float32 fit (minitensor.ops.elementwise.erf, 1 exp and about
30 passes), the one NumPy formula of it this project has; a fit of fewer passes would lower that floor.
The floors measured: docs/decisions/003-fused-ops-numpy-floor.md.
"""

from __future__ import annotations

import math

import numpy as np

from minitensor.fast.rowwise import last_max
from minitensor.ops.elementwise import erf


def _rows(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, a.shape[-1])


def _row_sum(a: np.ndarray) -> np.ndarray:
    """Sum of each row of a, as a column (one read pass)."""
    return np.einsum("rn->r", _rows(a)).reshape(a.shape[:-1] + (1,))


def _row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sum of a * b along each row, as a column (one read pass over both, no product array)."""
    return np.einsum("rn,rn->r", _rows(a), _rows(b)).reshape(a.shape[:-1] + (1,))


def softmax(x):
    """y = e^(x - max) / sum: max (short rows: a transposed copy, 1w), subtract (1w), exp in place (1w), row sum (1r),
    scale in place (1w)."""
    y = np.subtract(x, last_max(x))
    np.exp(y, out=y)
    y *= 1 / _row_sum(y)
    return y, y


def softmax_grad(y, g):
    """dx = y (g - sum(g y)): row dot (1r), subtract (1w), multiply in place (1w)."""
    dx = np.subtract(g, _row_dot(g, y))
    dx *= y
    return (dx,)


def log_softmax(x):
    """out = z - log sum e^z, z = x - max: max (1r), subtract (1w), exp (1w), row sum (1r), subtract in place (1w)."""
    z = np.subtract(x, x.max(axis=-1, keepdims=True))
    e = np.exp(z)
    z -= np.log(_row_sum(e))
    return z, z


def log_softmax_grad(out, g):
    """dx = g - e^out sum(g): exp (1w), row sum of g (1r), multiply in place (1w), subtract (1w)."""
    p = np.exp(out)
    p *= _row_sum(g)
    return (np.subtract(g, p, out=p),)


def layer_norm(x, w, b, eps=1e-5):
    """y = xhat w + b, xhat = (x - mean) rstd: row sum (1r), subtract (1w), row sum of squares (1r), scale in place
    (1w), weight (1w), bias in place (1w)."""
    n = x.dtype.type(x.shape[-1])
    xhat = np.subtract(x, _row_sum(x) / n)
    rstd = 1 / np.sqrt(_row_dot(xhat, xhat) / n + x.dtype.type(eps))
    xhat *= rstd
    y = np.multiply(xhat, w)
    y += b
    return y, (xhat, rstd, w)


def layer_norm_grad(saved, g):
    """dw = sum g xhat, db = sum g (2r over the rows), dxhat = g w (1w), its row sum and row dot with xhat (2r),
    dx = rstd (dxhat - mean dxhat - xhat mean(dxhat xhat)): subtract (1w), product (1w), subtract, scale (2w)."""
    xhat, rstd, w = saved
    n = xhat.dtype.type(xhat.shape[-1])
    gw, gb = np.einsum("rn,rn->n", _rows(g), _rows(xhat)), np.einsum("rn->n", _rows(g))
    dx = np.multiply(g, w)
    c = _row_dot(dx, xhat) / n
    dx -= _row_sum(dx) / n
    dx -= np.multiply(xhat, c)
    dx *= rstd
    return dx, gw, gb


def cross_entropy(x, target, ignore_index=0, smoothing=0.1):
    """The mean over kept rows of -(1 - s) logp[target] - s/C sum logp: log_softmax (5 passes), its row sums (1r)."""
    logp, _ = log_softmax(x)
    keep = target != ignore_index
    count = max(int(keep.sum()), 1)
    rows = np.arange(x.shape[0])
    per_row = (1 - smoothing) * logp[rows, target] + smoothing / x.shape[1] * _row_sum(logp)[:, 0]
    loss = -(per_row * keep).sum() / count
    return np.asarray(loss, dtype=x.dtype), (logp, target, keep, count, smoothing)


def cross_entropy_grad(saved, g):
    """dx = (e^logp - q) g / count on kept rows, q = (1 - s) onehot + s/C: exp (1w), subtract the constant in place
    (1w), the target entries (one per row), scale by g and the row mask (1w)."""
    logp, target, keep, count, smoothing = saved
    dx = np.exp(logp)
    dx -= dx.dtype.type(smoothing / logp.shape[1])
    dx[np.arange(logp.shape[0]), target] -= dx.dtype.type(1 - smoothing)
    dx *= (keep * (g / count)).astype(dx.dtype)[:, None]
    return dx, None


_SQRT_HALF, _INV_SQRT_2PI = 1 / math.sqrt(2), 1 / math.sqrt(2 * math.pi)


def gelu(x):
    """y = x Phi(x), Phi = (1 + erf(x / sqrt 2)) / 2: scale (1w), the erf fit (about 30 passes, 1 exp), add and
    halve in place (2w), product (1w)."""
    cdf = erf(x * x.dtype.type(_SQRT_HALF))
    cdf += 1
    cdf *= x.dtype.type(0.5)
    return np.multiply(x, cdf), (x, cdf)


def gelu_grad(saved, g):
    """dx = g (Phi + x phi), phi = e^(-x^2 / 2) / sqrt(2 pi): square, scale, exp in place (3w), product, add,
    product (3w)."""
    x, cdf = saved
    pdf = np.multiply(x, x)
    pdf *= x.dtype.type(-0.5)
    np.exp(pdf, out=pdf)
    pdf *= x.dtype.type(_INV_SQRT_2PI) * x
    pdf += cdf
    pdf *= g
    return (pdf,)


# op-table name -> (forward(*inputs) -> (output, saved), backward(saved, g) -> a gradient per input, None where none)
BARE = {
    "softmax": (softmax, softmax_grad),
    "log_softmax": (log_softmax, log_softmax_grad),
    "layer_norm": (layer_norm, layer_norm_grad),
    "cross_entropy": (cross_entropy, cross_entropy_grad),
    "gelu": (gelu, gelu_grad),
}


def bare_runner(name: str, arrays: list, upstream, table: dict = BARE):
    """(forward, forward+backward, forward output) closures of op `name` of `table` (BARE, or bare_layers'
    BARE_LAYERS) on these inputs, as op_cases' runners."""
    fwd, bwd = table[name]

    def forward():
        return fwd(*arrays)[0]

    def fwd_bwd():
        out, saved = fwd(*arrays)
        bwd(saved, upstream)
        return out

    def value():
        return np.array(forward())

    return forward, fwd_bwd, value


def gradients(name: str, arrays: list, upstream) -> tuple:
    """The backward's gradients, one per input (None for an index input), for checking."""
    fwd, bwd = BARE[name]
    return bwd(fwd(*arrays)[1], upstream)
