"""RMSNorm (Zhang and Sennrich, 2019), with its backward and forward-mode rule derived by hand: one graph node where
the composite (square, mean, rsqrt, two products) would record five. docs/backprop.md ("RMSNorm") derives them.
Notation as in layer_norm.py: x the input, g = dL/dy, a dot a tangent, means over the normalized (last k) dims.

    rstd = (mean(x^2) + eps)^-1/2,  xhat = x * rstd,  y = xhat * w
    dxhat = g * w;  dx = rstd * (dxhat - xhat * mean(dxhat * xhat));  dw = sum over rows of g * xhat
    ẏ = ẋhat * w + xhat * ẇ,  ẋhat = rstd * (ẋ - xhat * mean(xhat * ẋ))

It is LayerNorm without the centring: the same formulas with the mean(dxhat) term gone. Every formula is written
with operators and `ctx.xp`, and the backward recomputes rstd from the saved x rather than keeping it, so that under
create_graph the same lines record a graph (second order, forward over reverse). float16 computes in float32 and
rounds once, as PyTorch's CPU kernel does.
"""

from __future__ import annotations

from ..autograd import Function, tangent_sum
from .reductions import in_opmath, opmath_dtype, to_dtype


def _normalized(xp, x, axes: tuple, eps: float):
    """(xhat, rstd): xhat = x * rstd, rstd = (mean(x^2) + eps)^-1/2 over axes, kept as size-1 dims."""
    rstd = 1.0 / xp.sqrt(xp.mean(x * x, axis=axes, keepdims=True) + eps)
    return x * rstd, rstd


def _normalization_vjp(xp, v, xhat, rstd, axes: tuple):
    """rstd * (v - xhat * mean(v * xhat)): xhat's Jacobian (symmetric) times v; dx for v = dxhat, ẋhat for v = ẋ."""
    return rstd * (v - xhat * xp.mean(v * xhat, axis=axes, keepdims=True))


class RMSNorm(Function):
    """y = x / sqrt(mean(x^2) + eps) * w over the last k dims;  dx = rstd * (dxhat - xhat * mean(dxhat * xhat)),
    dxhat = g * w;  dw = sum over rows of g * xhat.  ẏ = rstd * (ẋ - xhat * mean(xhat * ẋ)) * w + xhat * ẇ."""

    max_inputs = 2  # x, weight; the weight optional

    @staticmethod
    def forward(ctx, x, weight=None, k=1, eps=1e-6):
        dtype = x.dtype
        ctx.save_for_backward(x, *(() if weight is None else (weight,)))
        ctx.axes, ctx.eps = tuple(range(x.ndim - k, x.ndim)), eps
        x, weight = (to_dtype(ctx.xp, t, opmath_dtype(dtype)) for t in (x, weight))
        xhat, _ = _normalized(ctx.xp, x, ctx.axes, eps)
        return to_dtype(ctx.xp, xhat if weight is None else xhat * weight, dtype)

    @staticmethod
    def backward(ctx, g):
        xp, axes = ctx.xp, ctx.axes
        x, w = (ctx.saved_arrays + (None,))[:2]
        dtype = x.dtype
        x, w, g = (None if t is None else in_opmath(xp, t) for t in (x, w, g))
        need_x, need_w = (ctx.needs_input_grad + (False,))[:2]
        xhat, rstd = _normalized(xp, x, axes, ctx.eps)
        gx = _normalization_vjp(xp, g if w is None else g * w, xhat, rstd, axes) if need_x else None
        rows = tuple(range(g.ndim - len(axes)))
        gw = xp.sum(g * xhat, axis=rows) if need_w and w is not None else None
        return to_dtype(xp, gx, dtype), to_dtype(xp, gw, dtype)

    @staticmethod
    def jvp(ctx, tx, tw=None):
        xp, axes = ctx.xp, ctx.axes
        x, w = (ctx.saved_arrays + (None,))[:2]
        dtype = x.dtype
        x, w, tx, tw = (None if t is None else in_opmath(xp, t) for t in (x, w, tx, tw))
        xhat, rstd = _normalized(xp, x, axes, ctx.eps)
        txhat = None if tx is None else _normalization_vjp(xp, tx, xhat, rstd, axes)
        if txhat is not None and w is not None:
            txhat = txhat * w
        return to_dtype(xp, tangent_sum(txhat, None if tw is None else xhat * tw), dtype)
