"""Every differentiable primitive of minitensor: its forward and its vector-Jacobian product side by side.

Conventions inside a backward: `g` is the incoming gradient (the shape of the op's output),
`ctx.out` the forward result when it was saved. Gradients are returned in the output's broadcast
shape: the graph walk (autograd.unbroadcast) sums them back to each input's shape, so no formula
here deals with broadcasting. `ctx.needs_input_grad[i]` lets a backward skip work for inputs that
do not need a gradient (a mask, a constant). No backward writes into `g` or into a saved array.

The fused ops of the nn layer (softmax, log_softmax, layer_norm, cross_entropy, linear, ...) live in
nn/functional.py with their derivations.
"""
from __future__ import annotations

import math

import numpy as np

from .autograd import Function


def _expand_reduced(g: np.ndarray, shape: tuple, axes, keepdim: bool) -> np.ndarray:
    """Re-insert reduced axes into g (when keepdim=False) so it broadcasts against the input's shape."""
    if axes is None:
        return np.reshape(g, (1,) * len(shape)) if not keepdim else g
    if not keepdim:
        g = np.expand_dims(g, axes)
    return g


# ----------------------------------------------------------------------------- arithmetic

class Add(Function):
    """out = a + b;  da = g, db = g"""
    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, g):
        return g, g


class Sub(Function):
    """out = a - b;  da = g, db = -g"""
    @staticmethod
    def forward(ctx, a, b):
        return a - b

    @staticmethod
    def backward(ctx, g):
        return g, (-g if ctx.needs_input_grad[1] else None)


class Mul(Function):
    """out = a * b;  da = g * b, db = g * a"""
    @staticmethod
    def forward(ctx, a, b):
        ctx.a, ctx.b = a, b
        return a * b

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        return (g * ctx.b if na else None), (g * ctx.a if nb else None)


class Div(Function):
    """out = a / b;  da = g / b, db = -g * a / b^2 = -g * out / b"""
    @staticmethod
    def forward(ctx, a, b):
        out = a / b
        ctx.b, ctx.out = b, out
        return out

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        ga = g / ctx.b if na else None
        gb = -g * ctx.out / ctx.b if nb else None
        return ga, gb


class Pow(Function):
    """out = a ** b (both tensors);  da = g * b * a^(b-1), db = g * out * log(a)"""
    @staticmethod
    def forward(ctx, a, b):
        out = np.power(a, b)
        ctx.a, ctx.b, ctx.out = a, b, out
        return out

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        a, b = ctx.a, ctx.b
        ga = None
        if na:
            with np.errstate(divide="ignore", invalid="ignore"):
                # PyTorch defines da as 0 where b == 0 (0 * a^-1 would give NaN at a == 0)
                ga = g * np.where(b == 0, 0, b * np.power(a, b - 1))
        gb = None
        if nb:
            with np.errstate(divide="ignore", invalid="ignore"):
                # d/db a^b = a^b log a; PyTorch defines it as 0 where a == 0 and b >= 0
                gb = g * np.where((a == 0) & (b >= 0), 0, ctx.out * np.log(a))
        return ga, gb


class PowScalar(Function):
    """out = a ** e (e a Python number);  da = g * e * a^(e-1)"""
    @staticmethod
    def forward(ctx, a, exponent):
        ctx.a, ctx.e = a, exponent
        return np.power(a, a.dtype.type(exponent))

    @staticmethod
    def backward(ctx, g):
        a, e = ctx.a, ctx.e
        if e == 0:
            return (np.zeros_like(a) * g,)
        if e == 2:
            return (g * (2 * a),)
        return (g * (e * np.power(a, a.dtype.type(e - 1))),)


class RPowScalar(Function):
    """out = c ** a (c a Python number);  da = g * out * log(c)"""
    @staticmethod
    def forward(ctx, a, base):
        out = np.power(a.dtype.type(base), a)
        ctx.out, ctx.logc = out, math.log(base) if base > 0 else float("nan")
        return out

    @staticmethod
    def backward(ctx, g):
        return (g * ctx.out * ctx.out.dtype.type(ctx.logc),)


class Neg(Function):
    """out = -a;  da = -g"""
    @staticmethod
    def forward(ctx, a):
        return -a

    @staticmethod
    def backward(ctx, g):
        return (-g,)


class MatMul(Function):
    """out = a @ b (NumPy's batched broadcasting; 1-D operands as in torch.matmul);
    da = g @ b^T, db = a^T @ g, each summed over broadcast batch dimensions."""
    @staticmethod
    def forward(ctx, a, b):
        ctx.a, ctx.b = a, b
        return np.matmul(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.a, ctx.b
        na, nb = ctx.needs_input_grad
        if a.ndim == 1 and b.ndim == 1:
            return (g * b if na else None), (g * a if nb else None)
        a2 = a[None, :] if a.ndim == 1 else a          # (1, K)
        b2 = b[:, None] if b.ndim == 1 else b          # (K, 1)
        g2 = g
        if a.ndim == 1:
            g2 = np.expand_dims(g2, -2)
        if b.ndim == 1:
            g2 = np.expand_dims(g2, -1)
        ga = gb = None
        if na:
            ga = np.matmul(g2, np.swapaxes(b2, -1, -2))
            if a.ndim == 1:
                ga = ga[..., 0, :]
        if nb:
            if b2.ndim == 2 and a2.ndim > 2:        # weights (K,N) shared across a batch: one GEMM
                gb = a2.reshape(-1, a2.shape[-1]).T @ g2.reshape(-1, g2.shape[-1])
            else:
                gb = np.matmul(np.swapaxes(a2, -1, -2), g2)
            if b.ndim == 1:
                gb = gb[..., 0]
        return ga, gb


# ----------------------------------------------------------------------------- elementwise

class Exp(Function):
    """out = e^a;  da = g * out"""
    @staticmethod
    def forward(ctx, a):
        ctx.out = np.exp(a)
        return ctx.out

    @staticmethod
    def backward(ctx, g):
        return (g * ctx.out,)


class Log(Function):
    """out = ln a;  da = g / a"""
    @staticmethod
    def forward(ctx, a):
        ctx.a = a
        return np.log(a)

    @staticmethod
    def backward(ctx, g):
        return (g / ctx.a,)


class Sqrt(Function):
    """out = sqrt(a);  da = g / (2 out)"""
    @staticmethod
    def forward(ctx, a):
        ctx.out = np.sqrt(a)
        return ctx.out

    @staticmethod
    def backward(ctx, g):
        return (g / (2 * ctx.out),)


class Abs(Function):
    """out = |a|;  da = g * sign(a)  (0 at a == 0, as in PyTorch)"""
    @staticmethod
    def forward(ctx, a):
        ctx.a = a
        return np.abs(a)

    @staticmethod
    def backward(ctx, g):
        return (g * np.sign(ctx.a),)


class Tanh(Function):
    """out = tanh a;  da = g * (1 - out^2)"""
    @staticmethod
    def forward(ctx, a):
        ctx.out = np.tanh(a)
        return ctx.out

    @staticmethod
    def backward(ctx, g):
        return (g * (1 - ctx.out * ctx.out),)


class Sigmoid(Function):
    """out = 1 / (1 + e^-a);  da = g * out * (1 - out)"""
    @staticmethod
    def forward(ctx, a):
        # split by sign so that e^x never overflows
        with np.errstate(over="ignore"):
            e = np.exp(-np.abs(a))
        out = np.where(a >= 0, 1 / (1 + e), e / (1 + e)).astype(a.dtype, copy=False)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, g):
        return (g * ctx.out * (1 - ctx.out),)


class Relu(Function):
    """out = max(a, 0);  da = g * [a > 0]"""
    @staticmethod
    def forward(ctx, a):
        out = np.maximum(a, 0)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, g):
        return (g * (ctx.out > 0),)


# erf for the exact GELU. NumPy has no erf: float64 uses math.erf element by element (exact, slow);
# float32 uses the Chebyshev fit of erfc from Numerical Recipes (fractional error < 1.2e-7 everywhere,
# about two float32 ulps), evaluated in float32.
_math_erf = np.frompyfunc(math.erf, 1, 1)
_ERFC_COEFFS = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def _erf(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.float64:
        return _math_erf(x).astype(np.float64)
    # float32: the fit evaluated in float32, in place (one temporary per intermediate, not per step)
    z = np.abs(x)
    t = z * x.dtype.type(0.5)
    t += 1
    np.reciprocal(t, out=t)
    poly = np.full_like(t, _ERFC_COEFFS[-1])
    for c in reversed(_ERFC_COEFFS[:-1]):
        poly *= t
        poly += x.dtype.type(c)
    z *= z
    np.subtract(poly, z, out=poly)
    np.exp(poly, out=poly)
    poly *= t                                   # erfc(|x|)
    return np.where(x >= 0, 1 - poly, poly - 1)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


class Gelu(Function):
    """approximate='none': out = a * Phi(a), da = g * (Phi(a) + a * phi(a));
    approximate='tanh':   out = a/2 (1 + tanh u), u = sqrt(2/pi)(a + 0.044715 a^3),
                          da = g * (1/2 (1 + t) + a/2 (1 - t^2) sqrt(2/pi)(1 + 3*0.044715 a^2))."""
    @staticmethod
    def forward(ctx, a, approximate="none"):
        ctx.a, ctx.approximate = a, approximate
        dt = a.dtype.type
        if approximate == "tanh":
            t = np.tanh(dt(_SQRT_2_OVER_PI) * (a + dt(0.044715) * a * a * a))
            ctx.t = t
            return dt(0.5) * a * (1 + t)
        cdf = dt(0.5) * (1 + _erf(a * dt(_INV_SQRT_2)))
        ctx.cdf = cdf
        return a * cdf

    @staticmethod
    def backward(ctx, g):
        a = ctx.a
        dt = a.dtype.type
        if ctx.approximate == "tanh":
            t = ctx.t
            du = dt(_SQRT_2_OVER_PI) * (1 + dt(3 * 0.044715) * a * a)
            return (g * (dt(0.5) * (1 + t) + dt(0.5) * a * (1 - t * t) * du),)
        pdf = dt(_INV_SQRT_2PI) * np.exp(dt(-0.5) * a * a)
        return (g * (ctx.cdf + a * pdf),)


class Clamp(Function):
    """out = min(max(a, lo), hi);  da = g where lo <= a <= hi (inclusive, as in PyTorch), else 0"""
    @staticmethod
    def forward(ctx, a, min=None, max=None):
        ctx.a, ctx.lo, ctx.hi = a, min, max
        return np.clip(a, min, max).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        a = ctx.a
        keep = np.ones(a.shape, dtype=bool)
        if ctx.lo is not None:
            keep &= a >= ctx.lo
        if ctx.hi is not None:
            keep &= a <= ctx.hi
        return (g * keep,)


class Maximum(Function):
    """out = max(a, b);  the gradient goes to the larger input, split in half on ties (as in PyTorch)"""
    @staticmethod
    def forward(ctx, a, b):
        ctx.a, ctx.b = a, b
        return np.maximum(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.a, ctx.b
        w = (a > b) + 0.5 * (a == b)
        w = w.astype(g.dtype, copy=False)
        return g * w, g * (1 - w)


class Minimum(Function):
    """out = min(a, b);  the gradient goes to the smaller input, split in half on ties"""
    @staticmethod
    def forward(ctx, a, b):
        ctx.a, ctx.b = a, b
        return np.minimum(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.a, ctx.b
        w = (a < b) + 0.5 * (a == b)
        w = w.astype(g.dtype, copy=False)
        return g * w, g * (1 - w)


class Where(Function):
    """out = cond ? a : b;  da = g where cond, db = g where not cond"""
    @staticmethod
    def forward(ctx, a, b, cond):
        ctx.cond = cond
        return np.where(cond, a, b)

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        zero = g.dtype.type(0)
        return (np.where(ctx.cond, g, zero) if na else None), (np.where(ctx.cond, zero, g) if nb else None)


class MaskedFill(Function):
    """out = mask ? value : a  (mask broadcast to a's shape);  da = g where not mask"""
    @staticmethod
    def forward(ctx, a, mask, value):
        ctx.mask = mask
        return np.where(mask, a.dtype.type(value), a)

    @staticmethod
    def backward(ctx, g):
        return (np.where(ctx.mask, g.dtype.type(0), g),)


class Cast(Function):
    """out = a as another float dtype;  da = g cast back to a's dtype"""
    @staticmethod
    def forward(ctx, a, dtype):
        ctx.dtype = a.dtype
        return a.astype(dtype)

    @staticmethod
    def backward(ctx, g):
        return (g.astype(ctx.dtype),)


class Clone(Function):
    """out = a copied into fresh memory (C order);  da = g"""
    @staticmethod
    def forward(ctx, a):
        return np.array(a, order="C", copy=True)

    @staticmethod
    def backward(ctx, g):
        return (g,)


# ----------------------------------------------------------------------------- reductions

class Sum(Function):
    """out = sum of a over dim;  da = g broadcast back over the reduced axes"""
    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        ctx.shape, ctx.dim, ctx.keepdim = a.shape, dim, keepdim
        return np.asarray(a.sum(axis=dim, keepdims=keepdim))

    @staticmethod
    def backward(ctx, g):
        if ctx.dim is None:                     # a scalar spread over the input: a filled array is cheapest
            return (np.full(ctx.shape, g, dtype=g.dtype),)
        g = _expand_reduced(g, ctx.shape, ctx.dim, ctx.keepdim)
        return (np.broadcast_to(g, ctx.shape),)


class Mean(Function):
    """out = mean of a over dim;  da = g / n broadcast back"""
    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        ctx.shape, ctx.dim, ctx.keepdim = a.shape, dim, keepdim
        out = np.asarray(a.mean(axis=dim, keepdims=keepdim))
        ctx.n = a.size // max(out.size, 1) if a.size else 0
        return out

    @staticmethod
    def backward(ctx, g):
        g = _expand_reduced(g, ctx.shape, ctx.dim, ctx.keepdim)
        return (np.broadcast_to(g / g.dtype.type(ctx.n), ctx.shape),)


class Var(Function):
    """out = sum((a - mean)^2) / (n - correction);  da = g * 2 (a - mean) / (n - correction)"""
    @staticmethod
    def forward(ctx, a, dim=None, correction=1, keepdim=False):
        mean = a.mean(axis=dim, keepdims=True)
        centered = a - mean
        n = a.size // max(mean.size, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.asarray((centered * centered).sum(axis=dim, keepdims=keepdim) / a.dtype.type(n - correction))
        ctx.centered, ctx.denom, ctx.dim, ctx.keepdim, ctx.shape = centered, n - correction, dim, keepdim, a.shape
        return out

    @staticmethod
    def backward(ctx, g):
        g = _expand_reduced(g, ctx.shape, ctx.dim, ctx.keepdim)
        return (g * ctx.centered * g.dtype.type(2.0 / ctx.denom),)


class MaxMin(Function):
    """out = max (or min) of a over one dim;  da = g at the selected index (the first one), 0 elsewhere.
    Over all elements (dim=None): g is shared evenly between tied maxima (as in PyTorch's max())."""
    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False, mode="max"):
        ctx.shape, ctx.dim, ctx.keepdim = a.shape, dim, keepdim
        if dim is None:
            out = np.asarray(a.max() if mode == "max" else a.min())
            ctx.tie_mask = a == out
            return out
        idx = np.argmax(a, axis=dim) if mode == "max" else np.argmin(a, axis=dim)
        idx = np.expand_dims(idx, dim)
        ctx.idx = idx
        out = np.take_along_axis(a, idx, axis=dim)
        return out if keepdim else np.squeeze(out, axis=dim)

    @staticmethod
    def backward(ctx, g):
        if ctx.dim is None:
            m = ctx.tie_mask
            return (np.where(m, g / g.dtype.type(m.sum()), g.dtype.type(0)),)
        grad = np.zeros(ctx.shape, dtype=g.dtype)
        g = g if ctx.keepdim else np.expand_dims(g, ctx.dim)
        np.put_along_axis(grad, ctx.idx, g, axis=ctx.dim)
        return (grad,)


class AMaxMin(Function):
    """out = amax (or amin) over dim(s);  g shared evenly between tied extrema (as in PyTorch's amax)"""
    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False, mode="max"):
        out = a.max(axis=dim, keepdims=True) if mode == "max" else a.min(axis=dim, keepdims=True)
        mask = a == out
        ctx.mask, ctx.count, ctx.dim, ctx.keepdim, ctx.shape = mask, mask.sum(axis=dim, keepdims=True), dim, keepdim, a.shape
        return np.asarray(out if keepdim else (out.reshape(()) if dim is None else np.squeeze(out, axis=dim)))

    @staticmethod
    def backward(ctx, g):
        g = _expand_reduced(g, ctx.shape, ctx.dim, ctx.keepdim)
        return (np.where(ctx.mask, g / ctx.count.astype(g.dtype), g.dtype.type(0)),)


class LogSumExp(Function):
    """out = m + log(sum(e^(a - m))), m = max a (finite);  da = g * e^(a - out)"""
    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        m = np.max(a, axis=dim, keepdims=True) if a.size else np.zeros((1,) * a.ndim, a.dtype)
        m = np.where(np.isfinite(m), m, 0).astype(a.dtype, copy=False)
        with np.errstate(divide="ignore"):
            out = np.log(np.exp(a - m).sum(axis=dim, keepdims=True)) + m
        ctx.a, ctx.out_k, ctx.dim, ctx.keepdim, ctx.shape = a, out, dim, keepdim, a.shape
        return np.asarray(out if keepdim else (out.reshape(()) if dim is None else np.squeeze(out, axis=dim)))

    @staticmethod
    def backward(ctx, g):
        g = _expand_reduced(g, ctx.shape, ctx.dim, ctx.keepdim)
        with np.errstate(invalid="ignore"):
            return (g * np.exp(ctx.a - ctx.out_k),)


# ----------------------------------------------------------------------------- shape

class Reshape(Function):
    """out = a viewed with a new shape (a copy only when NumPy cannot view);  da = g reshaped back"""
    @staticmethod
    def forward(ctx, a, shape):
        ctx.shape = a.shape
        return a.reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return (g.reshape(ctx.shape),)


class Transpose(Function):
    """out = a with dims d0 and d1 swapped (a view);  da = g swapped back"""
    @staticmethod
    def forward(ctx, a, dim0, dim1):
        ctx.dims = (dim0, dim1)
        return np.swapaxes(a, dim0, dim1)

    @staticmethod
    def backward(ctx, g):
        return (np.swapaxes(g, *ctx.dims),)


class Permute(Function):
    """out = a with axes reordered (a view);  da = g with the inverse permutation"""
    @staticmethod
    def forward(ctx, a, dims):
        ctx.inverse = tuple(np.argsort(dims))
        return np.transpose(a, dims)

    @staticmethod
    def backward(ctx, g):
        return (np.transpose(g, ctx.inverse),)


class Expand(Function):
    """out = a broadcast to shape (a read-only view);  da = g summed back by the graph walk"""
    @staticmethod
    def forward(ctx, a, shape):
        return np.broadcast_to(a, shape)

    @staticmethod
    def backward(ctx, g):
        return (g,)


class Repeat(Function):
    """out = a tiled `sizes` times per dim (torch.Tensor.repeat);  da = g summed over the tiles"""
    @staticmethod
    def forward(ctx, a, sizes):
        ctx.shape, ctx.sizes = a.shape, sizes
        return np.tile(a, sizes)

    @staticmethod
    def backward(ctx, g):
        shape = (1,) * (len(ctx.sizes) - len(ctx.shape)) + ctx.shape
        split = []
        for r, n in zip(ctx.sizes, shape):
            split += [r, n]
        g = g.reshape(split).sum(axis=tuple(range(0, len(split), 2)))
        return (g.reshape(ctx.shape),)


class Cat(Function):
    """out = inputs joined along dim;  each input's gradient is its slice of g"""
    @staticmethod
    def forward(ctx, *arrays, dim=0):
        ctx.dim = dim
        ctx.bounds = np.cumsum([x.shape[dim] for x in arrays])[:-1]
        return np.concatenate(arrays, axis=dim)

    @staticmethod
    def backward(ctx, g):
        return tuple(np.split(g, ctx.bounds, axis=ctx.dim))


class Stack(Function):
    """out = inputs stacked along a new dim;  each input's gradient is g indexed at its position"""
    @staticmethod
    def forward(ctx, *arrays, dim=0):
        ctx.dim = dim
        return np.stack(arrays, axis=dim)

    @staticmethod
    def backward(ctx, g):
        return tuple(np.moveaxis(g, ctx.dim, 0))


class Tril(Function):
    """out = lower triangle of the last two dims (entries above `diagonal` zeroed);  da = tril(g)"""
    @staticmethod
    def forward(ctx, a, diagonal=0):
        ctx.k = diagonal
        return np.tril(a, diagonal)

    @staticmethod
    def backward(ctx, g):
        return (np.tril(g, ctx.k),)


class Triu(Function):
    """out = upper triangle of the last two dims;  da = triu(g)"""
    @staticmethod
    def forward(ctx, a, diagonal=0):
        ctx.k = diagonal
        return np.triu(a, diagonal)

    @staticmethod
    def backward(ctx, g):
        return (np.triu(g, ctx.k),)


class GetItem(Function):
    """out = a[index];  da = zeros with g written (basic index) or scatter-added (integer arrays:
    repeated indices accumulate) at index"""
    @staticmethod
    def forward(ctx, a, index, advanced):
        ctx.shape, ctx.index, ctx.advanced = a.shape, index, advanced
        return a[index]

    @staticmethod
    def backward(ctx, g):
        grad = np.zeros(ctx.shape, dtype=g.dtype)
        if ctx.advanced:
            np.add.at(grad, ctx.index, g)
        else:
            grad[ctx.index] = g
        return (grad,)
