"""Primitives added for the names a PyTorch user reaches for: the vector 2-norm.

The other such names (gather, sort, topk, mse_loss, binary_cross_entropy_with_logits, ...) are exact
composites of existing primitives; the 2-norm needs its own node because the composite
sqrt(sum(a * a)) has the gradient 0/0 = NaN at a = 0, where PyTorch's norm gives 0.
"""
from __future__ import annotations

import numpy as np

from ..autograd import Function
from .reductions import expand_reduced


class Norm(Function):
    """out = sqrt(sum a^2) over dim (the 2-norm);  da = g * a / out, and 0 where out == 0
    (PyTorch's subgradient at the origin, where the formula would be 0/0)"""
    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        out = np.asarray(np.sqrt((a * a).sum(axis=dim, keepdims=keepdim)))
        ctx.save_for_backward(a, out)
        ctx.dim, ctx.keepdim = dim, keepdim
        return out

    @staticmethod
    def backward(ctx, g):
        a, out = ctx.saved_arrays
        g, out = (expand_reduced(t, a.ndim, ctx.dim, ctx.keepdim) for t in (g, out))
        # PyTorch's formula, g * (a / out) with 0 where out == 0: differentiated again, the 0/0 of a / out
        # makes the second derivative at the origin NaN (it does not exist: (I - u u^T) / out is unbounded)
        return (g * ctx.xp.where(out == 0, 0, a / out),)
