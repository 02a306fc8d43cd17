"""Reductions: sum, mean, var, std, max/min (with and without indices), amax/amin, logsumexp.

`dim` arrives normalised (None or a tuple of non-negative ints; one int for max/min with indices).
Each backward first puts the reduced axes back into g (`expand_reduced`) so that it broadcasts
against the input.

Accumulation, as PyTorch's CPU kernels do it:
  - float16: every reduction and fused op computes in float32 (`opmath_dtype`, PyTorch's at::opmath_type)
    and rounds its result to float16 once. NumPy alone would round every partial sum to float16: a sum of
    three numbers of 60000 overflows, a layer norm of activations of a few hundred squares them to inf.
  - float32 and float64: a sum or mean stays in its dtype (PyTorch's CPU sum does too).
  - var and std accumulate in float64 whatever the dtype (PyTorch's CPU Welford kernel keeps double
    accumulators): the std of float32 values of 1e20 is finite though their squares overflow float32; the
    var (1e40) still overflows when rounded to float32, as in PyTorch.
"""

from __future__ import annotations

import numpy as np

from ..autograd import Function


def expand_reduced(g, ndim: int, dim, keepdim: bool):
    """Re-insert the reduced axes into g (when keepdim=False) so it broadcasts against the input."""
    if keepdim:
        return g
    if dim is None:
        return g.reshape((1,) * ndim)
    shape = list(g.shape)
    for d in sorted(dim):
        shape.insert(d, 1)
    return g.reshape(tuple(shape))


def _drop_reduced(out: np.ndarray, dim, keepdim: bool) -> np.ndarray:
    """A result computed with keepdims=True, in the shape the caller asked for."""
    if keepdim:
        return out
    return out.reshape(()) if dim is None else np.squeeze(out, axis=dim)


def opmath_dtype(dtype) -> np.dtype:
    """The dtype PyTorch's CPU kernels compute a reduction or fused op of `dtype` in: float32 for float16
    (at::opmath_type<Half>), the dtype itself otherwise."""
    return np.dtype(np.float32) if dtype == np.float16 else np.dtype(dtype)


def in_opmath(xp, a):
    """a in its opmath dtype (float32 for float16, on arrays or Tensors), or a itself. A float16 backward computes
    there and rounds once: times a scalar such as 1 / n (n beyond float16's 65504, or 1 / n below its normal range)
    it keeps its precision, as PyTorch's scalar multiplication in float32 does."""
    return to_dtype(xp, a, opmath_dtype(a.dtype))


def to_dtype(xp, a, dtype):
    """a in `dtype` (on arrays or Tensors, differentiably); a itself (no copy) when it is already, or None."""
    return a if a is None or a.dtype == dtype else xp.astype(a, dtype)


def total(a: np.ndarray, axis=None, keepdims=False) -> np.ndarray:
    """np.sum, with a float16 array summed in float32 and rounded once (PyTorch's CPU sum)."""
    if getattr(a, "dtype", None) == np.float16:
        return np.asarray(np.sum(a, axis=axis, keepdims=keepdims, dtype=np.float32)).astype(np.float16)
    return np.sum(a, axis=axis, keepdims=keepdims)


def mean(a: np.ndarray, axis=None, keepdims=False) -> np.ndarray:
    """np.mean, with PyTorch's NaN and no "Mean of empty slice" RuntimeWarning over zero elements.
    (np.mean already sums float16 in float32 and rounds once, as PyTorch does.)"""
    if a.size:
        return np.mean(a, axis=axis, keepdims=keepdims)
    return np.sum(a, axis=axis, keepdims=keepdims) / a.dtype.type(_reduced_count(a.shape, axis))  # 0/0: NaN


def _reduced_count(shape: tuple, dim) -> int:
    """How many elements each result of a reduction over dim (None, an axis or a tuple of axes) combines."""
    return int(np.prod(shape if dim is None else [shape[d] for d in np.atleast_1d(dim)]))


class Sum(Function):
    """out = sum of a over dim;  da = g broadcast back over the reduced axes"""

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        ctx.shape, ctx.dim, ctx.keepdim = a.shape, dim, keepdim
        return np.asarray(total(a, axis=dim, keepdims=keepdim))

    @staticmethod
    def backward(ctx, g):
        g = expand_reduced(g, len(ctx.shape), ctx.dim, ctx.keepdim)
        return (ctx.xp.broadcast_to(g, ctx.shape),)


class Mean(Function):
    """out = mean of a over dim (n elements each);  da = g / n broadcast back"""

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        ctx.shape, ctx.dim, ctx.keepdim = a.shape, dim, keepdim
        out = np.asarray(mean(a, axis=dim, keepdims=keepdim))
        ctx.n = _reduced_count(a.shape, dim)
        return out

    @staticmethod
    def backward(ctx, g):
        g = expand_reduced(g, len(ctx.shape), ctx.dim, ctx.keepdim)
        return (ctx.xp.broadcast_to(g / g.dtype.type(ctx.n), ctx.shape),)


def _centered(xp, a, dim):
    """a - mean(a) over dim (forward and backward of var and std)."""
    return a - xp.mean(a, axis=dim, keepdims=True)


def _centered_sum_of_squares(ctx, a, dim, correction, keepdim):
    """sum((a - mean)^2) over dim, in float64, and the divisor max(0, n - correction); saves what Var and Std need.

    The plain formula, run in float64 (`_in_float64`, PyTorch's double accumulators): the squares of float32 (or
    float16) numbers cannot overflow there, so sqrt of the result is the finite std even where the float32
    squares would be inf. The backward runs in a's dtype, from a - mean(a) computed there (PyTorch's formula)."""
    wide = _in_float64(a)
    centered = _centered(ctx.xp, a, dim)  # in a's dtype, for the backward
    wide_centered = centered if wide is a else _centered(ctx.xp, wide, dim)
    # PyTorch's divisor max(0, n - correction) (std::max(0.0, .): a NaN correction gives 0 too): no degrees of
    # freedom left gives 0/0 = NaN (or x/0 = inf). Its backward divides by n - correction unclamped (so a
    # correction beyond n gives a finite gradient of the inf forward): ctx.denom is that one, kept in float64 (n
    # may be beyond float16's 65504), and the backward takes 2 / denom there, as PyTorch's scalar.
    n = _reduced_count(a.shape, dim)
    ctx.save_for_backward(a)
    ctx.centered, ctx.denom, ctx.dim, ctx.keepdim = centered, np.float64(n - correction), dim, keepdim
    return (wide_centered * wide_centered).sum(axis=dim, keepdims=keepdim), np.float64(max(0.0, n - correction))


def _in_float64(a: np.ndarray) -> np.ndarray:
    """a as float64 (no copy when it is): where var and std accumulate (see the module docstring)."""
    return a.astype(np.float64, copy=False)


class Var(Function):
    """out = sum((a - mean)^2) / (n - correction);  da = g * 2 (a - mean) / (n - correction)"""

    @staticmethod
    def forward(ctx, a, dim=None, correction=1, keepdim=False):
        squares, denom = _centered_sum_of_squares(ctx, a, dim, correction, keepdim)
        return np.asarray(squares / denom).astype(a.dtype, copy=False)  # beyond a's range: inf, as PyTorch's

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        g = expand_reduced(g, a.ndim, ctx.dim, ctx.keepdim)
        centered = ctx.intermediate(ctx.centered, _centered, a, ctx.dim)
        g, centered = in_opmath(ctx.xp, g), in_opmath(ctx.xp, centered)  # float16 in float32 (see in_opmath)
        return (to_dtype(ctx.xp, g * centered * float(2 / ctx.denom), a.dtype),)


class Std(Function):
    """out = sqrt(var);  da = g * (a - mean) / ((n - correction) out), and 0 where out == 0
    (PyTorch's value on a constant line, where the formula would be 0/0)"""

    @staticmethod
    def forward(ctx, a, dim=None, correction=1, keepdim=False):
        squares, denom = _centered_sum_of_squares(ctx, a, dim, correction, keepdim)
        out = np.asarray(np.sqrt(squares / denom)).astype(a.dtype, copy=False)
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_arrays
        g_over_out = ctx.xp.where(out == 0, 0, g / out)
        g_over_out = expand_reduced(g_over_out, a.ndim, ctx.dim, ctx.keepdim)
        centered = ctx.intermediate(ctx.centered, _centered, a, ctx.dim)
        g_over_out, centered = in_opmath(ctx.xp, g_over_out), in_opmath(ctx.xp, centered)  # float16 in float32
        return (to_dtype(ctx.xp, g_over_out * centered * float(1 / ctx.denom), a.dtype),)


class MaxMin(Function):
    """out = max (or min) of a over one dim;  da = g at the selected index (the first one), 0 elsewhere.
    Over all elements (dim=None): g is shared evenly between tied maxima (as in PyTorch's max()), and
    between the NaNs when the result is NaN."""

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False, mode="max"):
        ctx.shape, ctx.dim, ctx.keepdim = a.shape, dim, keepdim
        if dim is None:
            out = np.asarray(a.max() if mode == "max" else a.min())
            ctx.chosen = np.isnan(a) if np.isnan(out) else a == out
            ctx.share = a.dtype.type(ctx.chosen.sum())
            return out
        idx = np.expand_dims(np.argmax(a, axis=dim) if mode == "max" else np.argmin(a, axis=dim), dim)
        positions = np.arange(a.shape[dim]).reshape((-1,) + (1,) * (a.ndim - dim - 1))
        ctx.chosen, ctx.share = positions == idx, 1  # one-hot along dim at the index
        out = np.take_along_axis(a, idx, axis=dim)
        return out if keepdim else np.squeeze(out, axis=dim)

    @staticmethod
    def backward(ctx, g):
        g = expand_reduced(g, len(ctx.shape), None if ctx.dim is None else (ctx.dim,), ctx.keepdim)
        return (ctx.xp.where(ctx.chosen, g / g.dtype.type(ctx.share), 0),)


class AMaxMin(Function):
    """out = amax (or amin) over dim(s);  da = g / count * [a == out], g shared evenly between tied extrema.
    PyTorch's formula, multiplied: a NaN or inf g spreads NaN over its whole slice, and so does a NaN
    extremum (no element equals it: count 0)."""

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False, mode="max"):
        if a.size == 0 and (dim is None or any(a.shape[d] == 0 for d in dim)):
            raise ValueError(
                f"{'amax' if mode == 'max' else 'amin'}: cannot reduce over a zero-size dim "
                f"(input of shape {a.shape}, dim {dim})"
            )
        out = a.max(axis=dim, keepdims=True) if mode == "max" else a.min(axis=dim, keepdims=True)
        ties = a == out
        ctx.ties, ctx.count = ties, ties.sum(axis=dim, keepdims=True).astype(a.dtype)
        ctx.dim, ctx.keepdim = dim, keepdim
        return np.asarray(_drop_reduced(out, dim, keepdim))

    @staticmethod
    def backward(ctx, g):
        g = expand_reduced(g, ctx.ties.ndim, ctx.dim, ctx.keepdim)
        return (g / ctx.count * ctx.ties,)


class LogSumExp(Function):
    """out = m + log(sum(e^(a - m))), m = max a (finite);  da = g * e^(a - out)"""

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        x = a.astype(opmath_dtype(a.dtype), copy=False)  # float16 in float32, rounded once (PyTorch's)
        m = np.max(x, axis=dim, keepdims=True) if x.size else np.zeros((1,) * x.ndim, x.dtype)
        m = np.where(np.isfinite(m), m, 0).astype(x.dtype, copy=False)
        out = np.log(np.exp(x - m).sum(axis=dim, keepdims=True)) + m  # an all -inf line: log 0 = -inf
        out = np.asarray(_drop_reduced(out, dim, keepdim)).astype(a.dtype, copy=False)
        ctx.save_for_backward(a, out)
        ctx.dim, ctx.keepdim = dim, keepdim
        return out

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_arrays
        g = expand_reduced(g, a.ndim, ctx.dim, ctx.keepdim)
        out = expand_reduced(out, a.ndim, ctx.dim, ctx.keepdim)
        return (g * ctx.xp.exp(a - out),)  # an all -inf line: NaN, as in PyTorch
