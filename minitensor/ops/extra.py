"""Primitives added for the names a PyTorch user reaches for: the vector 2-norm and the inf-norms.

Most other such names (gather, sort, topk, mse_loss, l1_loss, ...) are exact composites of existing
primitives (binary_cross_entropy_with_logits is fused, in fused.py, and logsigmoid is elementwise.py's
LogSigmoid); the 2-norm needs its own node because the composite
sqrt(sum(a * a)) has the gradient 0/0 = NaN at a = 0, where PyTorch's norm gives 0, and the inf-norms
because PyTorch's gradient treats a NaN entry as an extremum with gradient 0 (amax(|a|) would give NaN).
"""

from __future__ import annotations

import numpy as np

from ..autograd import Function
from .reductions import _reduced_count, expand_reduced, opmath_dtype


class Norm(Function):
    """out = sqrt(sum a^2) over dim (the 2-norm);  da = g * a / out, and 0 where out == 0
    (PyTorch's subgradient at the origin, where the formula would be 0/0)"""

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False):
        x = a.astype(opmath_dtype(a.dtype), copy=False)  # float16 squared and summed in float32 (PyTorch's)
        # float32 and float64 square in their own dtype: beyond sqrt of the largest number the norm is inf, and
        # below sqrt of the smallest it is 0, as PyTorch's CPU norm gives (it does not rescale); over one element it
        # is |a| itself, as PyTorch's (a sum of one element: |a| exactly, whose square might underflow).
        # Deviation, kept: PyTorch's 0-d tensor with an explicit dim takes sqrt(a^2) there (inf or 0 beyond the
        # square's range); ours |a|, as PyTorch for every other one-element norm.
        if _reduced_count(a.shape, dim) == 1:
            out = np.abs(x).sum(axis=dim, keepdims=keepdim)
        else:
            out = np.sqrt((x * x).sum(axis=dim, keepdims=keepdim))
        out = np.asarray(out).astype(a.dtype, copy=False)
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


class NormInf(Function):
    """out = max |a| (mode 'max', p = inf) or min |a| (mode 'min', p = -inf) over dim;
    da = g * sign(a) * [|a| == out or NaN] / count, as PyTorch: g is shared evenly between tied extrema, and a NaN
    entry counts as one (its sign, and so its gradient, is 0), so a NaN norm sends 0 to every entry, where the
    composite amax(|a|) would spread NaN over the slice."""

    @staticmethod
    def forward(ctx, a, dim=None, keepdim=False, mode="max"):
        if a.size == 0 and (dim is None or any(a.shape[d] == 0 for d in dim)):
            raise ValueError(
                f"norm: p={'inf' if mode == 'max' else '-inf'} cannot reduce over a zero-size dim "
                f"(input of shape {a.shape}, dim {dim})"
            )
        size = np.abs(a)
        out = size.max(axis=dim, keepdims=True) if mode == "max" else size.min(axis=dim, keepdims=True)
        chosen = (size == out) | np.isnan(size)
        ctx.chosen, ctx.count = chosen, chosen.sum(axis=dim, keepdims=True).astype(a.dtype)
        ctx.save_for_backward(a)
        ctx.dim, ctx.keepdim = dim, keepdim
        return np.asarray(out if keepdim else out.reshape(()) if dim is None else np.squeeze(out, axis=dim))

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_arrays
        g = expand_reduced(g, a.ndim, ctx.dim, ctx.keepdim)
        return (ctx.xp.sign(a) * (g / ctx.count * ctx.chosen),)
