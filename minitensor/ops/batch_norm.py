"""BatchNorm's normalisation by the batch's statistics, with its backward and forward-mode rule derived by hand: the
layer norm's formulas (ops/layer_norm.py) with the statistics taken per channel (dim 1) over every other dim instead
of per row over the last k. docs/backprop.md ("Batch normalisation") derives them. Notation as in layer_norm.py.

    xhat = (x - mu) * rstd, mu and var (biased) over dims (0, 2, 3, ...), y = xhat * w + b, w and b of shape (C, 1, ...)
    dxhat = g * w;  dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
    dw = sum over (0, 2, ...) of g * xhat;  db = sum over (0, 2, ...) of g

The evaluation mode, which normalises by the running statistics, is an affine map with constant coefficients: a
composite in nn/functional.py's batch_norm, no primitive. float16 computes in float32 and rounds once, as PyTorch's
CPU kernel does.
"""

from __future__ import annotations

from ..autograd import Function, tangent_sum
from .layer_norm import normalization_vjp, normalized, xhat_rstd
from .reductions import in_opmath, opmath_dtype, to_dtype


class BatchNorm(Function):
    """y = (x - mean) / sqrt(var + eps) * w + b, mean and biased var per channel over dims (0, 2, 3, ...);
    dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * w; dw = sum g * xhat, db = sum g.
    ẏ = ẋhat * w + xhat * ẇ + ḃ, ẋhat = dx's formula with ẋ for dxhat (xhat's Jacobian is symmetric)."""

    max_inputs = 3  # x, weight (C, 1, ...), bias (C, 1, ...); the affine ones optional

    @staticmethod
    def forward(ctx, x, weight=None, bias=None, eps=1e-5):
        dtype = x.dtype
        ctx.save_for_backward(x, *(() if weight is None else (weight,)))
        x, weight, bias = (to_dtype(ctx.xp, t, opmath_dtype(dtype)) for t in (x, weight, bias))
        ctx.axes, ctx.eps = (0, *range(2, x.ndim)), eps
        xhat, mean, rstd = normalized(ctx.xp, x, ctx.axes, eps)
        ctx.save(mean=mean, rstd=rstd)  # the statistics, not xhat: xhat_rstd rebuilds it bit for bit
        out = xhat if weight is None else xhat * weight
        return to_dtype(ctx.xp, out if bias is None else out + bias, dtype)

    @staticmethod
    def backward(ctx, g):
        xp, axes = ctx.xp, ctx.axes
        x, w = (ctx.saved_arrays + (None,))[:2]
        dtype = x.dtype
        x, w, g = (None if t is None else in_opmath(xp, t) for t in (x, w, g))
        need_x, need_w, need_b = ctx.needs_input_grad
        xhat, rstd = xhat_rstd(ctx, x)
        # summed with kept dims, (1, C, 1, ...), then [0]: the (C, 1, ...) shape of w and b
        gw = xp.sum(g * xhat, axis=axes, keepdims=True)[0] if need_w else None
        gb = xp.sum(g, axis=axes, keepdims=True)[0] if need_b else None
        gx = normalization_vjp(xp, g if w is None else g * w, xhat, rstd, axes, ctx.eps) if need_x else None
        return tuple(to_dtype(xp, t, dtype) for t in (gx, gw, gb))

    @staticmethod
    def jvp(ctx, tx, tw=None, tb=None):
        xp = ctx.xp
        x, w = (ctx.saved_arrays + (None,))[:2]
        dtype = x.dtype
        x, w, tx, tw, tb = (None if t is None else in_opmath(xp, t) for t in (x, w, tx, tw, tb))
        xhat, rstd = xhat_rstd(ctx, x)
        txhat = None if tx is None else normalization_vjp(xp, tx, xhat, rstd, ctx.axes, ctx.eps)
        if txhat is not None and w is not None:
            txhat = txhat * w
        return to_dtype(xp, tangent_sum(txhat, None if tw is None else xhat * tw, tb), dtype)
