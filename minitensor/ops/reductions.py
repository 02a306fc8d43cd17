"""Reductions: sum, mean, var, std, max/min (with and without indices), amax/amin, logsumexp and the norms.

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

The norms have their own nodes where a composite would differ from PyTorch: the 2-norm (sqrt(sum(a * a)) has the
gradient 0/0 = NaN at a = 0, PyTorch's 0), the inf-norms (PyTorch's gradient treats a NaN entry as an extremum with
gradient 0; amax(|a|) would spread NaN), the other p-norms (PyTorch's gradient at a zero entry) and the nuclear
norm (a sum of singular values).
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd import Function, is_tensor_like
from ..devices import array_module, is_host


def result_array(x):
    """A reduction's result as an array: NumPy gives a scalar for a reduction over every axis (the 0-d array of
    it is returned); a device library gives a 0-d array already, returned as it is (np.asarray would copy it to
    the host)."""
    return np.asarray(x) if is_host(x) else x


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
        return result_array(np.sum(a, axis=axis, keepdims=keepdims, dtype=np.float32)).astype(np.float16)
    return np.sum(a, axis=axis, keepdims=keepdims)


def mean(a: np.ndarray, axis=None, keepdims=False) -> np.ndarray:
    """np.mean, with PyTorch's NaN and no "Mean of empty slice" RuntimeWarning over zero elements.
    (np.mean already sums float16 in float32 and rounds once, as PyTorch does.)"""
    if a.size:
        return np.mean(a, axis=axis, keepdims=keepdims)
    return np.sum(a, axis=axis, keepdims=keepdims) / a.dtype.type(_reduced_count(a.shape, axis))  # 0/0: NaN


def refuse_empty_reduction(shape: tuple, dim, op: str, detail: str = "") -> None:
    """A reduction with no identity (max, min, amax, argmax, the inf-norms, negative p-norms) has no value over
    nothing: refuse an empty input reduced whole (dim None) or over a zero-size dim, as PyTorch does. Over another
    dim of an empty tensor the result is empty, and fine. dim: None, an int or a tuple of ints."""
    if math.prod(shape):  # not empty (a 0-d tensor holds one element)
        return
    zero = [d for d in np.atleast_1d(dim if dim is not None else ()) if shape[d] == 0]
    if dim is None or zero:
        where = "" if dim is None else f" over its dim {', '.join(map(str, zero))} of size 0"
        raise ValueError(f"{op}(){detail}: cannot reduce an empty tensor of shape {shape}{where}")


def _reduced_count(shape: tuple, dim) -> int:
    """How many elements each result of a reduction over dim (None, an axis or a tuple of axes) combines."""
    return int(np.prod(shape if dim is None else [shape[d] for d in np.atleast_1d(dim)]))


class Sum(Function):
    """out = sum of a over dim;  da = g broadcast back over the reduced axes"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        ctx.shape, ctx.dim, ctx.keepdim = a.shape, dim, keepdim
        return result_array(total(a, axis=dim, keepdims=keepdim))

    @staticmethod
    def backward(ctx, g):
        g = expand_reduced(g, len(ctx.shape), ctx.dim, ctx.keepdim)
        return (ctx.xp.broadcast_to(g, ctx.shape),)


class Mean(Function):
    """out = mean of a over dim (n elements each);  da = g / n broadcast back"""

    jvp_kind = "linear"

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        ctx.shape, ctx.dim, ctx.keepdim, ctx.n = a.shape, dim, keepdim, _reduced_count(a.shape, dim)
        return result_array(mean(a, axis=dim, keepdims=keepdim))

    @staticmethod
    def backward(ctx, g):
        g = expand_reduced(g, len(ctx.shape), ctx.dim, ctx.keepdim)
        # 1 / n in the opmath dtype: in float16, n beyond 65504 is inf and 1 / n below its normal range
        wide = in_opmath(ctx.xp, g)
        return (ctx.xp.broadcast_to(to_dtype(ctx.xp, wide / wide.dtype.type(ctx.n), g.dtype), ctx.shape),)


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
    # may be beyond float16's 65504), and the backward takes 2 / denom there, as PyTorch's scalar. An empty slice
    # (n = 0) is NaN whatever the correction, as PyTorch's (0 / max(0, 0 - (-1)) would be 0): its divisor is NaN.
    n = _reduced_count(a.shape, dim)
    ctx.save_for_backward(a)
    ctx.save(centered=centered)
    ctx.denom, ctx.dim, ctx.keepdim = np.float64(n - correction), dim, keepdim
    divisor = np.float64(max(0.0, n - correction)) if n else np.float64(np.nan)
    return (wide_centered * wide_centered).sum(axis=dim, keepdims=keepdim), divisor


def _in_float64(a: np.ndarray) -> np.ndarray:
    """a as float64 (no copy when it is): where var and std accumulate (see the module docstring)."""
    return a.astype(np.float64, copy=False)


def _var_grad(ctx, g, a):
    """var's gradient for g in a's shape, in the opmath dtype (PyTorch's var_backward): g * 2 (a - mean) / (n -
    correction); over every element (dim None) with n - correction <= 0, g * (NaN where a equals the mean, else
    +inf), PyTorch's special case. The JVPs sum it with the tangent for g (var_jvp: an empty slice gives 0)."""
    if ctx.dim is None and ctx.denom <= 0:
        arr = a._data if is_tensor_like(a) else a  # (a Tensor under create_graph: the factor is a constant)
        xp = array_module(arr)
        mean = xp.mean(arr) if arr.size else 0.0  # (NumPy warns on the mean of nothing; the factor is empty then)
        factor = xp.where(arr == mean, np.nan, np.inf).astype(opmath_dtype(arr.dtype))
        return in_opmath(ctx.xp, g) * factor
    centered = in_opmath(ctx.xp, ctx.intermediate(ctx.centered, _centered, a, ctx.dim))
    return in_opmath(ctx.xp, g) * centered * float(2 / ctx.denom)


class Var(Function):
    """out = Σ(a - ā)² / (n - c);  da = g 2 (a - ā) / (n - c);  ẏ = Σ ȧ 2 (a - ā) / (n - c), c the correction
    (docs/backprop.md, "Var and Std": accumulated in float64, PyTorch's cases where n - c <= 0)"""

    @staticmethod
    def forward(ctx, a, dim=None, correction=1, keepdim=False):
        squares, denom = _centered_sum_of_squares(ctx, a, dim, correction, keepdim)
        return result_array(squares / denom).astype(a.dtype, copy=False)  # beyond a's range: inf, as PyTorch's

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        g = expand_reduced(g, a.ndim, ctx.dim, ctx.keepdim)
        return (to_dtype(ctx.xp, _var_grad(ctx, g, a), a.dtype),)

    @staticmethod
    def jvp(ctx, ta):
        (a,) = ctx.saved_arrays
        return to_dtype(ctx.xp, ctx.xp.sum(_var_grad(ctx, ta, a), axis=ctx.dim, keepdims=ctx.keepdim), a.dtype)


class Std(Function):
    """out = sqrt(var);  da = var's da for g / (2 out);  ẏ = var's ẏ / (2 out);  both 0 where out == 0
    (docs/backprop.md, "Var and Std")"""

    @staticmethod
    def forward(ctx, a, dim=None, correction=1, keepdim=False):
        squares, denom = _centered_sum_of_squares(ctx, a, dim, correction, keepdim)
        out = result_array(np.sqrt(squares / denom)).astype(a.dtype, copy=False)
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_arrays
        g_var = ctx.xp.where(out == 0, 0, g / (out * 2))  # in a's dtype, as PyTorch's grad / (result * 2)
        g_var = expand_reduced(g_var, a.ndim, ctx.dim, ctx.keepdim)
        return (to_dtype(ctx.xp, _var_grad(ctx, g_var, a), a.dtype),)

    @staticmethod
    def jvp(ctx, ta):
        a, out = ctx.saved_arrays
        dots = to_dtype(ctx.xp, ctx.xp.sum(_var_grad(ctx, ta, a), axis=ctx.dim, keepdims=ctx.keepdim), a.dtype)
        return ctx.xp.where(out == 0, 0, dots / (2 * out))  # in a's dtype, as PyTorch's var_jvp / (2 * result)


class MaxMin(Function):
    """out = max (min) of a over one dim;  da = g at the first selected index;  ẏ = ȧ there; over every element
    (dim=None) shared evenly by the ties (docs/backprop.md, "MaxMin")"""

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False, mode="max"):
        ctx.shape, ctx.dim, ctx.keepdim = a.shape, dim, keepdim
        if dim is None:
            out = result_array(a.max() if mode == "max" else a.min())
            # the tied extrema, or the NaNs of a NaN result (no element equals NaN; a NaN-free a has no NaN to add)
            chosen = (a == out) | np.isnan(a)
            share = result_array(chosen.sum()).astype(a.dtype)  # 0-d arrays: no host read of the count
            ctx.save(chosen=chosen, share=share, jvp_share=np.where(np.isnan(out), out, share))
            return out
        idx = np.expand_dims(np.argmax(a, axis=dim) if mode == "max" else np.argmin(a, axis=dim), dim)
        positions = array_module(a).arange(a.shape[dim]).reshape((-1,) + (1,) * (a.ndim - dim - 1))
        ctx.save(chosen=positions == idx)  # one-hot along dim at the index
        out = np.take_along_axis(a, idx, axis=dim)
        return out if keepdim else np.squeeze(out, axis=dim)

    @staticmethod
    def backward(ctx, g):
        g = expand_reduced(g, len(ctx.shape), None if ctx.dim is None else (ctx.dim,), ctx.keepdim)
        return (ctx.xp.where(ctx.chosen, g if ctx.dim is not None else g / ctx.xp.constant(ctx.share, g), 0),)

    @staticmethod
    def jvp(ctx, ta):
        if ctx.dim is None:  # jvp_share: the share, or NaN for a NaN result (PyTorch's 0/0)
            return ctx.xp.sum(ctx.xp.where(ctx.chosen, ta, 0)) / ctx.xp.constant(ctx.jvp_share, ta)
        return ctx.xp.sum(ctx.xp.where(ctx.chosen, ta, 0), axis=ctx.dim, keepdims=ctx.keepdim)


class AMaxMin(Function):
    """out = amax (amin) over dim;  da = g / count [a == out];  ẏ = Σ ȧ [a == out] / count, count = Σ [a == out]
    (docs/backprop.md, "AMaxMin")"""

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False, mode="max"):
        refuse_empty_reduction(a.shape, dim, "amax" if mode == "max" else "amin")
        out = a.max(axis=dim, keepdims=True) if mode == "max" else a.min(axis=dim, keepdims=True)
        ties = a == out
        ctx.save(ties=ties, count=ties.sum(axis=dim, keepdims=True).astype(a.dtype))
        ctx.dim, ctx.keepdim = dim, keepdim
        return result_array(_drop_reduced(out, dim, keepdim))

    @staticmethod
    def backward(ctx, g):
        g = expand_reduced(g, ctx.ties.ndim, ctx.dim, ctx.keepdim)
        count, ties = ctx.xp.constant(ctx.count, g), ctx.xp.constant(ctx.ties, g)  # (constant Tensors on Tensors)
        return (g / count * ties,)

    @staticmethod
    def jvp(ctx, ta):
        ties = ctx.xp.sum(ctx.xp.where(ctx.ties, ta, 0), axis=ctx.dim, keepdims=ctx.keepdim)
        return ties / ctx.xp.constant(_drop_reduced(ctx.count, ctx.dim, ctx.keepdim), ties)


class LogSumExp(Function):
    """out = m + log(sum(e^(a - m))), m = max a (finite);  da = g * e^(a - out);  ẏ = sum(ȧ e^(a - out))"""

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        x = a.astype(opmath_dtype(a.dtype), copy=False)  # float16 in float32, rounded once (PyTorch's)
        m = np.max(x, axis=dim, keepdims=True) if x.size else np.zeros_like(x, shape=(1,) * x.ndim)
        m = np.where(np.isfinite(m), m, 0).astype(x.dtype, copy=False)
        out = np.log(np.exp(x - m).sum(axis=dim, keepdims=True)) + m  # an all -inf line: log 0 = -inf
        out = result_array(_drop_reduced(out, dim, keepdim)).astype(a.dtype, copy=False)
        ctx.save_for_backward(a, out)
        ctx.dim, ctx.keepdim = dim, keepdim
        return out

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_arrays
        g = expand_reduced(g, a.ndim, ctx.dim, ctx.keepdim)
        out = expand_reduced(out, a.ndim, ctx.dim, ctx.keepdim)
        return (g * ctx.xp.exp(a - out),)  # an all -inf line: NaN, as in PyTorch

    @staticmethod
    def jvp(ctx, ta):
        a, out = ctx.saved_arrays
        weights = ctx.xp.exp(a - expand_reduced(out, a.ndim, ctx.dim, ctx.keepdim))  # softmax(a) over dim
        return ctx.xp.sum(ta * weights, axis=ctx.dim, keepdims=ctx.keepdim)


class Norm(Function):
    """out = sqrt(Σ a²) over dim;  da = g a / out;  ẏ = Σ a ȧ / out;  0 where out == 0 (docs/backprop.md, "Norm")"""

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        x = a.astype(opmath_dtype(a.dtype), copy=False)  # float16 squared and summed in float32 (PyTorch's)
        if _reduced_count(a.shape, dim) == 1:  # |a| exactly, as PyTorch's (a deviation for a 0-d a: see the docs)
            out = np.abs(x).sum(axis=dim, keepdims=keepdim)
        else:
            out = np.sqrt((x * x).sum(axis=dim, keepdims=keepdim))
        out = result_array(out).astype(a.dtype, copy=False)
        ctx.save_for_backward(a, out)
        ctx.dim, ctx.keepdim = dim, keepdim
        return out

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_arrays
        g, out = (expand_reduced(t, a.ndim, ctx.dim, ctx.keepdim) for t in (g, out))
        return (g * ctx.xp.where(out == 0, 0, a / out),)  # (PyTorch's order: a NaN second derivative at 0)

    @staticmethod
    def jvp(ctx, ta):
        a, out = ctx.saved_arrays
        return ctx.xp.where(out == 0, 0, ctx.xp.sum(a * ta, axis=ctx.dim, keepdims=ctx.keepdim) / out)


class NormInf(Function):
    """out = max |a| (p = inf) or min |a| (p = -inf);  da = g sign(a) c / count;  ẏ = Σ sign(a) ȧ c / count,
    c = [|a| == out or NaN], count = Σ c (docs/backprop.md, "NormInf")"""

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False, mode="max"):
        refuse_empty_reduction(a.shape, dim, "norm", f" with p={'inf' if mode == 'max' else '-inf'}")
        size = np.abs(a)
        out = size.max(axis=dim, keepdims=True) if mode == "max" else size.min(axis=dim, keepdims=True)
        chosen = (size == out) | np.isnan(size)
        ctx.save(chosen=chosen, count=chosen.sum(axis=dim, keepdims=True).astype(a.dtype))
        ctx.save_for_backward(a)
        ctx.dim, ctx.keepdim = dim, keepdim
        return result_array(out if keepdim else out.reshape(()) if dim is None else np.squeeze(out, axis=dim))

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        g = expand_reduced(g, a.ndim, ctx.dim, ctx.keepdim)
        count, chosen = ctx.xp.constant(ctx.count, g), ctx.xp.constant(ctx.chosen, g)  # (constants on Tensors)
        return (ctx.xp.sign(a) * (g / count * chosen),)

    @staticmethod
    def jvp(ctx, ta):
        (a,) = ctx.saved_arrays
        chosen = ctx.xp.sum(ctx.xp.where(ctx.chosen, ctx.xp.sign(a) * ta, 0), axis=ctx.dim, keepdims=ctx.keepdim)
        return chosen / ctx.xp.constant(_drop_reduced(ctx.count, ctx.dim, ctx.keepdim), chosen)


def magnitude(xp, a):
    """|a| on arrays or, differentiably, Tensors (sign(a) * a: the sign is a constant, as abs's gradient)."""
    return xp.sign(a) * a


def _pnorm_entry(xp, x, p):
    """The entrywise factor of the p-norm's derivative, sgn(a) |a|^(p-1), in PyTorch's three forms (0 at a = 0 for
    p < 1, where |a|^(p-1) is inf; a |a|^(p-2) from p = 2 on)."""
    size = magnitude(xp, x)
    if p < 1:
        return xp.where(x == 0, 0, xp.sign(x) * size ** (p - 1))
    return xp.sign(x) * size ** (p - 1) if p < 2 else x * size ** (p - 2)


def _pnorm_scale(xp, h, out, p):
    """h / out^(p-1): as h out^(1-p) for p < 1 (out^(p-1) is inf at out = 0), else 0 where out == 0 (PyTorch's)."""
    return h * out ** (1 - p) if p < 1 else xp.where(out == 0, 0, h / out ** (p - 1))


class PNorm(Function):
    """out = (Σ |a|^p)^(1/p), p finite, not 1 or 2 (p = 0: the count of nonzeros, no gradient);
    da = g sgn(a) |a|^(p-1) / out^(p-1);  ẏ = Σ sgn(a) |a|^(p-1) ȧ / out^(p-1) (docs/backprop.md, "PNorm")"""

    @staticmethod
    def forward(ctx, a, p, dim=None, keepdim=False):
        if p < 0:  # no identity: over nothing, (sum of no |a|^p)^(1/p) = 0^(1/p) would be inf
            refuse_empty_reduction(a.shape, dim, "norm", f" with p={p}")
        x = a.astype(opmath_dtype(a.dtype), copy=False)  # float16 accumulated in float32 (PyTorch's)
        if p == 0:
            out = (x != 0).sum(axis=dim, keepdims=keepdim, dtype=x.dtype)
        elif _reduced_count(a.shape, dim) == 1:  # |a| exactly, as PyTorch (and Norm: see its deviation)
            out = np.abs(x).sum(axis=dim, keepdims=keepdim)
        else:  # as PyTorch's CPU kernel: no rescaling, so |a|^p may overflow to inf or underflow to 0
            out = (np.abs(x) ** p).sum(axis=dim, keepdims=keepdim) ** (1 / p)
        out = result_array(out).astype(a.dtype, copy=False)
        ctx.save_for_backward(a, out)
        ctx.p, ctx.dim, ctx.keepdim = p, dim, keepdim
        return out

    @staticmethod
    def backward(ctx, g):
        if ctx.p == 0:  # a count: piecewise constant, and PyTorch gives the input no gradient at all
            return (None,)
        a, out = ctx.saved_arrays
        g, out = (expand_reduced(t, a.ndim, ctx.dim, ctx.keepdim) for t in (g, out))
        g, out, x = in_opmath(ctx.xp, g), in_opmath(ctx.xp, out), in_opmath(ctx.xp, a)  # float16 in float32
        return (to_dtype(ctx.xp, _pnorm_entry(ctx.xp, x, ctx.p) * _pnorm_scale(ctx.xp, g, out, ctx.p), a.dtype),)

    @staticmethod
    def jvp(ctx, ta):
        a, out = ctx.saved_arrays
        if ctx.p == 0:  # a count: piecewise constant (PyTorch's tangent: zeros)
            return ctx.xp.zeros_like(out)
        out, x, ta = in_opmath(ctx.xp, out), in_opmath(ctx.xp, a), in_opmath(ctx.xp, ta)  # float16 in float32
        dots = ctx.xp.sum(_pnorm_entry(ctx.xp, x, ctx.p) * ta, axis=ctx.dim, keepdims=ctx.keepdim)
        return to_dtype(ctx.xp, _pnorm_scale(ctx.xp, dots, out, ctx.p), a.dtype)


def svd(a: np.ndarray):
    """NumPy's thin SVD u, s, vh of the matrices of a over its last two dims, in a's opmath dtype."""
    return np.linalg.svd(a.astype(opmath_dtype(a.dtype), copy=False), full_matrices=False)


def _row(s):
    """s (..., k) as a row (..., 1, k): it scales the columns of a matrix."""
    return s.reshape(s.shape[:-1] + (1, s.shape[-1]))


def _col(s):
    """s (..., k) as a column (..., k, 1): it scales the rows of a matrix."""
    return s.reshape(s.shape + (1,))


def svd_backward(xp, u, s, v, gs=None, gu=None, gv=None):
    """PyTorch's svd_backward for real matrices a = U diag(s) V^T (thin, k = min(m, n)), for one of gs, gu, gv:
      gs:  da = U diag(gs) V^T
      gu:  da = U (skew(U^T gu) / E) diag(s) V^T  + (I - U U^T) gu diag(s)^-1 V^T   (the second term when m > k)
      gv:  da = U diag(s) (skew(V^T gv) / E) V^T  + U diag(s)^-1 gv^T (I - V V^T)   (the second term when n > k)
    with skew(X) = X - X^T and E_ij = s_j^2 - s_i^2 (1 on the diagonal). Tied singular values divide by 0: inf or
    NaN, as PyTorch's (the vectors are not unique there); so does a zero one where m != n."""
    vt = xp.swapaxes(v, -1, -2)
    if gs is not None:
        return (u * _row(gs)) @ vt
    k = s.shape[-1]
    ut, s2 = xp.swapaxes(u, -1, -2), s * s
    e = _row(s2) - _col(s2) + xp.eye_like(k, s2)
    if gu is not None:
        x = ut @ gu
        da = u @ ((x - xp.swapaxes(x, -1, -2)) / e * _row(s)) @ vt
        if u.shape[-2] > k:
            da = da + ((gu - u @ (ut @ gu)) / _row(s)) @ vt
        return da
    x = vt @ gv
    da = u @ (_col(s) * ((x - xp.swapaxes(x, -1, -2)) / e)) @ vt
    if v.shape[-2] > k:
        gvt = xp.swapaxes(gv, -1, -2)
        da = da + (u / _row(s)) @ (gvt - (gvt @ v) @ vt)
    return da


def svd_jvp(xp, u, s, v, ta, which):
    """The tangent of s, U or V (which: 'S', 'U', 'V') of a = U diag(s) V^T along ȧ (PyTorch's linalg_svd_jvp, for
    real matrices, thin, k = min(m, n)). With dP = U^T ȧ V and dP0 its off-diagonal part:
      ṡ = diag(dP)
      U̇ = U ((dP0 S + S dP0^T) / E) + (I - U U^T) ȧ V S^-1      (the second term when m > k)
      V̇ = V ((S dP0 + dP0^T S) / E) + (I - V V^T) ȧ^T U S^-1    (the second term when n > k)
    E_ij = s_j^2 - s_i^2 as in svd_backward (1 on the diagonal, where the numerators are 0): tied singular values
    divide by 0, as PyTorch's."""
    ut = xp.swapaxes(u, -1, -2)
    if which == "S":  # diag(U^T ȧ V), without forming the k x k product
        return xp.sum(u * (ta @ v), axis=-2)
    k = s.shape[-1]
    s2, off = s * s, 1 - xp.eye_like(k, s)
    e = _row(s2) - _col(s2) + xp.eye_like(k, s)
    dp0 = (ut @ ta @ v) * off
    if which == "U":
        x = dp0 * _row(s)
        du = u @ ((x + xp.swapaxes(x, -1, -2)) / e)
        if u.shape[-2] > k:
            av = ta @ v
            du = du + (av - u @ (ut @ av)) / _row(s)
        return du
    x = xp.swapaxes(dp0, -1, -2) * _row(s)
    dv = v @ ((x + xp.swapaxes(x, -1, -2)) / e)
    if v.shape[-2] > k:
        atu = xp.swapaxes(ta, -1, -2) @ u
        dv = dv + (atu - v @ (xp.swapaxes(v, -1, -2) @ atu)) / _row(s)
    return dv


def _svd_factors(ctx, a):
    """u, s, v of a for a backward: the forward's arrays, or, under create_graph, the three nodes below applied to
    the saved Tensor a (recomputed, so that their own backwards differentiate them), in a's opmath dtype."""
    xp = ctx.xp
    u = ctx.intermediate(ctx.u, lambda xp, a: SingularVectors.apply(a, which="U"), a)
    s = ctx.intermediate(ctx.s, lambda xp, a: SVDVals.apply(a), a)
    v = ctx.intermediate(ctx.v, lambda xp, a: SingularVectors.apply(a, which="V"), a)
    return in_opmath(xp, u), in_opmath(xp, s), in_opmath(xp, v)


class SVDVals(Function):
    """out = s, the singular values of a = U diag(s) Vᵀ (descending);  da = U diag(g) Vᵀ;  ṡ = diag(Uᵀ ȧ V)
    (docs/backprop.md, "SVDVals and SingularVectors": the nuclear norm, where the SVD is not unique)"""

    @staticmethod
    def forward(ctx, a):
        u, s, vh = svd(a)
        ctx.save(u=u, s=s, v=np.swapaxes(vh, -1, -2))
        ctx.save_for_backward(a)
        return s.astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        u, s, v = _svd_factors(ctx, a)
        return (to_dtype(ctx.xp, svd_backward(ctx.xp, u, s, v, gs=in_opmath(ctx.xp, g)), a.dtype),)

    @staticmethod
    def jvp(ctx, ta):
        (a,) = ctx.saved_arrays
        u, s, v = _svd_factors(ctx, a)
        return to_dtype(ctx.xp, svd_jvp(ctx.xp, u, s, v, in_opmath(ctx.xp, ta), "S"), a.dtype)


class SingularVectors(Function):
    """out = U (which='U') or V of a = U diag(s) Vᵀ;  da = svd_backward's gu or gv term;  U̇, V̇ = svd_jvp
    (docs/backprop.md, "SVDVals and SingularVectors": the nodes of the nuclear norm's second derivative)"""

    @staticmethod
    def forward(ctx, a, which):
        u, s, vh = svd(a)
        ctx.save(u=u, s=s, v=np.swapaxes(vh, -1, -2))
        ctx.which = which
        ctx.save_for_backward(a)
        return (ctx.u if which == "U" else ctx.v).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        u, s, v = _svd_factors(ctx, a)
        g = in_opmath(ctx.xp, g)
        da = svd_backward(ctx.xp, u, s, v, gu=g) if ctx.which == "U" else svd_backward(ctx.xp, u, s, v, gv=g)
        return (to_dtype(ctx.xp, da, a.dtype),)

    @staticmethod
    def jvp(ctx, ta):
        (a,) = ctx.saved_arrays
        u, s, v = _svd_factors(ctx, a)
        return to_dtype(ctx.xp, svd_jvp(ctx.xp, u, s, v, in_opmath(ctx.xp, ta), ctx.which), a.dtype)
