"""LayerNorm, with its backward derived by hand: one graph node where the composite (mean, var, rsqrt, ...) would record
several and keep their temporaries. docs/backprop.md derives the formulas; tests/minitensor/ops/test_fused.py checks
the op equal to the composite it replaces. Notation as in fused.py: x the input, g = dL/dy, a dot a tangent.

    xhat = (x - mu) * rstd, rstd = (var + eps)^-1/2, y = xhat * w + b
    dxhat = g * w;  dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
    dw = sum over rows of g * xhat;  db = sum over rows of g

float16 computes in float32 and rounds its results (output and gradients) to float16 once, as PyTorch's CPU kernel
does (reductions.opmath_dtype); float32 and float64 compute in their own dtype. The formulas below are slots
(`fast.use.layer_norm`, `layer_norm_grads`, and LayerNorm.backward_jvp), which
minitensor/fast/layer_norm.py fills with faster ways to the same numbers.
"""

from __future__ import annotations

import numpy as np

from .. import fast
from ..autograd import Function, tangent_sum
from .reductions import in_opmath, opmath_dtype, to_dtype


class LayerNorm(Function):
    """y = (x - mean) / sqrt(var + eps) * w + b over the last k dims (biased variance);
    dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * w
    ẏ = ẋhat * w + xhat * ẇ + ḃ,  ẋhat = rstd * (ẋ - mean(ẋ) - xhat * mean(ẋ * xhat))
    (xhat's Jacobian is symmetric, so ẋhat is dx's formula with ẋ for dxhat: docs/backprop.md §4 and "Forward mode")
    Deviation from PyTorch: where dxhat holds an inf (an infinite weight or g), dx is +-inf or NaN by this
    order of sums; PyTorch's kernel (another order) gives NaN for the whole row. Non-finite either way."""

    max_inputs = 3  # x, weight, bias; the affine ones optional
    backward_jvp = None  # forward over reverse's speed device, when one is in force (fast/layer_norm.py)

    @staticmethod
    def forward(ctx, x, weight=None, bias=None, k=1, eps=1e-5):
        axes, dtype = tuple(range(x.ndim - k, x.ndim)), x.dtype
        ctx.save_for_backward(x, *(() if weight is None else (weight,)))
        # float16: statistics, output and gradients in float32, each rounded to float16 once (PyTorch's kernel);
        # in float16 itself the squares of activations of a few hundred overflow and the row becomes NaN
        x, weight, bias = (to_dtype(ctx.xp, t, opmath_dtype(dtype)) for t in (x, weight, bias))
        ctx.axes, ctx.eps = axes, eps
        out, mean, rstd = fast.use.layer_norm(ctx.xp, x, weight, bias, axes, eps)
        # The row statistics are kept, not xhat: xhat is rebuilt in the backward, so a layer norm holds one
        # activation-sized array (its input) until then instead of two (as PyTorch keeps mean and rstd).
        ctx.save(mean=mean, rstd=rstd)
        return to_dtype(ctx.xp, out, dtype)

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        x, w = (ctx.saved_arrays + (None,))[:2]
        dtype = x.dtype
        x, w, g = (None if t is None else in_opmath(xp, t) for t in (x, w, g))
        return tuple(to_dtype(xp, t, dtype) for t in fast.use.layer_norm_grads(ctx, x, w, g))

    @staticmethod
    def jvp(ctx, tx, tw=None, tb=None):
        xp, axes = ctx.xp, ctx.axes
        x, w = (ctx.saved_arrays + (None,))[:2]
        dtype = x.dtype
        x, w, tx, tw, tb = (None if t is None else in_opmath(xp, t) for t in (x, w, tx, tw, tb))
        xhat, rstd = xhat_rstd(ctx, x)
        dxhat = None
        if tx is not None:
            dxhat = normalization_vjp(xp, tx, xhat, rstd, axes, ctx.eps)
            dxhat = dxhat * w if w is not None else dxhat
        return to_dtype(xp, tangent_sum(dxhat, xhat * tw if tw is not None else None, tb), dtype)


def layer_norm(xp, x, weight, bias, axes: tuple, eps: float):
    """(xhat * weight + bias, mean, rstd), the affine map where weight and bias are given: LayerNorm's forward."""
    xhat, mean, rstd = normalized(xp, x, axes, eps)
    if weight is None:
        return xhat, mean, rstd
    return (xhat * weight if bias is None else xhat * weight + bias), mean, rstd


def layer_norm_grads(ctx, x, w, g):
    """(dx, dw, db) in x's dtype (float32 for a float16 layer norm), None where not needed: LayerNorm's backward."""
    xp, axes = ctx.xp, ctx.axes
    need_x, need_w, need_b = ctx.needs_input_grad
    xhat, rstd = xhat_rstd(ctx, x)
    rows = tuple(range(g.ndim - len(axes)))
    gw = xp.sum(g * xhat, axis=rows) if need_w else None
    gb = xp.sum(g, axis=rows) if need_b else None
    gx = normalization_vjp(xp, g * w if w is not None else g, xhat, rstd, axes, ctx.eps) if need_x else None
    return gx, gw, gb


def xhat_rstd(ctx, x):
    """(xhat, rstd) for LayerNorm's backward and JVP: xhat = (x - mean) * rstd rebuilt from the row statistics the
    forward kept, bit for bit the forward's; on Tensors (create_graph, a recorded rule; ctx.intermediate's rule)
    the whole normalization recomputed from the saved x, so that both are differentiable."""
    if not ctx.create_graph:
        return (x - ctx.mean) * ctx.rstd, ctx.rstd
    xhat, _, rstd = normalized(ctx.xp, x, ctx.axes, ctx.eps)
    return xhat, rstd


fast.formula("layer_norm", layer_norm)
fast.formula("layer_norm_grads", layer_norm_grads)
fast.formula("layer_norm_backward_jvp", None, owner=LayerNorm, attr="backward_jvp")


def normalization_vjp(xp, v, xhat, rstd, axes: tuple, eps: float, m=None):
    """rstd * (v - mean(v) - xhat * mean(v * xhat)): xhat's Jacobian (symmetric) times v, which is dx for v = dxhat
    and ẋhat for v = ẋ (m: mean(v * xhat), when the caller has it).

    Over two elements the same value is eps * rstd^3 * (v - mean(v)), and that form is taken: there xhat = +-h with
    h^2 = var rstd^2, so xhat * mean(v * xhat) = h^2 (v - mean(v)), and 1 - h^2 = eps rstd^2. The general form gets
    that eps part as the difference of two nearly equal terms and loses about -log10(eps rstd^2) digits (dx of a
    (1, 2) row of variance 1 with eps 1e-5: 4e-11 from the exact value; PyTorch's kernel, 7e-11); this one is exact
    to round-off. With three or more elements the terms cancel only where v nearly lies in the span of 1 and xhat,
    and there a round-off change of v moves dx as much: the problem's own condition, no formula's."""
    if normalized_size(xhat, axes) == 2:
        return (eps * rstd * rstd * rstd) * (v - mean_over(xp, v, axes))
    m = mean_over(xp, v * xhat, axes) if m is None else m
    return rstd * (v - mean_over(xp, v, axes) - xhat * m)


def normalized_size(a, axes: tuple) -> int:
    """How many elements each normalized row of `a` holds (the product of the normalized dims)."""
    return int(np.prod([a.shape[d] for d in axes]))


def normalized(xp, x, axes: tuple, eps: float):
    """(xhat, mean, rstd): xhat = (x - mean) * rstd, rstd = (var + eps)^-1/2 over axes (biased variance).
    Deviation from PyTorch, flagged: NumPy's mean of a row of equal numbers can be an ulp off their value (torch's
    is exact there), and rstd = eps^-1/2 multiplies it into xhat: about 1e-13 in float64, 1e-4 in float32, where torch
    gives 0 (tests/minitensor/ops/test_edge_values.py bounds it; making it exact cost cached decoding 4%)."""
    mean = xp.mean(x, axis=axes, keepdims=True)
    xc = x - mean
    var = xp.mean(xc * xc, axis=axes, keepdims=True)
    rstd = rstd_of(xp, var, eps)
    return xc * rstd, mean, rstd


def rstd_of(xp, var, eps: float):
    """(var + eps)^-1/2, NaN where var overflowed (finite |x| beyond ~1e154 would make rstd 0 and the output the
    bias: NaN instead, as PyTorch gives)."""
    return xp.where(var == np.inf, np.nan, 1.0 / xp.sqrt(var + var.dtype.type(eps)))


def mean_over(xp, a, axes: tuple):
    """The mean of a over the normalized axes, kept as size-1 dims (broadcasts against a)."""
    return xp.mean(a, axis=axes, keepdims=True)
